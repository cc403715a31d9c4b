"""kube-scheduler's own metrics as the chart has Prometheus scrape them: a real Prometheus
reads the real kube-scheduler's /metrics on its secure port with a ServiceAccount's
token, authorized by the chart's ClusterRole <fullname>-scheduler-metrics (a
SubjectAccessReview per scrape, through the real API server); an account without it is
refused. With a pod no node can take, DeciceSchedulerPodsPending's expression returns it
and every target of the dashboard's "kube-scheduler" row returns numbers."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.chart import render_mod
from tests.deploy.test_monitoring import (
    ALERTS,
    alert_rules,
    interpolate,
    is_scheduler_panel,
    query_panels,
)
from tests.harness.controlplane import ControlPlane, Kube, StartStack
from tests.harness.loopback import LOCALHOST
from tests.harness.promharness import PrometheusServer, prometheus_binary

pytestmark = pytest.mark.e2e

EXTENDER_JOB = "decice-extender-metrics"
SCHEDULER_JOB = "decice-extender-scheduler-metrics"
POD = "decice-extender-0"
#: node-1 takes pods; a pod asking more CPU than any node has stays unschedulable.
VALUES = {"node-1": 0.10, "node-2": 0.95, "node-3": 0.95}


class Scraping(PrometheusServer):
    """Prometheus scraping our service and kube-scheduler as the chart's ServiceMonitor
    has them scraped (the two jobs, the pod they share), the chart's alerts loaded."""

    def __init__(self, jobs: list[dict[str, Any]], workdir: Path) -> None:
        self.jobs = jobs
        binary = prometheus_binary()
        super().__init__([], workdir=workdir, binary=binary, rule_files=[ALERTS])

    def write_config(self, targets: list[str]) -> None:
        super().write_config(targets)
        config = json.loads(self.config_file.read_text())
        config["scrape_configs"] = self.jobs
        self.config_file.write_text(json.dumps(config, indent=2) + "\n")


def job(name: str, target: str, namespace: str, **extra: Any) -> dict[str, Any]:
    labels = {"namespace": namespace, "pod": POD}
    return {"job_name": name, "static_configs": [{"targets": [target], "labels": labels}], **extra}


def service_account_token(kube: Kube, namespace: str, name: str, where: Path) -> Path:
    """A ServiceAccount and a token of it (TokenRequest), written to a file."""
    kube.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    answer = kube.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    path = where / f"{name}.token"
    path.write_text(answer["status"]["token"])
    return path


@contextlib.contextmanager
def chart_reader_rbac(kube: Kube, namespace: str) -> Iterator[None]:
    """The chart's ClusterRole for kube-scheduler's /metrics and its binding to the
    ServiceAccount `prometheus` of `namespace`, rendered and applied as they are."""
    values = {
        "metrics": {
            "serviceMonitor": {"enabled": True},
            "scheduler": {
                "prometheusServiceAccount": {"name": "prometheus", "namespace": namespace}
            },
        }
    }
    rendered = render_mod.render_chart(values, name=namespace, namespace=namespace)
    objs = [yaml.safe_load(d) for d in render_mod.documents(rendered)]
    rbac = [
        o
        for o in objs
        if o["kind"] in ("ClusterRole", "ClusterRoleBinding")
        and o["metadata"]["name"].endswith("-scheduler-metrics")
    ]
    assert [o["kind"] for o in rbac] == ["ClusterRole", "ClusterRoleBinding"]
    for obj in rbac:
        kube.apply(obj)
    try:
        yield
    finally:
        for obj in reversed(rbac):
            kind = "clusterrolebindings" if obj["kind"] == "ClusterRoleBinding" else "clusterroles"
            kube.delete(f"/apis/rbac.authorization.k8s.io/v1/{kind}/{obj['metadata']['name']}")


def numbers(result: list[dict[str, Any]]) -> list[float]:
    return [float(s["value"][1]) for s in result if not math.isnan(float(s["value"][1]))]


def test_prometheus_reads_kube_scheduler_through_the_charts_rbac(
    stack: StartStack, control_plane: ControlPlane, tmp_path: Path
) -> None:
    s = stack(VALUES, nodes=3)
    kube, ns = s.kube, s.namespace
    allowed = service_account_token(kube, ns, "prometheus", tmp_path)
    refused = service_account_token(kube, ns, "nobody", tmp_path)
    secure = f"{LOCALHOST}:{control_plane.scheduler_port}"
    https = {"scheme": "https", "tls_config": {"insecure_skip_verify": True}}
    jobs = [
        job(EXTENDER_JOB, f"{LOCALHOST}:{s.service.port}", ns),
        job(SCHEDULER_JOB, secure, ns, authorization={"credentials_file": str(allowed)}, **https),
        job("unbound", secure, ns, authorization={"credentials_file": str(refused)}, **https),
    ]
    with chart_reader_rbac(kube, ns), Scraping(jobs, tmp_path / "prometheus") as prom:
        prom.wait_for(f'up{{job="{SCHEDULER_JOB}"}} == 1', bool, timeout=60)
        prom.wait_for('up{job="unbound"} == 0', bool, timeout=60)  # 403 without the role
        prom.wait_for(f'up{{job="{EXTENDER_JOB}"}} == 1', bool, timeout=60)

        # Two binds a scrape apart: the second moves series the first created, so rates
        # (and the latency quantiles) have something to show.
        s.create_pod("placed")
        assert s.wait_bound("placed") == "node-1"
        scheduled = f'scheduler_schedule_attempts_total{{job="{SCHEDULER_JOB}",result="scheduled"}}'
        prom.wait_for(scheduled, lambda r: numbers(r) == [1.0], timeout=60)
        s.create_pod("placed-again")
        assert s.wait_bound("placed-again") == "node-1"
        s.create_pod("too-big", cpu="64")  # more than any node has
        s.wait_event("too-big", "FailedScheduling")

        alert = alert_rules()["DeciceSchedulerPodsPending"]["expr"]
        [pending] = prom.wait_for(alert, bool, timeout=60)
        assert pending["metric"] == {"job": SCHEDULER_JOB, "namespace": ns, "pod": POD}
        assert float(pending["value"][1]) == 1.0

        variables = {
            "namespace": ns, "job": EXTENDER_JOB, "__rate_interval": "5m",
            "__interval": "15s", "__range": "5m", "datasource": "prometheus",
        }  # fmt: skip
        panels = [p for p in query_panels() if is_scheduler_panel(p)]
        assert len(panels) == 3
        for panel in panels:
            for target in panel["targets"]:
                expr = interpolate(target["expr"], variables)
                prom.wait_for(expr, lambda r: bool(numbers(r)), timeout=60)
