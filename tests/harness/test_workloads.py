"""tests.harness.workloads.WorkloadExporter: a node's background load changing at a time
(`set_background`), read back from the counters it writes (`history`) and its `demand`."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import pytest

from tests.harness.workloads import BOOTED, Owner, WorkloadExporter

START = 1_700_000_000.0
_SAMPLE = re.compile(r"^(\w+)\{(.*)\} (\S+) (\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


@pytest.fixture
def exporter() -> Iterator[WorkloadExporter]:
    with WorkloadExporter() as made:
        yield made


def samples(text: str, name: str, **labels: str) -> list[tuple[float, float]]:
    """(time, value) of the one series of `name` whose labels include `labels`."""
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m.group(1) == name and labels.items() <= dict(_LABEL.findall(m.group(2))).items():
            out.append((float(m.group(4)), float(m.group(3))))
    return out


def slopes(points: list[tuple[float, float]]) -> list[float]:
    return [(v2 - v1) / (t2 - t1) for (t1, v1), (t2, v2) in itertools.pairwise(points)]


def test_a_new_background_re_rates_the_counters_from_then_on(exporter: WorkloadExporter) -> None:
    exporter.add_node("node-1", cores=2, background=0.25, now=START)
    exporter.set_background("node-1", 0.75, now=START + 10)
    text = exporter.history(START, START + 20, step=5)
    user = samples(text, "node_cpu_seconds_total", cpu="0", mode="user")
    idle = samples(text, "node_cpu_seconds_total", cpu="1", mode="idle")
    # Busy 0.25 of the time, then 0.75 (user is 3/4 of busy, idle 8/10 of idle time).
    assert slopes(user) == pytest.approx([0.75 * 0.25] * 2 + [0.75 * 0.75] * 2)
    assert slopes(idle) == pytest.approx([0.8 * 0.75] * 2 + [0.8 * 0.25] * 2)
    # No jump at the change: the value then is what the old rate made of it.
    assert dict(user)[START + 10] == pytest.approx(BOOTED + 0.75 * 0.25 * 10)
    assert exporter.demand("node-1") == 0.75


def test_a_node_asked_for_more_than_its_cores_serves_its_pods_in_proportion(
    exporter: WorkloadExporter,
) -> None:
    exporter.add_node("node-1", cores=2, background=0.0, now=START)
    exporter.run("shop", "web-1", "node-1", 1.0, Owner("ReplicaSet", "web-1"), now=START)
    exporter.set_background("node-1", 1.0, now=START + 10)
    assert exporter.demand("node-1") == 1.5
    text = exporter.history(START, START + 20, step=10)
    used = samples(text, "container_cpu_usage_seconds_total", pod="web-1", container="main")
    busy = samples(text, "node_cpu_seconds_total", cpu="0", mode="system")
    # 1 core while alone, then 2 of the 3 cores asked for are served: 2/3 of it.
    assert slopes(used) == pytest.approx([1.0, 2 / 3], abs=1e-6)
    assert slopes(busy) == pytest.approx([0.25 * 0.5, 0.25 * 1.0])


def test_bad_changes_say_what_is_wrong(exporter: WorkloadExporter) -> None:
    exporter.add_node("node-1", cores=2, background=0.2, now=START)
    with pytest.raises(KeyError, match="no node node-9"):
        exporter.set_background("node-9", 0.5, now=START + 1)
    with pytest.raises(ValueError, match=r">= 0, not -0\.1"):
        exporter.set_background("node-1", -0.1, now=START + 1)
    exporter.set_background("node-1", 0.5, now=START + 10)
    with pytest.raises(ValueError, match="time order"):
        exporter.set_background("node-1", 0.9, now=START + 5)
