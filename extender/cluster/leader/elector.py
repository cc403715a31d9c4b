"""Leader election on a coordination.k8s.io/v1 Lease: client-go's algorithm
(k8s.io/client-go/tools/leaderelection/leaderelection.go) over the client's transport."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import random
import time
from typing import Any

import orjson

from extender.cluster.client.api import Config, Transport, non_empty
from extender.cluster.client.errors import KubeError

__all__ = ["LeaderElector"]

log = logging.getLogger("decice.leader")

_JITTER = 1.2  # client-go's JitterFactor: a follower retries after retry_period * [1, 2.2)


def _whole_seconds(name: str, value: float) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of seconds, got {value!r}")
    if value < 1 or not float(value).is_integer():
        raise ValueError(f"{name} must be a whole number of seconds >= 1, got {value!r}")
    return int(value)


def _micro_time() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaign for the Lease `namespace/name` as `identity` while `run()` runs.
    `is_leader` (client-go's) holds only while renewed within `renew_deadline` <
    `lease_duration`, so a replica stops acting before another may take over: check it
    before each write. A streak of failed calls is logged once; each call is bounded by
    `renew_deadline / 2` seconds."""

    def __init__(
        self,
        configuration: Config,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15,
        renew_deadline: float = 10,
        retry_period: float = 2,
    ) -> None:
        non_empty("LeaderElector", name=name, namespace=namespace, identity=identity)
        self.lease_duration = _whole_seconds("lease_duration", lease_duration)
        self.renew_deadline = _whole_seconds("renew_deadline", renew_deadline)
        self.retry_period = _whole_seconds("retry_period", retry_period)
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if self.renew_deadline <= _JITTER * self.retry_period:
            raise ValueError(f"renew_deadline must be greater than {_JITTER} * retry_period")
        self.name, self.namespace, self.identity = name, namespace, identity
        self.leading = asyncio.Event()
        self._api = Transport(configuration, timeout=max(1.0, self.renew_deadline / 2), retries=0)
        self._rng = random.Random()
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._leader = False
        self._last_renew = -float("inf")  # time.monotonic() of our last successful write
        self._observed: tuple[Any, float] = (None, 0.0)  # the Lease's spec, when it changed
        self._holder: str | None = None
        self._lease_transitions: int | None = None
        self._transitions = 0
        self._last_error: str | None = None
        self._failures = 0  # of the current streak
        self._campaigning = False

    @property
    def is_leader(self) -> bool:
        return self._leader and time.monotonic() - self._last_renew < self.renew_deadline

    def detail(self) -> dict[str, object]:
        """For /readyz and logs: who we are, whether we lead, the Lease as last seen."""
        return {
            "identity": self.identity,
            "leading": self.is_leader,
            "lease_name": self.name,
            "lease_namespace": self.namespace,
            "holder": self._holder,
            "transitions": self._transitions,
            "lease_transitions": self._lease_transitions,
            "last_error": self._last_error,
            "campaigning": self._campaigning,
        }

    async def run(self) -> None:
        """Campaign until cancelled; on the way out release the Lease if held (client-go's
        ReleaseOnCancel: another replica takes over at its next retry)."""
        self._campaigning = True
        try:
            while True:
                while not await self._attempt():
                    await asyncio.sleep(self.retry_period * (1 + self._rng.random() * _JITTER))
                self._set_leader(True)
                while time.monotonic() - self._last_renew < self.renew_deadline:
                    await asyncio.sleep(self.retry_period)
                    await self._attempt()
                self._set_leader(False)
        finally:
            self._campaigning = False
            self._set_leader(False)
            if time.monotonic() - self._last_renew < self.lease_duration:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._release(), self.renew_deadline)
            await self._api.close()

    def _set_leader(self, leading: bool) -> None:
        if leading == self._leader:
            return
        self._leader = leading
        self._transitions += 1
        if leading:
            self.leading.set()
            log.info("leading: %s holds the lease %s/%s", self.identity, self.namespace, self.name)
        else:
            self.leading.clear()
            log.info("stopped leading: the lease %s/%s", self.namespace, self.name)

    async def _attempt(self) -> bool:
        """One try to acquire or renew; False when another holds the Lease or a call failed."""
        try:
            acquired = await self._try_acquire_or_renew()
        except KubeError as exc:
            self._failures += 1
            self._last_error = f"lease {self.namespace}/{self.name}: {exc}"
            if self._failures == 1:
                log.warning(
                    "leader election: %s (retrying every %ss)", self._last_error, self.retry_period
                )
            return False
        if self._failures:
            log.info("leader election: lease calls work again after %d failures", self._failures)
        self._failures = 0
        if acquired:
            self._last_renew = time.monotonic()
            self._holder = self.identity
        return acquired

    async def _try_acquire_or_renew(self) -> bool:
        now = _micro_time()
        mine = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_duration,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        try:
            lease = await self._api.request("GET", f"{self._path}/{self.name}")
            if not isinstance(lease, dict):
                raise KubeError("GET lease: answer is not an object", reason="BadResponse")
        except KubeError as exc:
            if exc.status != 404:
                raise
            body = {"metadata": {"name": self.name, "namespace": self.namespace}, "spec": mine}
            return await self._write("POST", self._path, body, 0)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or None
        self._holder, self._lease_transitions = holder, spec.get("leaseTransitions")
        if spec != self._observed[0]:
            self._observed = (spec, time.monotonic())
        duration = spec.get("leaseDurationSeconds") or 0
        if holder not in (None, self.identity) and time.monotonic() < self._observed[1] + duration:
            return False  # held by another replica, and not expired
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == self.identity:
            mine["acquireTime"] = spec.get("acquireTime") or now
        else:
            transitions += 1
        lease["spec"] = {**mine, "leaseTransitions": transitions}
        return await self._write("PUT", f"{self._path}/{self.name}", lease, transitions)

    async def _write(self, method: str, path: str, lease: dict[str, Any], transitions: int) -> bool:
        """Create or replace the Lease; False when another replica wrote it first (409)."""
        lease.update(apiVersion="coordination.k8s.io/v1", kind="Lease")
        try:
            await self._api.request(method, path, body=orjson.dumps(lease))
        except KubeError as exc:
            if exc.status == 409:
                return False
            raise
        self._lease_transitions = transitions
        return True

    async def _release(self) -> None:
        """Give the Lease up if we hold it: no holder, a 1 s duration."""
        try:
            lease = await self._api.request("GET", f"{self._path}/{self.name}")
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            now = _micro_time()
            spec.update(holderIdentity=None, leaseDurationSeconds=1, acquireTime=now, renewTime=now)
            await self._api.request("PUT", f"{self._path}/{self.name}", body=orjson.dumps(lease))
        except KubeError as exc:  # it runs out by itself
            log.info("could not release the lease %s/%s: %s", self.namespace, self.name, exc)
            return
        self._last_renew = -float("inf")
        log.info("released the lease %s/%s", self.namespace, self.name)
