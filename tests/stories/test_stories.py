"""Stories a cluster lives, with everything on at once (see conftest.py for the cast).

Each story is a burst of pods placed by the played scheduler through our verbs, something
that happens in the middle of it, and the invariants every story is held to
(`Story.check`). Waits are bounded polls of a condition.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from typing import Any

import pytest

from extender.decisions.overload import TAINT_KEY
from tests.harness.loopback import wait_until
from tests.stories.conftest import INTERVAL, NS, OVERLOAD_SECONDS, Story

pytestmark = pytest.mark.integration

COOL = 0.3
HOT = 0.95
OLD = time.time() - 3600  # placed an hour ago: past the rebalancer's minAge


def report(name: str, figures: dict[str, Any]) -> None:
    print(f"story {name}: {json.dumps(figures, sort_keys=True)}")


def test_a_burst_then_an_urgent_pod_that_must_preempt(story_factory: Any) -> None:
    # node-1 is hot; a burst fills node-2..4 by requests (a 7-core filler on each, beside a
    # small pod), so an urgent 2-core pod fits nowhere and must preempt a filler placed a
    # moment ago, whose herd reservation still weighs on its node.
    story: Story = story_factory({"node-1": HOT, "node-2": COOL, "node-3": COOL, "node-4": COOL})
    small = story.pods("small", 3, "500m")
    fillers = story.pods("filler", 3, "7")
    story.player.run_until(lambda: story.bound(small + fillers), 60, "the burst is placed")
    where = {uid_of(story, n): (n, story.node_of(n)) for n in fillers}
    assert {node for _, node in where.values()} == {"node-2", "node-3", "node-4"}

    [urgent] = story.pods("urgent", 1, "2", priority=1000)
    story.player.run_until(lambda: story.bound([urgent]), 60, "the urgent pod is placed")

    [(_, node, victims)] = story.player.played.preempted
    assert story.node_of(urgent) == node != "node-1"
    [victim] = victims  # one filler, on the node the urgent pod took, deleted
    name, victim_node = where[victim]
    assert victim_node == node and story.api.pod(NS, name) is None
    # The fillers fit on no node by their expected use (7 of 8 cores): our filter gives
    # those nodes as unresolvable (kube-scheduler's preemption, choosing victims by its own
    # filters, could free nothing there). The urgent pod's preemption found its node.
    assert uid_of(story, urgent) not in story.player.played.no_candidate
    placed = small + [f for f in fillers if story.api.pod(NS, f) is not None] + [urgent]
    report("preemption", story.check(placed))


def test_a_node_turns_hot_with_the_rebalancer_on(story_factory: Any) -> None:
    story: Story = story_factory(dict.fromkeys(("node-1", "node-2", "node-3", "node-4"), COOL))
    api = story.api
    # On node-2, placed long ago: a movable pod, a bare pod, one its budget guards.
    [movable] = story.pods("movable", 1, node="node-2", created=OLD)
    [bare] = story.pods("bare", 1, node="node-2", created=OLD, owner=None)
    [guarded] = story.pods("guarded", 1, node="node-2", created=OLD, labels={"app": "guarded"})
    api.add_pdb(NS, "guarded", match_labels={"app": "guarded"}, disruptions_allowed=0)
    story.protected |= {bare, guarded}

    story.load("node-2", HOT)
    wait_until(lambda: rejected(story) == {"node-2"}, 10 * INTERVAL, "node-2 looks hot")
    arriving = story.pods("web", 8, "500m")
    story.player.run_until(lambda: story.bound(arriving), 60, "the arrivals are placed")
    wait_until(
        lambda: api.eviction_count(NS, movable, dry_run=False) == 1,
        10 * INTERVAL,
        "the rebalancer moved the movable pod",
    )
    assert "node-2" not in {story.node_of(n) for n in arriving}
    # node-2 stays hot: after overload.forSeconds it carries our taint, so an autoscaler
    # sees it (and the scheduler's TaintToleration keeps new pods off it).
    wait_until(
        lambda: tainted(story) == {"node-2"}, OVERLOAD_SECONDS + 10 * INTERVAL, "node-2 tainted"
    )

    # Every node hot: new pods are turned away; one node cools and the requeue lets them
    # in within the refresh interval + 5 s.
    for node in ("node-1", "node-3", "node-4"):
        story.load(node, HOT)
    wait_until(lambda: rejected(story) == set(story.loads), 10 * INTERVAL, "every node is hot")
    waiting = story.pods("late", 4, "500m")
    story.player.run_until(
        lambda: all(story.player.parked.get(uid_of(story, n)) for n in waiting),
        30,
        "the late pods are turned away",
    )
    story.load("node-3", COOL)
    cooled = time.monotonic()
    story.player.run_until(lambda: story.bound(waiting), INTERVAL + 20, "the late pods are placed")
    waited = max(story.player.played.bound_at[uid_of(story, n)] for n in waiting) - cooled
    assert waited <= INTERVAL + 5, f"placed {waited:.1f} s after the node cooled"
    assert {story.node_of(n) for n in waiting} == {"node-3"}
    assert api.eviction_count(NS, guarded) == api.eviction_count(NS, bare) == 0
    figures = story.check(arriving + waiting)
    report("hot node", {**figures, "requeued_within_s": round(waited, 1)})


def test_a_policy_reload_in_the_middle_of_a_burst(story_factory: Any) -> None:
    story: Story = story_factory({"node-1": 0.1, "node-2": 0.2, "node-3": 0.3, "node-4": 0.6})
    first = story.pods("web", 12, "250m")
    batch = story.pods("batch", 6, "250m", annotations={"decice.io/policy": "batch"})
    story.player.run_until(lambda: story.bound(first[:6]), 60, "half the burst is placed")

    # A new policy file mid-burst: node-4 (0.6) is now over the default policy's threshold.
    policy = json.loads(story.extender.config.read_text())
    policy["policies"]["default"]["metrics"][0]["filter"] = {"above": 0.5}
    text = json.dumps(policy, indent=2)
    story.extender.config.write_text(text)
    sha = hashlib.sha256(text.encode()).hexdigest()
    story.player.run_until(
        lambda: story.bound(first + batch) and story.readyz()["policy"]["sha256"] == sha,
        60,
        "the burst is placed and the new policy is in force",
    )
    later = story.pods("later", 6, "250m")
    story.player.run_until(lambda: story.bound(later), 60, "the pods after it are placed")
    assert story.readyz()["policy"]["lastReload"]["successful"] is True
    assert "node-4" not in {story.node_of(n) for n in later}
    report("reload", story.check(first + batch + later))


#: The fault stories run with the API server on time and arriving a second after the
#: services' first lists failed (a delay of any length behaves the same: the informer
#: retries every second until its first list; tests/cluster/test_informer.py).
API_LATE = pytest.mark.parametrize("api_late", [None, 1.0], ids=["api-on-time", "api-late"])


@API_LATE
def test_the_api_server_goes_away_mid_burst(story_factory: Any, api_late: float | None) -> None:
    loads = dict.fromkeys(("node-1", "node-2", "node-3", "node-4"), COOL)
    story: Story = story_factory(loads, api_late)
    burst = story.pods("web", 24, "250m")
    story.player.run_until(lambda: story.bound(burst[:8]), 60, "a third is placed")
    story.api.go_away()

    # The verbs keep answering from what the service has; binds answer an Error; every
    # watch notices the server gone (so "every watch is back" below means they came back).
    def away() -> bool:
        story.player.cycle()
        watches = story.readyz()["watches"].values()
        bind_failed = any("bind" in e for e in story.player.played.errors)
        return bind_failed and not any(w["watching"] for w in watches)

    wait_until(away, 30, "binds answer an Error and no watch is up")
    story.api.come_back()
    story.player.run_until(lambda: story.bound(burst), 60, "the whole burst is placed")
    wait_until(
        lambda: all(w["watching"] for w in story.readyz()["watches"].values()),
        30,
        "every watch is back",
    )
    report("api server away", {**story.check(burst), "api_learned_in_s": story.api_learned_in})


@API_LATE
def test_the_extender_is_killed_and_restarted_mid_burst(
    story_factory: Any, api_late: float | None
) -> None:
    loads = dict.fromkeys(("node-1", "node-2", "node-3", "node-4"), COOL)
    story: Story = story_factory(loads, api_late)
    burst = story.pods("web", 24, "500m")
    story.player.run_until(lambda: story.bound(burst[:10]), 60, "the first ten are placed")
    os.kill(story.extender.pid, signal.SIGKILL)
    story.extender.wait(10)
    story.player.cycle()  # no answer: the pods stay in the queue
    story.extender.start()
    story.wait_ready(story.extender)
    # The herd guard is rebuilt from the pod watch's first list: the ten placed moments
    # ago count again on their nodes.
    text = story.metrics()
    [line] = [
        x for x in text.splitlines() if x.startswith('decice_herd_reservations{source="watch"}')
    ]
    assert float(line.split()[-1]) >= 10, line
    story.player.run_until(lambda: story.bound(burst), 60, "the whole burst is placed")
    report("extender killed", {**story.check(burst), "api_learned_in_s": story.api_learned_in})


def uid_of(story: Story, name: str) -> str:
    pod = story.api.pod(NS, name)
    assert pod is not None
    return str(pod["metadata"]["uid"])


def rejected(story: Story) -> set[str]:
    """The nodes the extender's filter rejects now."""
    probe = story.pod_body("hot-probe")
    names = list(story.loads)
    status, body = story.extender.post("/filter", {"Pod": probe, "Nodes": None, "NodeNames": names})
    assert status == 200, body
    return set(json.loads(body)["FailedAndUnresolvableNodes"] or {})


def tainted(story: Story) -> set[str]:
    """The nodes carrying our overload taint, as the API server holds them."""
    return {
        n["metadata"]["name"]
        for n in story.api.nodes()
        if any(t.get("key") == TAINT_KEY for t in n["spec"].get("taints") or ())
    }
