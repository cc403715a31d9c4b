"""Prometheus faults against a loopback fake Prometheus API, in process: down at start-up,
slow past the timeout, HTTP errors, garbage answers. The policy decides (fail-open:
neutral score, never filtered; fail-closed: filtered once data is missing or older than
maxAge); nothing crashes; /readyz/data and decice_metric_age_seconds tell the truth; the
refresher backs off and recovers on its own."""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from extender.policy.loading import parse_settings
from extender.policy.settings import Settings
from extender.service.compose import Service, build_service
from tests.harness.fakeprom import FakePrometheus, series, success
from tests.harness.loopback import free_port, wait_until
from tests.harness.stack import extender_args

T0 = 1_800_000_000.0
MAX_AGE = 30.0
NODES = ["node-1", "node-2", "absent"]  # "absent" never has data: the no-data baseline


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def prom_policy(url: str, on_missing: str, **prometheus: Any) -> Settings:
    return parse_settings(
        {
            "provider": "prometheus",
            "prometheus": {
                "url": url,
                "interval": 1,
                "timeout": 0.5,
                "maxBackoff": 8,
                **prometheus,
            },
            "metrics": [
                {
                    "name": "cpu",
                    "query": "decice_node_cpu",
                    "filter": {"above": 0.9},
                    "onMissing": on_missing,
                    "maxAge": MAX_AGE,
                }
            ],
            "bind": {"enabled": False},
        }
    )


class Harness:
    """The app with a Refresher driven by hand (refresh()) and a hand-set clock."""

    def __init__(self, settings: Settings) -> None:
        self.clock = Clock()
        self.stack: Service = build_service(settings, clock=self.clock)
        self.refresher = self.stack.refresher
        # the lifespan would run the refresher; here the test does, one round at a time
        self.client: TestClient = TestClient(self.stack.app)

    def refresh(self) -> dict[str, str]:
        return asyncio.run(self.refresher.refresh_once())

    def verdicts(self) -> tuple[dict[str, str], dict[str, int]]:
        """(filter: node -> reason for the failed ones, prioritize: node -> score)."""
        body = orjson.dumps(extender_args("u-1", "p", NODES))
        headers = {"Content-Type": "application/json"}
        f = self.client.post("/filter", content=body, headers=headers)
        p = self.client.post("/prioritize", content=body, headers=headers)
        assert f.status_code == 200 and p.status_code == 200
        failed: dict[str, str] = f.json()["FailedAndUnresolvableNodes"]
        return failed, {h["Host"]: h["Score"] for h in p.json()}

    def readyz(self) -> tuple[int, dict[str, Any]]:
        """The data's readiness (/readyz/data): /readyz itself stays 200 while we answer."""
        assert self.client.get("/readyz").status_code == 200
        r = self.client.get("/readyz/data")
        return r.status_code, r.json()

    def age(self) -> float:
        for line in self.client.get("/metrics").text.splitlines():
            if line.startswith('decice_metric_age_seconds{metric="cpu"}'):
                return float(line.split()[-1])
        raise AssertionError("no decice_metric_age_seconds")


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    with FakePrometheus() as fake:
        yield fake


def make(prom: FakePrometheus, on_missing: str, **kw: Any) -> Harness:
    return Harness(prom_policy(prom.url, on_missing, **kw))


# --- down at start-up, HTTP errors, slow -----------------------------------------------------


@pytest.mark.parametrize("on_missing", ["fail-open", "fail-closed"])
def test_down_at_start_up(on_missing: str) -> None:
    h = Harness(prom_policy(f"http://127.0.0.1:{free_port()}", on_missing))
    errors = h.refresh()
    assert errors["cpu"].startswith("connection refused to 127.0.0.1:")
    failed, scores = h.verdicts()
    status, ready = h.readyz()
    assert ready["metrics"]["cpu"]["fresh"] is False
    assert ready["metrics"]["cpu"]["error"] == errors["cpu"]
    assert h.age() == math.inf
    if on_missing == "fail-open":
        assert failed == {} and status == 200
        assert set(scores.values()) == {scores["absent"]}  # neutral for every node
    else:
        assert set(failed) == set(NODES) and status == 503
        assert failed["node-1"] == "decice: cpu data missing"


BAD_ANSWERS: list[tuple[str, int, bytes]] = [
    ("500 html", 500, b"<html><body>Internal Server Error</body></html>"),
    ("502", 502, b"Bad Gateway"),
    ("503", 503, b""),
    ("401", 401, b"Unauthorized"),
    ("400 status error", 400, b'{"status":"error","errorType":"bad_data","error":"parse error"}'),
    ("422 timeout", 422, b'{"status":"error","errorType":"timeout","error":"query timed out"}'),
    ("200 not json", 200, b"<html>captive portal</html>"),
    ("200 truncated json", 200, b'{"status":"success","data":{"resultType":"vector","result":[{'),
    ("200 no data", 200, b'{"status":"success"}'),
    ("200 result null", 200, success(None)),
    ("200 result number", 200, success(42)),
    ("200 json array", 200, b"[1,2,3]"),
]


@pytest.mark.parametrize(("what", "status", "body"), BAD_ANSWERS, ids=[b[0] for b in BAD_ANSWERS])
@pytest.mark.parametrize("on_missing", ["fail-open", "fail-closed"])
def test_bad_answers_keep_the_last_values_until_max_age(
    prom: FakePrometheus, on_missing: str, what: str, status: int, body: bytes
) -> None:
    h = make(prom, on_missing)
    prom.vector({"node-1": "0.2", "node-2": "0.95"})
    assert h.refresh() == {}
    good = h.verdicts()
    assert set(good[0]) == {"node-2"} | ({"absent"} if on_missing == "fail-closed" else set())

    prom.raw(status, body)
    h.clock.now += MAX_AGE - 1
    errors = h.refresh()
    assert set(errors) == {"cpu"}, errors
    assert h.verdicts() == good  # stale but within maxAge: the last good values serve
    status_code, ready = h.readyz()
    assert status_code == 200 and ready["metrics"]["cpu"]["error"]
    assert h.age() == pytest.approx(MAX_AGE - 1)

    h.clock.now += 2  # now past maxAge
    h.refresh()
    failed, scores = h.verdicts()
    status_code, ready = h.readyz()
    assert ready["metrics"]["cpu"]["fresh"] is False
    assert h.age() == pytest.approx(MAX_AGE + 1)
    if on_missing == "fail-open":
        assert failed == {} and status_code == 200
        assert set(scores.values()) == {scores["absent"]}
    else:
        assert set(failed) == set(NODES) and status_code == 503
        assert failed["node-1"] == "decice: cpu data older than 30s"


def test_slow_prometheus_times_out_and_does_not_block(prom: FakePrometheus) -> None:
    h = make(prom, "fail-closed")
    prom.vector({"node-1": "0.2"})
    prom.delay(3.0)  # > prometheus.timeout 0.5
    started = time.monotonic()
    errors = h.refresh()
    assert time.monotonic() - started < 3.0  # gave up before the held 3 s answer
    assert errors["cpu"].startswith("timeout after 0.5s waiting for 127.0.0.1:")
    # the request path never asks Prometheus anything
    asked = len(prom.headers)
    h.verdicts()
    assert len(prom.headers) == asked


# --- garbage in a 200 answer ----------------------------------------------------------------------


GARBAGE: list[tuple[str, list[Any], dict[str, float | None]]] = [
    # (name, result, node -> the value we must end up with; None = missing)
    (
        "NaN",
        [series({"node": "node-1"}, "NaN"), series({"node": "node-2"}, "0.5")],
        {"node-1": None, "node-2": 0.5},
    ),
    ("+Inf", [series({"node": "node-1"}, "+Inf")], {"node-1": None}),
    ("-Inf", [series({"node": "node-1"}, "-Inf")], {"node-1": None}),
    (
        "non-numeric",
        [series({"node": "node-1"}, "high"), series({"node": "node-2"}, None)],
        {"node-1": None, "node-2": None},
    ),
    (
        "value not a pair",
        [{"metric": {"node": "node-1"}, "value": "0.5"}, {"metric": {"node": "node-2"}}],
        {"node-1": None, "node-2": None},
    ),
    (
        "matrix instead of vector",
        [{"metric": {"node": "node-1"}, "values": [[1, "0.5"]]}],
        {"node-1": None},
    ),
    (
        "duplicate series keep the highest",
        [series({"node": "node-1", "i": "a"}, "0.2"), series({"node": "node-1", "i": "b"}, "0.95")],
        {"node-1": 0.95},
    ),
    (
        "unknown nodes",
        [series({"node": "ghost"}, "0.99"), series({"node": "node-1"}, "0.2")],
        {"node-1": 0.2, "node-2": None},
    ),
    ("empty result", [], {"node-1": None, "node-2": None}),
    ("no node label", [series({"instance": "10.0.0.1:9100"}, "0.2")], {"node-1": None}),
    ("empty node label", [series({"node": ""}, "0.2")], {"node-1": None}),
    (
        "labels not an object",
        [{"metric": ["node", "node-1"], "value": [1, "0.2"]}],
        {"node-1": None},
    ),
    ("series not an object", ["node-1", 0.2, None], {"node-1": None}),
    (
        "node label a number",
        [series({"node": 7}, "0.2"), series({"node": "node-1"}, "0.2")],
        {"node-1": 0.2},
    ),
    (
        "node label a list",
        [series({"node": ["node-1"]}, "0.2"), series({"node": "node-2"}, "0.3")],
        {"node-2": 0.3},
    ),
    ("huge number", [series({"node": "node-1"}, "1e400")], {"node-1": None}),
]


@pytest.mark.parametrize(("what", "result", "expected"), GARBAGE, ids=[g[0] for g in GARBAGE])
@pytest.mark.parametrize("on_missing", ["fail-open", "fail-closed"])
def test_garbage_series(
    prom: FakePrometheus,
    caplog: pytest.LogCaptureFixture,
    on_missing: str,
    what: str,
    result: list[Any],
    expected: dict[str, float | None],
) -> None:
    h = make(prom, on_missing)
    prom.series(result)
    errors = h.refresh()
    assert errors == {}, errors  # a 200 vector is a good fetch; bad series are dropped
    values = h.stack.engine.snapshot.metrics["cpu"].values
    assert all(isinstance(n, str) for n in values), values
    failed, scores = h.verdicts()
    neutral = scores["absent"]
    for node, value in expected.items():
        assert values.get(node) == value, (node, values)
        if value is None:
            if on_missing == "fail-open":
                assert node not in failed and scores[node] == neutral
            else:
                assert failed[node] == "decice: cpu data missing"
        elif value > 0.9:
            assert failed[node] == "decice: cpu above 0.9"
        else:
            assert node not in failed
    status, ready = h.readyz()
    assert ready["metrics"]["cpu"]["fresh"] is True  # the fetch worked
    # fail-closed with no usable value at all filters every node: not ready.
    usable = any(v is not None for v in values.values())
    assert status == (200 if on_missing == "fail-open" or usable else 503)
    if what not in ("unknown nodes", "empty result"):
        assert "series dropped" in caplog.text


def test_a_bad_metric_does_not_spoil_the_others(prom: FakePrometheus) -> None:
    """Two metrics share a refresh: one query failing keeps the other one's fresh values."""
    settings = parse_settings(
        {
            "provider": "prometheus",
            "prometheus": {"url": prom.url, "timeout": 0.5},
            "metrics": [
                {
                    "name": "cpu",
                    "query": "decice_node_cpu",
                    "onMissing": "fail-closed",
                    "maxAge": MAX_AGE,
                },
                {
                    "name": "mem",
                    "query": "decice_node_mem",
                    "onMissing": "fail-closed",
                    "maxAge": MAX_AGE,
                },
            ],
            "bind": {"enabled": False},
        }
    )
    h = Harness(settings)
    prom.vector({"node-1": "0.2", "node-2": "0.3"})
    assert h.refresh() == {}
    prom.raw(500, b"oops")
    h.clock.now += MAX_AGE + 1
    assert set(h.refresh()) == {"cpu", "mem"}
    status, ready = h.readyz()
    assert (
        status == 503
        and not ready["metrics"]["cpu"]["fresh"]
        and not ready["metrics"]["mem"]["fresh"]
    )


# --- back-off and automatic recovery ---------------------------------------------------


def test_back_off_doubles_to_the_ceiling_and_resets(prom: FakePrometheus) -> None:
    h = make(prom, "fail-closed")
    assert h.refresher is not None
    h.refresher.rng = random.Random(7)
    prom.raw(500, b"down")
    delays = []
    for _ in range(6):
        h.refresh()
        delays.append(h.refresher.delay())
    # interval 1, maxBackoff 8: each wait drawn (full jitter) between one interval and a
    # ceiling doubling from two intervals to maxBackoff.
    ceilings = [2, 4, 8, 8, 8, 8]
    assert all(1 <= d <= c for d, c in zip(delays, ceilings, strict=True)), delays
    assert len(set(delays)) == len(delays), "jittered waits differ"
    prom.vector({"node-1": "0.2"})
    h.refresh()
    assert h.refresher.delay() == 1


@pytest.mark.parametrize("first", ["500", "slow"])
def test_recovers_on_its_own(prom: FakePrometheus, first: str) -> None:
    """The real lifespan loop: Prometheus bad at start-up, then fine; no restart needed.
    (Refused connections at start-up: test_real_prometheus, which stops a real one.)"""
    settings = prom_policy(prom.url, "fail-closed", interval=0.1, timeout=0.3, maxBackoff=0.4)

    if first == "500":
        prom.raw(500, b"starting")
    else:
        prom.vector({"node-1": "0.2"})
        prom.delay(1.0)
    with TestClient(build_service(settings).app) as client:
        assert client.get("/readyz").status_code == 200  # it answers (fail-closed)
        assert client.get("/readyz/data").status_code == 503
        prom.vector({"node-1": "0.2"})
        assert wait_until(lambda: client.get("/readyz/data").status_code == 200, 30)
        answer = client.post(
            "/filter",
            content=json.dumps(extender_args("u", "p", ["node-1"])),
            headers={"Content-Type": "application/json"},
        ).json()
        assert answer["NodeNames"] == ["node-1"]
