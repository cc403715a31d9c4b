"""`decice-extender replay` against a real Prometheus and a real VictoriaMetrics holding
real history: three hours of a small cluster (tests.replay.cluster) backfilled in exporter
shapes, the stock recording rules recorded over it (promtool; vmalert's replay mode).

The history's placements are known (kube-scheduler's default profile placed them), so the
reconstruction must recover each pod's node, times and use, and the "as it happened" row
the history's own figures; the kube-scheduler model must be found faithful; and the hot
spot those placements made worse must be mostly avoided by ours.
"""

from __future__ import annotations

import json
import statistics
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.cli.main import main
from extender.metrics.history import HistoryReader
from extender.policy.backend import PrometheusSettings
from extender.policy.loading import load_settings
from extender.replay.collect import Ask, collect
from extender.replay.driver import replay
from extender.replay.model import History, Role
from extender.replay.models import SCHEDULERS
from extender.replay.reconstruct import Selection, reconstruct
from extender.simulation.prometheus import Pipeline
from tests.harness.backfill import backfilled_prometheus, backfilled_victoria_metrics
from tests.harness.loopback import LoopbackServer, free_port
from tests.harness.prometheus_fixtures import BACKENDS
from tests.harness.promharness import MetricsServer
from tests.replay.cluster import CALM_LEVEL, HOT, STEP, Backfilled, hot_spot, truth_hot_minutes

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "extender.yaml"
RULES = Path(__file__).with_name("stock-rules.yaml")
OWNER_RULE = "namespace_workload_pod:kube_pod_owner:relabel"


@pytest.fixture(scope="module")
def hot() -> Backfilled:
    return hot_spot()


@pytest.fixture(scope="module")
def openmetrics(hot: Backfilled) -> str:
    return hot.history.openmetrics()


def holding(
    kind: str, text: str, hot: Backfilled, workdir: Path, rules: bool = True
) -> MetricsServer:
    """A started server of `kind` holding the history (and the rules recorded over it)."""
    h = hot.history
    files = [RULES] if rules else []
    if kind == "prometheus":
        return backfilled_prometheus(text, files, h.start, h.end, workdir)
    return backfilled_victoria_metrics(text, files, h.start, h.end, workdir, recorded=OWNER_RULE)


@pytest.fixture(scope="module", params=BACKENDS)
def server(
    request: pytest.FixtureRequest,
    hot: Backfilled,
    openmetrics: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[MetricsServer]:
    kind: str = request.param
    with holding(kind, openmetrics, hot, tmp_path_factory.mktemp(kind)) as started:
        yield started


def args(server: MetricsServer, hot: Backfilled, *more: str) -> list[str]:
    return [
        "replay",
        "--prometheus",
        server.api_url,
        "--from",
        str(hot.start),
        "--to",
        str(hot.end),
        *more,
    ]


def reconstructed(server: MetricsServer, hot: Backfilled) -> History:
    query = load_settings(SHIPPED, {}).fetched_metrics[0].query
    reader = HistoryReader(PrometheusSettings(url=server.api_url, timeout=30))
    ask = Ask(hot.start, hot.end, STEP, query)
    collected = collect(
        reader, ask, time.time(), lambda label, done: None, url=server.api_url, auth="", policy=""
    )
    return reconstruct(collected.facts, Selection())


def test_the_reconstruction_is_the_history(server: MetricsServer, hot: Backfilled) -> None:
    history = reconstructed(server, hot)
    got = {p.name: p for p in history.pods}
    expected_roles = {
        "other-0": Role.OTHER_SCHEDULER,
        "huge-0": Role.NEVER_RAN,
        "report-0": Role.REPLAYED,
    }
    for pod in hot.history.pods:
        mine = got[pod.name]
        role = expected_roles.get(
            pod.name, Role.REPLAYED if pod.created >= hot.start else Role.EARLIER
        )
        assert (mine.role, mine.node) == (role, pod.node), pod.name
        assert mine.arrival == pytest.approx(pod.created), pod.name
        assert mine.cpu_milli == round(pod.cpu * 1000), pod.name
        if role is not Role.REPLAYED:
            continue
        assert pod.start is not None
        assert mine.start == pytest.approx(pod.start)
        if pod.end is not None and pod.end < hot.end:
            assert mine.end == pytest.approx(pod.end), pod.name
        # Its measured use: the rule's 5-minute rate of the cAdvisor counter, which is the
        # pod's use once the node serves it whole (every node but the hot one, always).
        if pod.node != HOT and len(mine.usage) > 12:
            assert statistics.median(mine.usage) == pytest.approx(pod.use, rel=0.05), pod.name
    for node in hot.history.nodes:
        if node.name == HOT:
            continue
        kept = sum(
            p.use
            for p in hot.history.pods
            if p.node == node.name and got[p.name].role is not Role.REPLAYED
        )
        grid = history.grid
        measured = history.nodes[node.name].background[grid.measured_from : grid.steps]
        expected = CALM_LEVEL * node.cores + kept
        assert statistics.median(measured) == pytest.approx(expected, abs=0.05), node.name
    real = replay(history, None, Pipeline(scrape_interval=30))
    known = {p.uid: p.node for p in hot.history.pods if got[p.name].role is Role.REPLAYED}
    assert dict(real.placements) == known


def test_as_it_happened_and_ours_against_the_hot_spot(
    server: MetricsServer, hot: Backfilled, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "replay.json"
    assert main(args(server, hot, "--json", str(out))) == 0
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    rows = doc["scenarios"]["replay"]["schedulers"]
    assert list(rows) == ["as-it-happened", *SCHEDULERS]

    def hot_minutes(name: str) -> float:
        value: float = rows[name]["node_minutes_hot"]["mean"]
        return value

    truth = truth_hot_minutes(hot.history, hot.start, hot.end)
    assert truth > 60  # the history does have a hot spot
    # What happened, measured back through the rules: the history's own figure, within the
    # steps a 5-minute rate takes to follow a change.
    assert hot_minutes("as-it-happened") == pytest.approx(truth, abs=max(5.0, 0.1 * truth))
    # The model of kube-scheduler, on the same arrivals, is close to what happened ...
    assert not doc["fidelity"]["far"], doc["fidelity"]
    assert "faithful" in text
    # ... and ours avoids most of the hot spot it made.
    assert hot_minutes("decice") <= 0.5 * hot_minutes("as-it-happened"), text
    assert hot_minutes("decice") < hot_minutes("kube-scheduler"), text
    assert rows["decice"]["unplaced"]["mean"] == 0
    assert doc["history"]["pods"]["replayed"] == sum(
        1
        for p in hot.history.pods
        if p.created >= hot.start and p.name not in ("other-0", "huge-0")
    )
    for line in ("node-minutes above 90% CPU", "as-it-happened", "kube-scheduler", "decice"):
        assert line in text


def test_unreachable(capsys: pytest.CaptureFixture[str], hot: Backfilled) -> None:
    port = free_port()
    code = main(["replay", "--prometheus", f"http://127.0.0.1:{port}", "--from", str(hot.start),
                 "--to", str(hot.end)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert f"cannot query http://127.0.0.1:{port}: connection refused" in err
    assert "Traceback" not in err


def test_a_range_with_no_data(
    server: MetricsServer, hot: Backfilled, capsys: pytest.CaptureFixture[str]
) -> None:
    day = 86400
    code = main(["replay", "--prometheus", server.api_url, "--from", str(hot.start - 3 * day),
                 "--to", str(hot.start - 2 * day)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert "no data between" in err and "kube_node_status_allocatable has no samples" in err


def test_a_range_too_large_for_memory(
    server: MetricsServer, hot: Backfilled, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(args(server, hot, "--max-memory", "20MiB"))
    err = capsys.readouterr().err
    assert code == 1
    assert "the range needs about" in err and "over the limit of 20 MiB (--max-memory)" in err
    assert "5 nodes and" in err


@pytest.fixture(scope="module", params=BACKENDS)
def raw_only(
    request: pytest.FixtureRequest,
    hot: Backfilled,
    openmetrics: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[MetricsServer]:
    """The same history without the recording rules."""
    kind: str = request.param
    with holding(kind, openmetrics, hot, tmp_path_factory.mktemp(f"raw-{kind}"), rules=False) as s:
        yield s


def test_series_missing_are_named_with_their_settings(
    raw_only: MetricsServer, hot: Backfilled, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(args(raw_only, hot))
    err = capsys.readouterr().err
    assert code == 1
    assert "series missing between" in err
    for series, setting in (
        ("namespace_workload_pod:kube_pod_owner:relabel", "defaultRules.rules.k8sPodOwner"),
        (
            "node_namespace_pod_container:container_cpu_usage_seconds_total:sum_rate5m",
            "defaultRules.rules.k8sContainerCpuUsageSecondsTotal",
        ),
        ("instance:node_cpu_utilisation:rate5m", "defaultRules.rules.nodeExporterRecording"),
        ("node_namespace_pod:kube_pod_info:", "defaultRules.rules.node"),
    ):
        assert f"  {series} (" in err and setting in err, series
    assert "kube_pod_info (" not in err  # the raw series are there


def test_a_range_the_retention_no_longer_holds(
    hot: Backfilled, openmetrics: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = hot.history
    with backfilled_prometheus(openmetrics, [], h.start, h.end, tmp_path, retention="1h") as s:
        code = main(["replay", "--prometheus", s.url, "--from", str(hot.start), "--to",
                     str(hot.end)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert "but the server keeps 1h" in err and "use --from" in err


class AuthProxy:
    """A gateway in front of the server, as a multi-tenant one is: it forwards only queries
    that carry `Authorization: Bearer <token>` and the tenant header, else answers 401."""

    def __init__(self, upstream: str, token: str, tenant: str) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                good = (
                    self.headers.get("Authorization") == f"Bearer {token}"
                    and self.headers.get("X-Scope-OrgID") == tenant
                )
                status, body = 401, b"unauthorized"
                if good:
                    proxy.forwarded += 1
                    try:
                        with urllib.request.urlopen(upstream + self.path, timeout=30) as answer:
                            status, body = answer.status, answer.read()
                    except urllib.error.HTTPError as exc:
                        status, body = exc.code, exc.read()
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.forwarded = 0
        self.server = LoopbackServer(Handler, name="auth-proxy")


def test_the_policys_token_and_tenant_are_sent(
    server: MetricsServer, hot: Backfilled, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proxy = AuthProxy(server.api_url, "s3cret", "team-a")
    try:
        token = tmp_path / "token"
        token.write_text("s3cret\n")
        policy = yaml.safe_load(SHIPPED.read_text())
        policy["prometheus"].update(
            {"url": proxy.server.url, "bearerTokenFile": str(token), "tenant": "team-a"}
        )
        path = tmp_path / "policy.yaml"
        path.write_text(yaml.safe_dump(policy))
        window = ["--config", str(path), "--from", str(hot.start), "--to", str(hot.end)]
        assert main(["replay", *window]) == 0
        assert proxy.forwarded > 10
        capsys.readouterr()
        token.write_text("stale\n")
        assert main(["replay", *window]) == 1
        err = capsys.readouterr().err
        assert (
            f"{proxy.server.url} refused the query (HTTP 401) with bearer token from {token}; "
            f"tenant team-a: check the prometheus section of {path}"
        ) in err
    finally:
        proxy.server.close()


def test_namespaces_choose_what_moves(
    server: MetricsServer, hot: Backfilled, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "replay.json"
    assert main(args(server, hot, "--namespace", "batch", "--json", str(out))) == 0
    capsys.readouterr()
    roles = json.loads(out.read_text())["history"]["pods"]
    web = sum(1 for p in hot.history.pods if p.name.startswith("web-"))
    # The Job's pod moves; the Deployment's keep their nodes, still counted by the models.
    assert roles["replayed"] == 1
    assert roles["outside the namespaces replayed"] == web
