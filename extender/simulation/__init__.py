"""A seeded simulation of placements: kube-scheduler, with our extender, and the peers.

Every scenario is a pure function of a seed, every scheduler sees the same nodes, load and
pods, and the comparison runs the real decision code: kube-scheduler's default scoring as
upstream computes it (upstream.py, framework.py, scheduler.py); ours through
`extender.decisions.engine.Engine` over the wire format (ours.py), fed lagged metrics
(prometheus.py, ledger.py, usagefeed.py); the peers (peers/) from their sources
(profiles.py builds the five). run.py steps time; stats.py measures; summary.py,
report.py and targets.py judge; experiment.py runs scenarios x seeds x schedulers.
Pure: no I/O (extender.cli.simulate does it).
"""
