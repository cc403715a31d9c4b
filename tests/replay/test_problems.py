"""The bad inputs' words: the memory estimate and what it suggests, the retention read
from the server, each message."""

from __future__ import annotations

import pytest

from extender.replay.collect import BASE, Size, check
from extender.replay.problems import beyond_retention, missing, retention_seconds, when

DAY = 86400.0


def week(step: float = 30, pods: int = 20_000, pod_steps: int = 60_000_000) -> Size:
    steps = int(7 * DAY / step)
    return Size(nodes=500, steps=steps, pods=pods, pod_steps=int(pod_steps * 30 / step),
                answer_samples=500_000, step=step)  # fmt: skip


def test_a_range_that_fits_passes() -> None:
    assert check(week(), 4 * 2**30) is None


def test_too_large_names_the_size_and_a_step_that_fits() -> None:
    size = week(pod_steps=400_000_000)
    problem = check(size, 2 * 2**30)
    assert problem is not None
    text = str(problem)
    assert text.startswith("the range needs about 4.2 GiB of memory (")
    assert "500 nodes and 20000 pods over 7.0 days at step 30s" in text
    # At 60s it would still need 2.0 GiB and a bit: 120s is the first step that fits.
    assert text.endswith(
        "over the limit of 2.0 GiB (--max-memory): use --step 120s (about 1.3 GiB) or a "
        "shorter range"
    )


def test_too_large_at_any_step_suggests_a_shorter_range() -> None:
    problem = check(week(pod_steps=4_000_000_000), 2**30)
    assert problem is not None
    assert "use a range of at most" in str(problem) and "raise --max-memory" in str(problem)


def test_too_large_even_without_the_range_suggests_fewer_namespaces() -> None:
    problem = check(week(), BASE / 2)
    assert problem is not None
    assert "replay fewer namespaces (--namespace) or raise --max-memory" in str(problem)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15d", 15 * DAY),
        ("10d or 50GiB", 10 * DAY),
        ("1h30m", 5400.0),
        ("12M", 12 * 31 * DAY),  # VictoriaMetrics' -retentionPeriod, in months
        ("50GiB", None),  # size only: no time to judge
        ("", None),
        (None, None),
    ],
)
def test_retention_seconds(text: str | None, seconds: float | None) -> None:
    assert retention_seconds(text) == seconds


def test_beyond_retention() -> None:
    now = 1_800_000_000.0
    assert beyond_retention(now - 2 * DAY, "15d", now) is None
    assert beyond_retention(now - 20 * DAY, None, now) is None  # retention unknown
    problem = beyond_retention(now - 20 * DAY, "15d", now)
    assert problem is not None
    assert str(problem) == (
        f"the range starts {when(now - 20 * DAY)}, but the server keeps 15d (data from "
        f"{when(now - 15 * DAY)} on): use --from {when(now - 15 * DAY)} or later"
    )


def test_missing_names_each_series_with_what_records_it() -> None:
    text = str(missing([("kube_pod_info", "pods"), ("my_rule", "node CPU")], 0.0, DAY))
    assert text.splitlines() == [
        "series missing between 1970-01-01T00:00Z and 1970-01-02T00:00Z:",
        "  kube_pod_info (pods): recorded by kube-state-metrics (kubeStateMetrics.enabled, "
        "on by default)",
        "  my_rule (node CPU): recorded by not a kube-prometheus-stack series: check the query",
    ]


def test_missing_labels_come_first_grouped_by_label() -> None:
    lacking = [
        ("kube_pod_created", "uid", True),
        ("kube_pod_info", "uid", False),
        ("kube_pod_container_resource_requests", "uid", True),
        ("kube_pod_info", "node", True),
    ]
    text = str(missing([("my_rule", "node CPU")], 0.0, DAY, lacking))
    lines = text.splitlines()
    assert lines[0] == (
        "series without a label the replay keys on, between 1970-01-01T00:00Z and "
        "1970-01-02T00:00Z:"
    )
    assert lines[1].startswith(
        "  no uid label on any series of kube_pod_created, kube_pod_container_resource_requests: "
    )
    assert lines[2].startswith("  no uid label on some series of kube_pod_info: ")
    assert lines[3].startswith("  no node label on any series of kube_pod_info: which node")
    assert lines[4] == "series missing between 1970-01-01T00:00Z and 1970-01-02T00:00Z:"
    assert lines[5].startswith("  my_rule (node CPU): ")
