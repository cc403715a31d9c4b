"""extender.metrics.fetch_subprocess: big answers fetched, decoded and mapped in a
subprocess, against the loopback fake Prometheus; the same values and errors as in-process,
and a subprocess that dies fails one fetch and is replaced."""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from extender.decisions.model import NodeInfo, NodeInventory
from extender.errors.causes import BadAnswer, PartialAnswer, describe
from extender.metrics.fetch_subprocess import FetchSubprocess, in_subprocess
from extender.metrics.providers import PrometheusProvider
from extender.policy.backend import PrometheusSettings
from extender.policy.policies import MetricSettings
from tests.harness.fakeprom import FakePrometheus, series, success

CPU = MetricSettings.model_validate({"name": "cpu", "query": "cpu_query", "weight": 1.0})


@pytest.mark.parametrize(
    ("last", "above", "expected"),
    [
        (None, None, False),  # never
        (10**6, None, False),
        (None, 0, True),  # always, even the first fetch
        (0, 0, True),
        (None, 2000, False),  # not fetched yet: here first
        (2000, 2000, False),
        (2001, 2000, True),
        (5, 2000, False),
    ],
)
def test_in_subprocess(last: int | None, above: int | None, expected: bool) -> None:
    assert in_subprocess(last, above) is expected


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    with FakePrometheus() as fake:
        yield fake


def provider(prom: FakePrometheus, **section: object) -> PrometheusProvider:
    settings = PrometheusSettings.model_validate({"url": prom.url, "timeout": 5, **section})
    return PrometheusProvider(settings)


def test_the_subprocess_maps_as_the_service_does(prom: FakePrometheus) -> None:
    """Values, the highest of duplicates and dropped garbage, as map_series in-process; an
    `instance` label mapped through the inventory the subprocess is given."""
    prom.series(
        [
            series({"node": "a"}, "0.25"),
            series({"node": "a"}, "0.5"),
            series({"node": "b"}, "NaN"),
            series({"job": "x"}, "1"),
        ]
    )
    inside, here = provider(prom, childProcessAbove=0), provider(prom, childProcessAbove=None)
    try:
        assert inside.fetch(CPU, NodeInventory()) == here.fetch(CPU, NodeInventory())
        assert inside.fetch(CPU, NodeInventory()) == {"a": 0.5}
        assert inside.fetch_subprocess is not None and len(inside.fetch_subprocess.pids()) == 1
        assert here.fetch_subprocess is None

        prom.series([series({"instance": "10.0.0.1:9100"}, "0.75")])
        by_ip = NodeInventory.from_nodes([NodeInfo("node-a", ("10.0.0.1",), 4.0)])
        instance = provider(prom, childProcessAbove=0, nodeLabel="instance")
        assert instance.fetch(CPU, by_ip) == {"node-a": 0.75}
        instance.close()
    finally:
        inside.close()


def test_a_metric_moves_to_the_subprocess_once_its_answer_is_big(prom: FakePrometheus) -> None:
    prom.vector({f"n{i}": "0.1" for i in range(3)})
    p = provider(prom, childProcessAbove=2)
    try:
        p.fetch(CPU, NodeInventory())
        sub = p.fetch_subprocess
        assert sub is not None and sub.pids() == []  # 3 series: the next goes there
        assert len(p.fetch(CPU, NodeInventory())) == 3
        assert len(sub.pids()) == 1
    finally:
        p.close()


def test_errors_from_the_subprocess_read_as_in_process(prom: FakePrometheus) -> None:
    """The same description; a partial answer stays partial (refresher: no back-off)."""
    inside, here = provider(prom, childProcessAbove=0), provider(prom, childProcessAbove=None)
    try:
        prom.raw(503, b'{"status":"error","errorType":"unavailable","error":"overloaded"}')
        for p in (inside, here):
            with pytest.raises(BadAnswer if p is inside else Exception) as caught:
                p.fetch(CPU, NodeInventory())
            assert describe(caught.value) == "Prometheus query error: unavailable: overloaded"
        partial = (
            b'{"status":"success","isPartial":true,"data":{"resultType":"vector","result":[]}}'
        )
        prom.raw(200, partial)
        with pytest.raises(PartialAnswer) as caught_partial:
            inside.fetch(CPU, NodeInventory())
        assert "isPartial" in describe(caught_partial.value)
        prom.raw(200, b"<html>")
        with pytest.raises(BadAnswer, match="not JSON"):
            inside.fetch(CPU, NodeInventory())
    finally:
        inside.close()


@pytest.fixture
def fetching(prom: FakePrometheus) -> Iterator[tuple[PrometheusProvider, FetchSubprocess, int]]:
    """A provider whose every fetch goes to its subprocess, after one fetch (the subprocess
    is up): the provider, its subprocess and the subprocess' process ID."""
    prom.vector({"a": "0.5"})
    p = provider(prom, childProcessAbove=0)
    try:
        assert p.fetch(CPU, NodeInventory()) == {"a": 0.5}
        assert p.fetch_subprocess is not None
        (pid,) = p.fetch_subprocess.pids()
        yield p, p.fetch_subprocess, pid
    finally:
        p.close()


def test_a_killed_subprocess_fails_one_fetch_and_is_replaced(
    fetching: tuple[PrometheusProvider, FetchSubprocess, int], caplog: pytest.LogCaptureFixture
) -> None:
    p, sub, pid = fetching
    os.kill(pid, signal.SIGKILL)
    with (
        caplog.at_level(logging.WARNING, "decice.metrics"),
        pytest.raises(BadAnswer, match="fetch process exited"),
    ):
        p.fetch(CPU, NodeInventory())
    assert "starts a new one" in caplog.text
    assert p.fetch(CPU, NodeInventory()) == {"a": 0.5}
    (new,) = sub.pids()
    assert new != pid


def test_a_stuck_subprocess_is_killed_and_replaced(
    fetching: tuple[PrometheusProvider, FetchSubprocess, int],
    prom: FakePrometheus,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An answer that never comes: the subprocess' own timeout answers first; were the
    subprocess itself stuck, the grace after it kills it (GRACE_SECONDS, patched short here)."""
    import extender.metrics.fetch_subprocess as fetch_subprocess

    p, sub, pid = fetching
    os.kill(pid, signal.SIGSTOP)  # stuck: alive, answering nothing
    monkeypatch.setattr(fetch_subprocess, "GRACE_SECONDS", -4.5)  # 5 s timeout: 0.5 s
    with pytest.raises(BadAnswer, match="gave no answer"):
        p.fetch(CPU, NodeInventory())
    monkeypatch.undo()
    prom.raw(200, success([series({"node": "b"}, "0.25")]))
    assert p.fetch(CPU, NodeInventory()) == {"b": 0.25}
    assert pid not in sub.pids()


ORPHAN = """
import sys, time
from extender.decisions.model import NodeInventory
from extender.metrics.providers import PrometheusProvider
from extender.policy.backend import PrometheusSettings
from extender.policy.policies import MetricSettings
settings = PrometheusSettings.model_validate({"url": sys.argv[1], "childProcessAbove": 0})
p = PrometheusProvider(settings)
metric = MetricSettings.model_validate({"name": "cpu", "query": "q", "weight": 1.0})
p.fetch(metric, NodeInventory())
print(p.fetch_subprocess.pids()[0], flush=True)
sys.stdin.read()  # until killed
"""


def test_the_subprocess_exits_when_the_service_is_killed(prom: FakePrometheus) -> None:
    """SIGKILL on the service: its fetch process does not live on (it exits within about
    PARENT_CHECK_SECONDS; waited for through a pidfd, bounded)."""
    prom.vector({"a": "0.5"})
    service = subprocess.Popen(
        [sys.executable, "-c", ORPHAN, prom.url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        # Its resource tracker outlives it and reports the semaphores it left: not ours.
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert service.stdout is not None
        fetcher = int(service.stdout.readline())
        watch = os.pidfd_open(fetcher)
    finally:
        service.kill()
        service.wait(10)
    try:
        exited, _, _ = select.select([watch], [], [], 10.0)
        assert exited, f"fetch process {fetcher} outlived the service"
    finally:
        os.close(watch)
