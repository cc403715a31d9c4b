"""A seeded simulation of placements: kube-scheduler, with our extender, and the peers.

Users want to check that placing by measured load beats placing by requests, and beats the
other load-aware schedulers, and to check it again tomorrow with the same numbers. So every
scenario is a pure function of a seed (scenarios, workload), every scheduler sees the same
nodes, background load, workloads and pods, and the comparison runs the real decision code:

- kube-scheduler is its default filter and scores, computed the way upstream computes them
  (upstream.py, which names the files it follows), as profiles of plugins (framework.py,
  scheduler.py);
- decice is the same scheduler with this extender: our answers come from
  `extender.decisions.engine.Engine` over the wire format (ours.py), fed node CPU and the
  pods' measured use the way Prometheus would show them, lag included (prometheus.py,
  ledger.py, usagefeed.py);
- the peers (peers/) are Trimaran's TargetLoadPacking and LoadVariationRiskBalancing, fed
  by load-watcher, and Koordinator's LoadAwareScheduling, fed by the koordlet's NodeMetric,
  each read from its sources; profiles.py builds the five;
- run.py steps time, places, retries and retires pods; stats.py measures; summary.py,
  report.py and targets.py turn runs into the table, the JSON document and the targets'
  verdicts; experiment.py runs scenarios x seeds x schedulers.

Pure: no I/O. `decice-extender simulate` (extender.cli.simulate) reads the policy, prints,
writes the JSON and draws the plots.
"""
