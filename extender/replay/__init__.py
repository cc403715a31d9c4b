"""A replay of the user's own Prometheus history: what each scheduler would have done.

Shadow mode judges placements from the day it is installed and the simulation invents
clusters; the replay answers for the week that just happened, from what a stock
kube-prometheus-stack already keeps:

- collect.py asks extender.metrics.history (the only I/O: range queries in chunks) for
  the series queries.py names, and folds each chunk into facts (facts.py) as it arrives,
  so memory holds the compact facts, never a whole answer;
- reconstruct.py turns the facts into a History (model.py): pod arrivals, requests, each
  pod's measured use relative to its start, and each node's background (its CPU less the
  replayed pods' use: what no scheduler sees). Pure;
- driver.py replays a History under one scheduler model (models.py: the real placements,
  kube-scheduler's default scoring, ours through the real engine) with the simulation's
  lagged metric pipeline and its measures (extender.simulation.prometheus, .stats);
- fidelity.py checks the kube-scheduler model against what happened; report.py prints
  the table and writes the JSON in `simulate --json`'s shape; problems.py holds the bad
  inputs' messages, keys.py the labels the inputs' series must carry, and sizing.py the
  memory estimate.

`decice-extender replay` (extender.cli.replay) reads the policy and drives it.
"""
