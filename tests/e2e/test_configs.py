"""Configs accepted: every KubeSchedulerConfiguration we ship is one the real kube-scheduler
starts on, holds its Lease with, and schedules a pod through us with.

* what `decice-extender scheduler-config --full` prints (the config `stack` runs for every
  other story; here for the chart's own policy);
* the `scheduler-config.yaml` key of the scheduler ConfigMap the Helm chart renders from
  its default values and from each values file under deploy/helm/decice-extender/ci/;
* the chart with mutual TLS between the scheduler and the extender (no values file turns
  TLS on, so the story adds one: `extender.tls.secretName` + `clientAuth`). Our service
  runs with a certificate for 127.0.0.1 made by trustme, put where the chart mounts the
  Secret (/etc/decice-tls/ in both rendered files, rewritten to a temporary folder).

Our service runs on the policy the same render puts in the policy ConfigMap, with two
changes: the static provider with this story's node values instead of Prometheus (no
Prometheus here), and no second listener for /metrics (the chart's 0.0.0.0:8889; this
machine is shared and everything stays on 127.0.0.1). The scheduler config is used as
rendered; `start_scheduler` only points it at this control plane (kubeconfig) and at our
service's port (the chart's 8888 may be taken).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from tests.deploy.chart import render_mod
from tests.harness.controlplane import (
    LEASE_NAME,
    LEASE_NAMESPACE,
    ControlPlane,
    PodEvent,
    fake_nodes,
    metric_value,
    pod_manifest,
)
from tests.harness.service import Service

pytestmark = pytest.mark.e2e

#: The chart's values files that run a kube-scheduler (`mode: shadow` runs none: its
#: render is checked in tests/deploy/test_chart_shadow.py).
CI_VALUES = sorted(
    f
    for f in (render_mod.CHART / "ci").glob("*.yaml")
    if (yaml.safe_load(f.read_text(encoding="utf-8")) or {}).get("mode") != "shadow"
)
#: node-3 is the coolest by far; node-5 is above the 0.9 filter threshold.
VALUES = {"node-1": 0.60, "node-2": 0.70, "node-3": 0.10, "node-4": 0.50, "node-5": 0.95}
MTLS = {"extender": {"tls": {"secretName": "decice-extender-tls", "clientAuth": True}}}
MOUNT = "/etc/decice-tls/"  # where the chart mounts the TLS Secret, in both containers


def rendered(values: dict[str, Any] | None) -> tuple[str | None, dict[str, Any]]:
    """(scheduler-config.yaml text, the policy) of the chart rendered with `values`; None
    for the first when the render has no scheduler ConfigMap, and then no kube-scheduler
    container either (checked: a scheduler without its config would be a chart bug)."""
    docs = [yaml.safe_load(d) for d in render_mod.documents(render_mod.render_chart(values))]
    maps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    policy: dict[str, Any] = yaml.safe_load(maps[f"{render_mod.RELEASE}-policy"]["extender.yaml"])
    scheduler = maps.get(f"{render_mod.RELEASE}-scheduler-config")
    if scheduler is None:
        containers = [
            c["name"]
            for d in docs
            if d["kind"] == "Deployment"
            for c in d["spec"]["template"]["spec"]["containers"]
        ]
        assert "kube-scheduler" not in containers, containers
        return None, policy
    return str(scheduler["scheduler-config.yaml"]), policy


def for_this_machine(policy: dict[str, Any]) -> dict[str, Any]:
    """The chart's policy on the static provider with VALUES, without its 0.0.0.0 listener."""
    names = [m["name"] for m in policy.get("metrics") or ()]
    policy["provider"] = "static"
    policy["static"] = {"nodes": {n: dict.fromkeys(names, v) for n, v in VALUES.items()}}
    for key in ("metricsHost", "metricsPort"):
        policy["server"].pop(key, None)
    return policy


def values_of(case: str) -> dict[str, Any] | None:
    if case in ("default", "printed"):
        return None
    if case == "mtls":
        return MTLS
    loaded: dict[str, Any] = yaml.safe_load((render_mod.CHART / "ci" / f"{case}.yaml").read_text())
    return loaded


@pytest.fixture
def chain(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The control plane with our 5 nodes; the scheduler and our service stopped after."""
    control_plane.kube.ensure_nodes(fake_nodes(5))
    yield control_plane
    control_plane.stop_scheduler()
    control_plane.stop_extender()


def mtls_files(folder: Path) -> ssl.SSLContext:
    """ca.crt, tls.crt, tls.key in `folder` (a certificate for 127.0.0.1 that serves and
    authenticates as a client, as the chart's Secret must); the client context our own
    calls to the service use."""
    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="decice-e2e-extender")
    cert = ca.issue_cert("127.0.0.1", common_name="decice-extender")
    ca.cert_pem.write_to_path(str(folder / "ca.crt"))
    cert.cert_chain_pems[0].write_to_path(str(folder / "tls.crt"))
    cert.private_key_pem.write_to_path(str(folder / "tls.key"))
    context = ssl.create_default_context(cafile=str(folder / "ca.crt"))
    context.load_cert_chain(str(folder / "tls.crt"), str(folder / "tls.key"))
    return context


@pytest.mark.parametrize("case", ["printed", "default", *(f.stem for f in CI_VALUES), "mtls"])
def test_the_scheduler_accepts_the_config_and_schedules_through_us(
    case: str, chain: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    scheduler_text, chart_policy = rendered(values_of(case))
    assert scheduler_text is not None, f"{case}: the chart rendered no scheduler config"
    policy = for_this_machine(chart_policy)
    tls: dict[str, Any] = {}
    if case == "mtls":
        folder = tmp_path / "decice-tls"
        tls = {"scheme": "https", "client_ssl": mtls_files(folder)}
        scheduler_text = scheduler_text.replace(MOUNT, f"{folder}/")
        policy = yaml.safe_load(yaml.safe_dump(policy).replace(MOUNT, f"{folder}/"))
    service: Service = chain.start_extender(policy, workdir=tmp_path, **tls)
    if case == "printed":
        chain.start_scheduler_for(service)  # the CLI's --full for that policy
    else:
        chain.start_scheduler(scheduler_text, extender_port=service.port)
    chain.wait_scheduler_nodes(5)
    config = chain.scheduler_config
    assert config is not None
    [extender] = config["extenders"]
    lease = chain.kube.lease(LEASE_NAMESPACE, LEASE_NAME)
    assert lease is not None and lease["spec"].get("holderIdentity"), lease

    chain.kube.create_pod(namespace, pod_manifest("probe"))

    assert chain.kube.wait_bound(namespace, "probe", 60) == "node-3"
    scheduled: PodEvent = chain.kube.wait_event(namespace, "probe", "Scheduled", 30)
    assert scheduled.message.endswith(f"{namespace}/probe to node-3"), scheduled.message

    def ours(name: str, labels: dict[str, str]) -> float:
        status, body = service.get("/metrics")
        assert status == 200, body
        return metric_value(body.decode(), name, labels)

    verbs = [v for v in ("filter", "prioritize", "bind") if f"{v}Verb" in extender]
    print(
        f"\n{case}: {extender['urlPrefix']} verbs {verbs}, lease held by "
        f"{lease['spec']['holderIdentity']}"
    )

    def answered(verb: str) -> bool:
        return ours("decice_requests_total", {"verb": verb, "code": "200"}) >= 1

    # Counted once each answer is written: soon after the pod is bound, not before.
    chain.kube.wait_until(
        lambda: all(answered(v) for v in verbs), 30, f"the scheduler called our {verbs}"
    )
    bound_by_us = ours("decice_decisions_total", {"verb": "bind", "outcome": "bound"})
    assert bound_by_us == (1 if "bindVerb" in extender else 0)
    if case == "mtls":
        assert extender["urlPrefix"].startswith("https://") and extender["enableHTTPS"]
        assert set(extender["tlsConfig"]) == {"caFile", "certFile", "keyFile"}
    if case == "static-values":
        assert verbs == ["prioritize"]  # no threshold, no bind: prioritize only
