"""List-then-watch loops, as client-go's reflector (`tools/cache/reflector.go`) runs them:
list, then watch with bookmarks from the last version seen; up once the server answered (a
quiet one sends nothing for a minute). A 410 lists again; other failures back off (1 s
doubling to `MAX_BACKOFF`), but before the first list the loop retries within a second
(`FIRST_SYNC_BACKOFF`, `FIRST_SYNC_ANSWERED`), so a service started before the API server
learns the cluster as soon as it answers. Handlers run on the event loop, O(1) per event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from extender.cluster.kubeapi import KubeAPI
from extender.cluster.watch_filter import PodWatchFilter
from extender.errors.backoff import Backoff
from extender.errors.causes import describe

log = logging.getLogger("decice.watch")

MIN_BACKOFF = 1.0  # the first failure's ceiling, and the pause after a stream that ended at once
MAX_BACKOFF = 30.0
FIRST_SYNC_BACKOFF = (0.5, 1.0)  # before the first list: each wait drawn between these (seconds)
FIRST_SYNC_ANSWERED = 5
"""Answered failures retried that fast before the first list (a lasting 403 is a missing
permission, not a server coming up)."""
QUIET_LOG = 30.0  # seconds between two warnings of the same failure before the first list

EventHandler = Callable[[str, Any], object]  # (event type, object) for ADDED / MODIFIED / DELETED


class WatchExpired(Exception):
    """The server no longer holds our resourceVersion (410): list again."""


@dataclass
class WatchStatus:
    """What /readyz shows for one watch."""

    resource: str
    watching: bool = False
    synced: bool = False  # its first list succeeded
    resource_version: str = ""
    events: int = 0
    restarts: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    watch_filter: PodWatchFilter | None = field(default=None, repr=False)

    @property
    def dropped(self) -> int:
        return self.watch_filter.dropped if self.watch_filter is not None else 0

    def detail(self) -> dict[str, object]:
        return {
            "synced": self.synced,
            "watching": self.watching,
            "resourceVersion": self.resource_version,
            "events": self.events,
            "dropped": self.dropped,
            "restarts": dict(self.restarts),
            "error": self.error,
        }


@dataclass(eq=False)
class Informer:
    """One resource's list-then-watch loop; `run()` forever (cancel to stop)."""

    resource: str
    path: str
    kube: KubeAPI
    start: Callable[[], Awaitable[str]]
    handle: EventHandler
    _: KW_ONLY
    timeout_seconds: int = 300
    restarted: Callable[[str, str], object] = lambda resource, reason: None
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rng: random.Random = field(default_factory=random.Random)
    watch_filter: PodWatchFilter | None = None

    def __post_init__(self) -> None:
        self.status = WatchStatus(self.resource, watch_filter=self.watch_filter)
        self.backoff = Backoff(base=MIN_BACKOFF, cap=MAX_BACKOFF, rng=self.rng)
        low, high = FIRST_SYNC_BACKOFF
        self.first_sync_backoff = Backoff(base=high, cap=high, floor=low, rng=self.rng)
        self._answered = 0
        self._warned: tuple[str, float] | None = None
        self._failures = 0
        self._version: str | None = None

    async def prime(self, timeout: float) -> None:
        """The first list, before the service answers (bounded); `run` starts from it."""
        try:
            self._version = await asyncio.wait_for(self.start(), timeout)
            self.status.synced = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # run() lists again, with back-off
            self.status.error = describe(exc)
            log.warning("%s: first list failed (%s); the watch retries", self.status.resource, exc)

    def _restart(self, reason: str) -> None:
        restarts = self.status.restarts
        restarts[reason] = restarts.get(reason, 0) + 1
        self.restarted(self.status.resource, reason)

    async def run(self) -> None:
        version, self._version = self._version, None
        while True:
            try:
                if version is None:
                    version = await self.start()
                    self.status.synced = True
                opened = time.monotonic()
                version = await self._watch(version)
                if time.monotonic() - opened < MIN_BACKOFF:
                    # A stream that ends at once (a proxy's idle cut): never spin on it.
                    await self.sleep(MIN_BACKOFF)
            except asyncio.CancelledError:
                self.status.watching = False
                raise
            except Exception as exc:
                self.status.watching = False
                if isinstance(exc, WatchExpired) or getattr(exc, "status", None) == 410:
                    # Expected now and then (the server compacted its history): no back-off.
                    log.info("%s watch: %s; listing again", self.status.resource, exc)
                    self._restart("expired")
                    version = None
                    continue
                self._restart("error")
                self.status.error = describe(exc)
                delay = self._delay(exc)
                self._warn(delay)
                await self.sleep(delay)

    def _delay(self, exc: BaseException) -> float:
        answered = getattr(exc, "status", None) is not None
        if not self.status.synced and (not answered or self._answered < FIRST_SYNC_ANSWERED):
            self._answered += answered
            return self.first_sync_backoff.wait(1)
        self._failures += 1
        return self.backoff.wait(self._failures)

    def _warn(self, delay: float) -> None:
        """One warning per failure; before the first list, a repeat every QUIET_LOG only."""
        error, resource, now = self.status.error or "", self.status.resource, time.monotonic()
        if not self.status.synced and self._warned is not None:
            last, at = self._warned
            if last == error and now - at < QUIET_LOG:
                log.debug("%s: still no first list (%s)", resource, error)
                return
        self._warned = (error, now)
        what = (
            f"{resource} watch failed" if self.status.synced else f"{resource}: no first list yet"
        )
        log.warning("%s (%s); retrying in %.1f s", what, error, delay)

    async def _watch(self, version: str) -> str:
        """Watch from `version` until the server ends the stream; the last version seen."""
        watch_filter = self.status.watch_filter
        if watch_filter is not None:
            watch_filter.version = ""
        stream = self.kube.watch(
            self.path,
            resource_version=version,
            timeout_seconds=self.timeout_seconds,
            opened=self._up,
            sieve=watch_filter,
        )
        self.status.resource_version = version
        try:
            async with contextlib.aclosing(stream):  # leaving early frees the connection
                version = await self._consume(stream, version)
        finally:
            # The watch filter read every line, the dropped ones too: resume after the last.
            if watch_filter is not None and watch_filter.version:
                version = self.status.resource_version = watch_filter.version
        return version

    def _up(self) -> None:
        if not self.status.watching:
            self.status.watching = True
            if self.status.error is not None:
                log.info("%s watch recovered", self.status.resource)
                self.status.error = None
            self._failures = 0

    async def _consume(self, stream: AsyncGenerator[dict[str, Any], None], version: str) -> str:
        async for event in stream:
            self._up()  # a watcher that cannot tell when the stream opened
            kind = event.get("type")
            obj = event.get("object")
            if kind == "ERROR":
                code = obj.get("code") if isinstance(obj, dict) else None
                message = obj.get("message") if isinstance(obj, dict) else obj
                if code == 410:
                    raise WatchExpired(str(message))
                raise RuntimeError(f"watch ERROR event: {message}")
            meta = obj.get("metadata") if isinstance(obj, dict) else None
            seen = meta.get("resourceVersion") if isinstance(meta, dict) else None
            if isinstance(seen, str) and seen:
                version = seen
                self.status.resource_version = seen
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self.status.events += 1
                try:
                    self.handle(kind, obj)
                except Exception:  # one bad object must not stop (or replay) the stream
                    log.exception(
                        "%s watch: handling a %s event failed", self.status.resource, kind
                    )
            # BOOKMARK: only the version moves, so a restart resumes from there.
        return version
