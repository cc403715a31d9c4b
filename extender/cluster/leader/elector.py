"""Leader election on a coordination.k8s.io/v1 Lease, for work only one replica may do
(the rebalancer's evictions).

It drives the `kubernetes` package's own `kubernetes.leaderelection` (synchronous:
threads and `time.sleep`) in one daemon thread per elector, and bridges its reports to
asyncio. The library is wrapped where it falls short of a long-running service: its lock
(extender.cluster.leader.lock), and here:

* `LeaderElection.run()` returns once leadership is lost: we campaign again after a loss,
  and a stop flag ends the campaign at its next Lease call;
* `electionconfig.Config` calls `sys.exit` on bad settings: ours are checked first
  (`ValueError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import kubernetes.client
from kubernetes.leaderelection import electionconfig, leaderelection

from extender.cluster.leader.lock import Lock, Stopped
from extender.cluster.leader.state import ElectionState

__all__ = ["LeaderElector"]

log = logging.getLogger("decice.leader")

#: The library's own logger says "lease held by X and has not expired" at INFO on every
#: retry of every follower; this module reports what matters (transitions, errors).
_LIBRARY_LOGGER = "leaderelection"
#: The library checks renew_deadline > jitter * retry_period.
_JITTER = 1.2

# The `kubernetes` package leaves these unannotated.
_Config: Callable[..., Any] = electionconfig.Config
_LeaderElection: Callable[..., Any] = leaderelection.LeaderElection


def _whole_seconds(name: str, value: float) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of seconds, got {value!r}")
    if value < 1 or not float(value).is_integer():
        raise ValueError(f"{name} must be a whole number of seconds >= 1, got {value!r}")
    return int(value)


class LeaderElector:
    """Campaign for the Lease `namespace/name` as `identity`, for as long as `run()` runs.

    Semantics of `is_leader` (client-go's): it is True only while this replica holds the
    Lease *and* renewed it within the last `renew_deadline` seconds. The library reports
    "stopped leading" when it could not renew within `renew_deadline` (after its last
    successful renew and a `retry_period` pause); `is_leader` turns False at that report at
    the latest, and earlier when `renew_deadline` passed since the last successful renew,
    whatever the library's thread is doing. Since `renew_deadline < lease_duration`, a
    replica stops acting before the Lease can expire for another one: check `is_leader`
    right before each eviction.

    `leading` (an asyncio.Event) and `on_change(bool)` follow the library's reports
    (acquired, stopped leading, stopped campaigning); both are updated in the event loop
    that runs `run()`. Leadership lost on a failed renew is campaigned for again at once.

    Errors talking to the API are the library's business (it retries every
    `retry_period`); each streak of them is logged once at WARNING, and its end at INFO.
    Every Lease call is bounded by `renew_deadline / 2` seconds (at least 1).
    """

    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15,
        renew_deadline: float = 10,
        retry_period: float = 2,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        for arg, value in (("name", name), ("namespace", namespace), ("identity", identity)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"LeaderElector: {arg} must be a non-empty string")
        self.lease_duration = _whole_seconds("lease_duration", lease_duration)
        self.renew_deadline = _whole_seconds("renew_deadline", renew_deadline)
        self.retry_period = _whole_seconds("retry_period", retry_period)
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if self.renew_deadline <= _JITTER * self.retry_period:
            raise ValueError(f"renew_deadline must be greater than {_JITTER} * retry_period")
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.on_change = on_change
        #: Set while leading, as the library reports it (see the class docstring).
        self.leading = asyncio.Event()
        self._api = kubernetes.client.CoordinationV1Api(api_client)
        self._request_timeout = max(1.0, self.renew_deadline / 2)
        self._state = ElectionState(name, namespace, identity, self.retry_period)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        library = logging.getLogger(_LIBRARY_LOGGER)
        if library.level == logging.NOTSET:
            library.setLevel(logging.WARNING)

    # --- state, read from any thread ---

    @property
    def is_leader(self) -> bool:
        """Whether to act as the leader now (thread-safe; see the class docstring)."""
        return self._state.leads_within(self.renew_deadline)

    @property
    def thread(self) -> threading.Thread | None:
        """The campaign thread of the current or last `run()`."""
        return self._thread

    def detail(self) -> dict[str, object]:
        """For /readyz and logs: who we are, whether we lead, the Lease as last seen."""
        campaigning = self._thread is not None and self._thread.is_alive()
        return self._state.detail(self.is_leader, campaigning)

    # --- running ---

    async def run(self) -> None:
        """Campaign until cancelled (or `stop()`): leadership is sought, held, and sought
        again once lost. Cancelling stops the thread at its next Lease call (within
        `retry_period` plus one call), releases the Lease if we hold it, and waits for the
        thread, bounded."""
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("LeaderElector.run() is already running")
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stop.clear()
        done = asyncio.Event()

        def finished() -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone already
                loop.call_soon_threadsafe(done.set)

        thread = threading.Thread(
            target=self._campaign,
            args=(finished,),
            name=f"leader-election-{self.namespace}/{self.name}",
            daemon=True,
        )
        self._thread = thread
        thread.start()
        try:
            await done.wait()
        finally:
            self._stop.set()
            bound = self.retry_period + 3 * self._request_timeout + 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), bound)
            if thread.is_alive():
                log.warning("leader election thread still busy %gs after the stop", bound)
            self._set_leader(False, None)

    def stop(self) -> None:
        """Ask the campaign to end (thread-safe); `run()` returns once it has."""
        self._stop.set()

    def _campaign(self, finished: Callable[[], None]) -> None:
        lock: Lock | None = None
        try:
            while not self._stop.is_set():
                lock = Lock(self._api, self._state, self._stop, self._request_timeout)
                ended = threading.Event()  # this round's leadership is over
                config = _Config(
                    lock,
                    lease_duration=self.lease_duration,
                    renew_deadline=self.renew_deadline,
                    retry_period=self.retry_period,
                    onstarted_leading=lambda ended=ended: self._set_leader(True, ended),
                    onstopped_leading=lambda ended=ended: self._set_leader(False, ended),
                )
                try:
                    _LeaderElection(config).run()
                except Stopped:
                    break
                except Exception as exc:  # a library failure: note it, back off, retry
                    self._state.call_failed("campaign", exc)
                finally:
                    ended.set()
                    self._set_leader(False, None)
                self._stop.wait(self.retry_period)
        finally:
            self._set_leader(False, None)
            # client-go's ReleaseOnCancel: another replica takes over at its next retry
            # rather than after lease_duration.
            if lock is not None and self._state.renewed_within(self.lease_duration):
                lock.release()
            finished()

    # --- reports from the campaign thread ---

    def _set_leader(self, leading: bool, ended: threading.Event | None) -> None:
        if leading and (ended is None or ended.is_set() or self._stop.is_set()):
            return  # a late "started" of a round that is already over
        if not self._state.set_leader(leading):
            return
        if leading:
            log.info("leading: %s holds the lease %s/%s", self.identity, self.namespace, self.name)
        else:
            log.info("stopped leading: the lease %s/%s", self.namespace, self.name)
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed
                loop.call_soon_threadsafe(self._announce, leading)

    def _announce(self, leading: bool) -> None:
        """In the event loop: `leading` and `on_change` follow the latest state."""
        if leading != self._state.leader:
            return  # superseded by a later report
        if leading:
            self.leading.set()
        else:
            self.leading.clear()
        if self.on_change is not None:
            try:
                self.on_change(leading)
            except Exception:
                log.exception("leader election on_change callback failed")
