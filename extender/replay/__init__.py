"""A replay of the user's own Prometheus history: what each scheduler would have done.

collect.py asks extender.metrics.history (the only I/O) for the series queries.py names,
folding each chunk into facts (facts.py) as it arrives; reconstruct.py turns them into a
History (model.py): arrivals, requests, use, and each node's background; driver.py replays
it under each model (models.py) with the simulation's metric pipeline and measures;
fidelity.py checks the kube-scheduler model against what happened; report.py prints it.
`decice-extender replay` (extender.cli.replay) drives it.
"""
