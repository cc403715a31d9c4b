"""`decice-extender replay` on history that lacks what it keys on, in a real Prometheus:
kube-state-metrics series as an old kube-state-metrics (before v2.1: `uid` on kube_pod_info
only) or a metricRelabelings labeldrop writes them. Each ends in one message naming the
series and the label, and exit code 1, before anything is replayed: without `uid` one pod
would become two (one with a node and no arrival, one with an arrival and no node), and
without kube_pod_info's `node` every pod would look Pending."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from extender.cli.main import main
from tests.harness.backfill import HistoryPrometheus, backfilled_prometheus
from tests.harness.clusterhistory import POD_TIMES
from tests.replay.cluster import Backfilled, hot_spot

pytestmark = pytest.mark.integration

RULES = Path(__file__).with_name("stock-rules.yaml")
UID = frozenset({"uid"})
POD_SERIES = (
    *POD_TIMES,
    "kube_pod_container_resource_requests",
    "kube_pod_owner",
    "kube_pod_scheduler",
)
"""kube-state-metrics' pod series beside kube_pod_info that this history writes."""
BEFORE_2_1 = {name: UID for name in POD_SERIES}


@pytest.fixture(scope="module")
def hot() -> Backfilled:
    return hot_spot()


@pytest.fixture
def trimmed(
    request: pytest.FixtureRequest, hot: Backfilled, tmp_path: Path
) -> Iterator[HistoryPrometheus]:
    h = hot.history
    h.trimmed = request.param
    try:
        text = h.openmetrics()
    finally:
        h.trimmed = {}
    with backfilled_prometheus(text, [RULES], h.start, h.end, tmp_path / "prometheus") as server:
        yield server


def replay(server: HistoryPrometheus, hot: Backfilled, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["replay", "--prometheus", server.api_url, "--from", str(hot.start),
                 "--to", str(hot.end)])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 1, captured.out
    assert captured.out == "" and "Traceback" not in captured.err
    # The progress bars (tqdm's "label: 100%|...|") may come first; then the refusal.
    lines = [line for line in captured.err.splitlines() if line and "%|" not in line]
    assert lines[0].startswith("decice-extender replay: "), captured.err
    return captured.err


@pytest.mark.parametrize("trimmed", [BEFORE_2_1], indirect=True)
def test_uid_on_kube_pod_info_only(
    trimmed: HistoryPrometheus, hot: Backfilled, capsys: pytest.CaptureFixture[str]
) -> None:
    err = replay(trimmed, hot, capsys)
    assert "series without a label the replay keys on" in err
    line = next(x for x in err.splitlines() if "no uid label" in x)
    assert line.startswith("  no uid label on any series of kube_pod_created, ")
    for name in ("kube_pod_start_time", "kube_pod_container_resource_requests"):
        assert name in line
    assert "kube_pod_info," not in line  # it has its uid
    assert "from v2.1 on" in line
    assert "series missing" not in err  # nothing else is wrong


@pytest.mark.parametrize("trimmed", [{"kube_pod_info": UID, **BEFORE_2_1}], indirect=True)
def test_uid_dropped_everywhere(
    trimmed: HistoryPrometheus, hot: Backfilled, capsys: pytest.CaptureFixture[str]
) -> None:
    err = replay(trimmed, hot, capsys)
    assert "  no uid label on any series of kube_pod_info, kube_pod_created, " in err


@pytest.mark.parametrize("trimmed", [{"kube_pod_info": frozenset({"node"})}], indirect=True)
def test_kube_pod_info_without_node(
    trimmed: HistoryPrometheus, hot: Backfilled, capsys: pytest.CaptureFixture[str]
) -> None:
    err = replay(trimmed, hot, capsys)
    assert "  no node label on any series of kube_pod_info: which node" in err
    # The stock rules join on it, so they recorded nothing: named after the cause.
    assert err.index("no node label") < err.index("series missing")
    assert "  node_namespace_pod:kube_pod_info: (" in err


@pytest.mark.parametrize("trimmed", [{"kube_pod_created": frozenset({"__name__"})}], indirect=True)
def test_kube_pod_created_missing(
    trimmed: HistoryPrometheus, hot: Backfilled, capsys: pytest.CaptureFixture[str]
) -> None:
    err = replay(trimmed, hot, capsys)
    assert "  kube_pod_created (pods' arrivals): recorded by kube-state-metrics" in err
    assert "series without a label" not in err
