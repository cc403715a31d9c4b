"""decice-extender: a metrics-aware kube-scheduler extender.

The package is a house of rooms, one concept each. A room may import only the rooms its
line names (and itself); tests/test_architecture.py holds the code to this map, and
pyproject.toml's import-linter contracts keep the outside libraries where they belong.

    errors       may import: nothing
                 failures turned into one safe line of operator text, and the
                 back-off of the background loops that check on an interval
    policy       may import: errors
                 the policy language: models, loading, live reload, the generated
                 reference, check-config's checks, scheduler-config
    decisions    may import: policy
                 pure: snapshot model, pods, scoring, tables, the engine, the herd
                 guard, explanations, the wire format
    metrics      may import: decisions policy errors
                 where node values come from: providers, the refresher
    cluster      may import: decisions policy errors
                 the Kubernetes edge: the API client, watches, leader election,
                 bind, Events, requeue
    rebalancing  may import: decisions policy errors
                 which running pods to move (the plan, pure), and the loop
    doctor       may import: metrics decisions policy errors
                 checks of a policy against a live Prometheus and cluster
    service      may import: cluster rebalancing metrics decisions policy errors
                 the HTTP service: routes, OpenAPI, telemetry, logs, and the
                 composition root (build_service)
    simulation   may import: decisions policy
                 a seeded simulation of placements, kube-scheduler's default
                 scoring against ours (pure; `decice-extender simulate` prints it)
    replay       may import: simulation metrics decisions policy errors
                 the user's own Prometheus history replayed under each scheduler
                 model (range queries through metrics.history; the rest pure)
    cli          may import: every room
                 the `decice-extender` command, a module per command

The verbs' path, start to end: service.verbs reads the request, decisions.wire parses it,
decisions.engine decides from the tables the metrics.refresher built, decisions.wire
encodes the answer. Nothing on that path waits on Prometheus or the API server; bind is
cluster.binder, through cluster.client.
"""

__version__ = "0.1.0"
