"""extender.cluster.leader.elector.LeaderElector (client-go's algorithm over the client's
transport) against tests.harness.kubeapi.FakeKubeAPI's Leases.

Short timings (retry 1 s, renew deadline 2 s, lease 3 s: the smallest whole seconds the
rules allow); every wait is on a condition with a bound, never a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import kubernetes.client
import pytest

from extender.cluster.leader.elector import LeaderElector
from tests.harness.fixtures import APISERVER
from tests.harness.kubeapi import FakeKubeAPI, client_for
from tests.harness.loopback import wait_until_async

NS = "decice"
NAME = "decice-rebalancer"
RETRY, RENEW, LEASE = 1, 2, 3
#: A bound for one leadership change the library makes on its own schedule.
LOST_WITHIN = RENEW + RETRY + 1.0
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

Make = Callable[..., LeaderElector]


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        yield server


@pytest.fixture
def make(api: FakeKubeAPI) -> Iterator[Make]:
    """Makes electors on the fake server (short timings); closes their clients."""
    clients: list[kubernetes.client.ApiClient] = []

    def make_elector(identity: str, **kwargs: Any) -> LeaderElector:
        client = client_for(api)
        clients.append(client)
        settings: dict[str, Any] = {
            "lease_duration": LEASE,
            "renew_deadline": RENEW,
            "retry_period": RETRY,
        }
        settings.update(kwargs)
        return LeaderElector(client, name=NAME, namespace=NS, identity=identity, **settings)

    yield make_elector
    for client in clients:
        closer: Callable[[], None] = client.close  # unannotated in the kubernetes package
        closer()


@contextlib.asynccontextmanager
async def campaigning(*electors: LeaderElector) -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks = [asyncio.create_task(elector.run()) for elector in electors]
    try:
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def holder(api: FakeKubeAPI) -> str | None:
    lease = api.lease(NS, NAME)
    return None if lease is None else lease["spec"].get("holderIdentity")


async def test_an_absent_lease_is_created_and_held(api: FakeKubeAPI, make: Make) -> None:
    elector = make("decice-extender-0")
    assert not elector.is_leader
    async with campaigning(elector):
        await asyncio.wait_for(elector.leading.wait(), LOST_WITHIN)
        assert elector.is_leader

        want = json.loads((APISERVER / "lease-create.json").read_text())["response"]
        lease = api.lease(NS, NAME)
        assert lease is not None
        assert set(lease) == set(want)
        assert (lease["kind"], lease["apiVersion"]) == (want["kind"], want["apiVersion"])
        assert set(lease["metadata"]) == set(want["metadata"])
        assert list(lease["spec"]) == list(want["spec"])
        assert lease["spec"]["holderIdentity"] == "decice-extender-0"
        assert lease["spec"]["leaseDurationSeconds"] == LEASE
        assert lease["spec"]["leaseTransitions"] == 0
        assert MICRO.match(lease["spec"]["acquireTime"])
        assert MICRO.match(lease["spec"]["renewTime"])
        created = api.requests_to("POST", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases")
        assert len(created) == 1

        # it renews: renewTime moves, acquireTime stays
        version = lease["metadata"]["resourceVersion"]
        await wait_until_async(
            lambda: (api.lease(NS, NAME) or {})["metadata"]["resourceVersion"] != version,
            RENEW + 2,
            "the lease was renewed",
        )
        renewed = api.lease(NS, NAME)
        assert renewed is not None
        assert renewed["spec"]["acquireTime"] == lease["spec"]["acquireTime"]
        assert renewed["spec"]["renewTime"] > lease["spec"]["renewTime"]
        detail = elector.detail()
        assert detail["leading"] is True
        assert detail["holder"] == "decice-extender-0"
        assert (detail["lease_name"], detail["lease_namespace"]) == (NAME, NS)
        assert detail["transitions"] == 1
        assert detail["last_error"] is None
        assert detail["campaigning"] is True
    assert not elector.is_leader
    assert not elector.leading.is_set()


async def test_of_two_candidates_exactly_one_leads(api: FakeKubeAPI, make: Make) -> None:
    first, second = make("replica-a"), make("replica-b")
    both: list[bool] = []

    def leaders() -> int:
        count = int(first.is_leader) + int(second.is_leader)
        both.append(count > 1)
        return count

    async with campaigning(first, second):
        await wait_until_async(lambda: leaders() == 1, LOST_WITHIN, "one replica leads")
        leader, follower = (first, second) if first.is_leader else (second, first)
        assert holder(api) == leader.identity
        # over a few renewals (each a new resourceVersion), the follower stays a follower
        lease = api.lease(NS, NAME)
        assert lease is not None
        start = int(lease["metadata"]["resourceVersion"])
        await wait_until_async(
            lambda: (
                leaders() == 1
                and int((api.lease(NS, NAME) or {})["metadata"]["resourceVersion"]) >= start + 2
            ),
            2 * RENEW + 2,
            "two renewals by the leader",
        )
        assert not any(both)
        assert holder(api) == leader.identity
        await wait_until_async(
            lambda: follower.detail()["holder"] == leader.identity, 3 * RETRY + 1, "seen"
        )
        assert not follower.leading.is_set()


async def test_a_stolen_lease_stops_leading_then_is_won_back(api: FakeKubeAPI, make: Make) -> None:
    elector = make("replica-a")
    async with campaigning(elector):
        await asyncio.wait_for(elector.leading.wait(), LOST_WITHIN)
        api.steal_lease(NS, NAME, "replica-z")  # and it never renews
        await wait_until_async(lambda: not elector.is_leader, LOST_WITHIN, "leadership lost")
        await wait_until_async(lambda: not elector.leading.is_set(), LOST_WITHIN, "stopped leading")
        assert elector.detail()["transitions"] == 2
        assert elector.detail()["holder"] == "replica-z"

        # the thief's lease runs out after leaseDurationSeconds: ours again
        await asyncio.wait_for(elector.leading.wait(), LEASE + 2 * (RENEW + RETRY) + 2)
        assert elector.is_leader
        lease = api.lease(NS, NAME)
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "replica-a"
        assert lease["spec"]["leaseTransitions"] == 2  # to replica-z, back to replica-a
        assert elector.detail()["transitions"] == 3


async def test_failing_lease_calls_stop_leading_and_are_logged_once(
    api: FakeKubeAPI, make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    elector = make("replica-a")
    caplog.set_level(logging.INFO, logger="decice.leader")
    async with campaigning(elector):
        await asyncio.wait_for(elector.leading.wait(), LOST_WITHIN)
        api.break_leases(503)
        # is_leader does not wait for the campaign: renew_deadline after the last renew
        await wait_until_async(lambda: not elector.is_leader, LOST_WITHIN, "leadership lost")
        await wait_until_async(
            lambda: not elector.leading.is_set(), LOST_WITHIN, "the campaign stopped leading"
        )
        # still failing: one more failed call after the loss, still one warning
        failed = len(api.requests)
        await wait_until_async(lambda: len(api.requests) > failed, RETRY + 2, "a retry")
        last_error = str(elector.detail()["last_error"])
        assert "503" in last_error and NAME in last_error
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]

        api.break_leases(None)  # the lease is still ours: taken back at once
        await asyncio.wait_for(elector.leading.wait(), RETRY * 2 + 2)
        assert elector.is_leader
        assert any("work again" in r.getMessage() for r in caplog.records)


async def test_a_connection_error_is_retried_like_an_api_error(make: Make) -> None:
    with FakeKubeAPI() as gone:
        url = gone.url
    client = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=url))
    client.configuration.retries = False
    elector = LeaderElector(
        client,
        name=NAME,
        namespace=NS,
        identity="replica-a",
        lease_duration=LEASE,
        renew_deadline=RENEW,
        retry_period=RETRY,
    )
    try:
        async with campaigning(elector):
            await wait_until_async(
                lambda: elector.detail()["last_error"] is not None, RETRY + 3, "a failed read"
            )
            assert elector.detail()["campaigning"] is True  # the campaign goes on
            assert not elector.is_leader
    finally:
        closer: Callable[[], None] = client.close
        closer()


async def test_cancel_stops_the_campaign_and_releases_the_lease(
    api: FakeKubeAPI, make: Make
) -> None:
    leader, follower = make("replica-a"), make("replica-b")
    async with campaigning(leader) as (task,):
        await asyncio.wait_for(leader.leading.wait(), LOST_WITHIN)
        async with campaigning(follower):
            await wait_until_async(
                lambda: follower.detail()["holder"] == "replica-a", RETRY + 2, "follower sees it"
            )
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert not leader.is_leader and not leader.leading.is_set()
            assert leader.detail()["campaigning"] is False
            # released, not left to run out: the follower takes over at its next retry
            await asyncio.wait_for(follower.leading.wait(), 2 * RETRY + 2)
            assert holder(api) == "replica-b"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"lease_duration": 2, "renew_deadline": 2}, "lease_duration"),
        ({"renew_deadline": 2, "retry_period": 2}, "renew_deadline"),
        ({"retry_period": 0}, "retry_period"),
        ({"retry_period": 1.5}, "whole number"),
        ({"identity": ""}, "identity"),
    ],
)
def test_bad_settings_are_value_errors_not_exits(settings: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"name": NAME, "namespace": NS, "identity": "replica-a"}
    arguments.update(settings)
    client = kubernetes.client.ApiClient(kubernetes.client.Configuration(host="http://127.0.0.1:1"))
    try:
        with pytest.raises(ValueError, match=message):
            LeaderElector(client, **arguments)
    finally:
        closer: Callable[[], None] = client.close
        closer()
