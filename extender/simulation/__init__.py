"""A seeded simulation of placements: kube-scheduler's default scoring against ours.

Users want to check that placing by measured load beats placing by requests, and to check
it again tomorrow with the same numbers. So every scenario is a pure function of a seed
(scenarios, workload), both schedulers see the same nodes, background load and pods, and
the comparison runs the real decision code:

- the baseline is kube-scheduler's default filter and scores, computed from requests the
  way upstream computes them (upstream.py, which names the files it follows);
- ours is the same scheduler with this extender: our answers come from
  `extender.decisions.engine.Engine` over the wire format (ours.py), fed node CPU the way
  Prometheus would show it, lag included (prometheus.py);
- run.py steps time, places, retries and retires pods; stats.py measures; report.py turns
  runs into the table, the JSON document and the targets' verdicts; experiment.py runs
  scenarios x seeds x both schedulers.

Pure: no I/O. `decice-extender simulate` (extender.cli.simulate) reads the policy, prints,
writes the JSON and draws the plots.
"""
