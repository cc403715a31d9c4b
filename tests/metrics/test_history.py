"""HistoryReader: range queries in chunks bounded by samples and points, halved when the
server says a chunk is too large, asked again after a transient failure, with the
policy's headers, tenant and token; the retention the server states."""

from __future__ import annotations

import json
import random
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from extender.errors.causes import HTTPStatusError, PartialAnswer
from extender.metrics.history import MAX_POINTS, RETRY_BACKOFF, HistoryReader
from extender.policy.backend import PrometheusSettings
from tests.harness.loopback import LoopbackServer

Answer = tuple[int, bytes]


class FakeRangeAPI:
    """/api/v1/query_range answering one series with a point per step; `respond` may
    override an answer; every request's path, parameters and headers are kept."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, str]]] = []
        self.respond: Callable[[str, dict[str, str]], Answer | None] = lambda path, q: None
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                params = dict(urllib.parse.parse_qsl(url.query))
                with api._lock:
                    api.requests.append((url.path, params, dict(self.headers)))
                status, body = api.respond(url.path, params) or api.answer(url.path, params)
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = LoopbackServer(Handler, name="fake-range-api")

    def answer(self, path: str, params: dict[str, str]) -> Answer:
        if path == "/api/v1/query":
            data = {"resultType": "vector", "result": [{"metric": {}, "value": [0, "1"]}]}
            return 200, json.dumps({"status": "success", "data": data}).encode()
        if path != "/api/v1/query_range":
            return 404, b"404 page not found"
        start, end = float(params["start"]), float(params["end"])
        step = float(params["step"].rstrip("s"))
        points = [[start + i * step, "1"] for i in range(round((end - start) / step) + 1)]
        data = {"resultType": "matrix", "result": [{"metric": {"node": "a"}, "values": points}]}
        return 200, json.dumps({"status": "success", "data": data}).encode()

    def ranges(self) -> list[tuple[float, float]]:
        return [
            (float(q["start"]), float(q["end"]))
            for path, q, _ in self.requests
            if path == "/api/v1/query_range"
        ]


@pytest.fixture
def api() -> Iterator[FakeRangeAPI]:
    fake = FakeRangeAPI()
    yield fake
    fake.server.close()


def reader(
    api: FakeRangeAPI, max_samples: int = 500_000, **settings: Any
) -> tuple[HistoryReader, list[float]]:
    slept: list[float] = []
    prometheus = PrometheusSettings(url=api.server.url, **settings)
    backoff = replace(RETRY_BACKOFF, rng=random.Random(7))
    return HistoryReader(prometheus, max_samples, sleep=slept.append, backoff=backoff), slept


def points(chunks: Any) -> list[float]:
    return [v[0] for c in chunks for s in c.result for v in s["values"]]


def test_chunks_hold_at_most_max_samples_and_cover_the_range_once(api: FakeRangeAPI) -> None:
    history, _ = reader(api, max_samples=10)
    chunks = list(history.query_range("up", 0.0, 330.0, 30.0, series=2))
    assert api.ranges() == [(0.0, 120.0), (150.0, 270.0), (300.0, 330.0)]
    assert points(chunks) == [30.0 * i for i in range(12)]
    assert [round(c.done, 2) for c in chunks] == [0.42, 0.83, 1.0]


def test_no_chunk_holds_more_points_than_prometheus_allows(api: FakeRangeAPI) -> None:
    history, _ = reader(api)
    list(history.query_range("up", 0.0, 30.0 * 25_000, 30.0))
    assert all(round((b - a) / 30) + 1 <= MAX_POINTS for a, b in api.ranges())


def test_a_chunk_too_large_for_the_server_is_asked_in_halves(api: FakeRangeAPI) -> None:
    def limit(path: str, q: dict[str, str]) -> Answer | None:
        if path == "/api/v1/query_range" and float(q["end"]) - float(q["start"]) > 60:
            error = {
                "status": "error",
                "errorType": "execution",
                "error": "query processing would load too many samples into memory",
            }
            return 422, json.dumps(error).encode()
        return None

    api.respond = limit
    history, _ = reader(api, max_samples=8)
    assert points(history.query_range("up", 0.0, 210.0, 30.0)) == [30.0 * i for i in range(8)]
    # Refused at 8 points and at 4, answered at 2 points a chunk from there on.
    assert api.ranges() == [
        (0.0, 210.0), (0.0, 90.0), (0.0, 30.0), (60.0, 90.0), (120.0, 150.0), (180.0, 210.0)
    ]  # fmt: skip


def test_a_transient_failure_is_asked_again_then_raised(api: FakeRangeAPI) -> None:
    failures = [503]

    def flaky(path: str, q: dict[str, str]) -> Answer | None:
        return (failures.pop(), b"unavailable") if failures else None

    api.respond = flaky
    history, slept = reader(api)
    assert points(history.query_range("up", 0.0, 60.0, 30.0)) == [0.0, 30.0, 60.0]
    assert len(slept) == 1 and 0.5 <= slept[0] <= 2.0  # jittered under the first ceiling
    api.respond = lambda path, q: (503, b"unavailable")
    with pytest.raises(HTTPStatusError) as caught:
        list(history.query_range("up", 0.0, 60.0, 30.0))
    assert caught.value.status == 503 and len(slept) == 3  # two retries, then raised
    assert 0.5 <= slept[1] <= 2.0 and 0.5 <= slept[2] <= 4.0


def test_a_refusal_is_not_asked_again(api: FakeRangeAPI) -> None:
    api.respond = lambda path, q: (401, b"unauthorized")
    history, slept = reader(api)
    with pytest.raises(HTTPStatusError):
        list(history.query_range("up", 0.0, 60.0, 30.0))
    assert slept == [] and len(api.requests) == 1


def test_a_partial_answer_is_refused(api: FakeRangeAPI) -> None:
    partial = {
        "status": "success",
        "isPartial": True,
        "data": {"resultType": "matrix", "result": []},
    }
    api.respond = lambda path, q: (200, json.dumps(partial).encode())
    history, _ = reader(api)
    with pytest.raises(PartialAnswer):
        list(history.query_range("up", 0.0, 60.0, 30.0))


def test_the_policys_token_tenant_and_parameters_go_with_every_query(
    api: FakeRangeAPI, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    history, _ = reader(
        api, bearer_token_file=str(token), tenant="team-a", dedup=True, headers={"X-Extra": "1"}
    )
    history.probe()
    list(history.query_range("up", 0.0, 60.0, 30.0))
    for _, params, headers in api.requests:
        assert headers["Authorization"] == "Bearer s3cret"
        assert headers["X-Scope-OrgID"] == "team-a" and headers["X-Extra"] == "1"
        assert params["dedup"] == "true"
    assert api.requests[-1][1]["step"] == "30s" and api.requests[-1][1]["timeout"] == "5s"


def test_the_retention_the_server_states(api: FakeRangeAPI) -> None:
    history, _ = reader(api)
    assert history.retention() is None  # neither endpoint answers
    info = {"status": "success", "data": {"storageRetention": "10d or 50GiB"}}
    api.respond = lambda path, q: (
        (200, json.dumps(info).encode()) if path == "/api/v1/status/runtimeinfo" else None
    )
    assert history.retention() == "10d or 50GiB"
    flags = b'-retentionPeriod="3"\n-search.maxLookback="5m"\n'
    api.respond = lambda path, q: (200, flags) if path == "/flags" else None
    assert history.retention() == "3M"  # VictoriaMetrics: months unless it says a unit
    api.respond = lambda path, q: (200, b'-httpListenAddr=":8428"\n') if path == "/flags" else None
    assert history.retention() == "1M"  # not set: its default, a month


def test_victoria_metrics_flags_are_at_its_root(api: FakeRangeAPI) -> None:
    history = HistoryReader(PrometheusSettings(url=f"{api.server.url}/prometheus"))
    flags = b'-retentionPeriod="2w"\n'
    api.respond = lambda path, q: (200, flags) if path == "/flags" else None
    assert history.retention() == "2w"
    assert [path for path, _, _ in api.requests] == [
        "/prometheus/api/v1/status/runtimeinfo",
        "/prometheus/flags",
        "/flags",
    ]
