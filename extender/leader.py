"""Leader election on a coordination.k8s.io/v1 Lease, for work only one replica may do
(the rebalancer's evictions).

It drives the `kubernetes` package's own `kubernetes.leaderelection` (synchronous:
threads and `time.sleep`) in one daemon thread per elector, and bridges its reports to
asyncio. The library is wrapped where it falls short of a long-running service:

* its `LeaseLock` would talk through a client built from the process-wide default
  configuration, and without request timeouts: ours uses the given `ApiClient`, and
  every Lease call is bounded;
* `LeaderElection.run()` returns once leadership is lost, and its acquire loop never ends:
  we campaign again after a loss, and a stop flag makes the lock raise a private
  exception, which ends either loop at its next Lease call;
* `electionconfig.Config` calls `sys.exit` on bad settings: ours are checked first
  (`ValueError`);
* its `LeaseLock` only expects `ApiException`: a transport error (refused connection,
  timeout) is answered as a failed call here, so the library retries it every
  `retry_period` instead of ending the thread.

Like extender.kube, this module is an I/O edge allowed to import `kubernetes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import kubernetes.client
from kubernetes.client.exceptions import ApiException
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

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
_lease_spec: Callable[..., Any] = LeaseLock.get_lease_spec
_lock_record: Callable[..., Any] = LeaseLock.get_lock_object


class _Stopped(Exception):
    """Raised by the lock once the elector is stopping: ends the library's loops."""


def _whole_seconds(name: str, value: float) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of seconds, got {value!r}")
    if value < 1 or not float(value).is_integer():
        raise ValueError(f"{name} must be a whole number of seconds >= 1, got {value!r}")
    return int(value)


def _describe(error: object) -> str:
    if isinstance(error, ApiException):
        return f"{error.status} {error.reason}".strip()
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _status(error: object) -> int | None:
    status = getattr(error, "status", None)
    return status if isinstance(status, int) else None


class _Lock(LeaseLock):
    """The library's LeaseLock with our client, bounded calls, the stop flag, error
    reports to the elector, and client-go's leaseTransitions bookkeeping."""

    def __init__(self, elector: LeaderElector) -> None:
        # Not LeaseLock.__init__: it builds a CoordinationV1Api from the process-wide
        # default configuration.
        self.name = elector.name
        self.namespace = elector.namespace
        self.identity = elector.identity
        self.lease_reference: Any = None
        self.api_instance = elector._api
        self._elector = elector

    def get(self, name: str, namespace: str) -> tuple[bool, Any]:
        self._elector._check_running()
        try:
            lease = self.api_instance.read_namespaced_lease(
                name, namespace, _request_timeout=self._elector._request_timeout
            )
        except ApiException as exc:
            if exc.status == 404:
                self._elector._call_worked()
            else:
                self._elector._call_failed("read", exc)
            return False, exc
        except Exception as exc:  # transport: the library takes any non-404 as "retry"
            self._elector._call_failed("read", exc)
            return False, exc
        self._elector._call_worked()
        self.lease_reference = lease
        spec = lease.spec
        self._elector._observed(
            getattr(spec, "holder_identity", None), getattr(spec, "lease_transitions", None)
        )
        return True, _lock_record(self, lease)

    def create(self, name: str, namespace: str, election_record: Any) -> bool:
        self._elector._check_running()
        spec = _lease_spec(self, election_record)
        spec.lease_transitions = 0
        body = kubernetes.client.V1Lease(
            metadata=kubernetes.client.V1ObjectMeta(name=name, namespace=namespace), spec=spec
        )
        try:
            self.lease_reference = self.api_instance.create_namespaced_lease(
                namespace, body, _request_timeout=self._elector._request_timeout
            )
        except Exception as exc:
            if _status(exc) == 409:  # another replica created it first: not a failure
                self._elector._call_worked()
            else:
                self._elector._call_failed("create", exc)
            return False
        self._elector._call_worked()
        self._elector._renewed(0)
        return True

    def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        self._elector._check_running()
        if self.lease_reference is None:
            return False
        current = self.lease_reference.spec
        previous = getattr(current, "holder_identity", None)
        transitions = getattr(current, "lease_transitions", None) or 0
        spec = _lease_spec(self, updated_record, current)
        if previous != updated_record.holder_identity:
            transitions += 1
        spec.lease_transitions = transitions
        self.lease_reference.spec = spec
        try:
            self.api_instance.replace_namespaced_lease(
                name=name,
                namespace=namespace,
                body=self.lease_reference,
                _request_timeout=self._elector._request_timeout,
            )
        except Exception as exc:
            if _status(exc) == 409:  # written by another replica since our read
                self._elector._call_worked()
            else:
                self._elector._call_failed("update", exc)
            return False
        self._elector._call_worked()
        self._elector._renewed(transitions)
        return True


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
        self._state = threading.Lock()
        self._leader = False
        self._last_renew = float("-inf")  # time.monotonic() of our last successful write
        self._transitions = 0
        self._holder: str | None = None
        self._lease_transitions: int | None = None
        self._last_error: str | None = None
        self._failures = 0  # of the current streak
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
        with self._state:
            fresh = time.monotonic() - self._last_renew < self.renew_deadline
            return self._leader and fresh

    @property
    def thread(self) -> threading.Thread | None:
        """The campaign thread of the current or last `run()`."""
        return self._thread

    def detail(self) -> dict[str, object]:
        """For /readyz and logs: who we are, whether we lead, the Lease as last seen."""
        leading = self.is_leader
        with self._state:
            return {
                "identity": self.identity,
                "leading": leading,
                "lease_name": self.name,
                "lease_namespace": self.namespace,
                "holder": self._holder,
                "transitions": self._transitions,
                "lease_transitions": self._lease_transitions,
                "last_error": self._last_error,
                "campaigning": self._thread is not None and self._thread.is_alive(),
            }

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
        lock: _Lock | None = None
        try:
            while not self._stop.is_set():
                lock = _Lock(self)
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
                except _Stopped:
                    break
                except Exception as exc:  # a library failure: note it, back off, retry
                    self._call_failed("campaign", exc)
                finally:
                    ended.set()
                    self._set_leader(False, None)
                self._stop.wait(self.retry_period)
        finally:
            self._set_leader(False, None)
            if lock is not None:
                self._release(lock)
            finished()

    def _release(self, lock: _Lock) -> None:
        """On a stop, give the Lease up if we hold it (client-go's ReleaseOnCancel), so
        another replica takes over at its next retry rather than after lease_duration."""
        with self._state:
            recent = time.monotonic() - self._last_renew < self.lease_duration
        if not recent:
            return
        try:
            lease = self._api.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=self._request_timeout
            )
            spec = lease.spec
            if spec is None or spec.holder_identity != self.identity:
                return
            now = datetime.datetime.now(datetime.UTC)
            spec.holder_identity = None
            spec.lease_duration_seconds = 1
            spec.acquire_time = spec.renew_time = now
            self._api.replace_namespaced_lease(
                self.name, self.namespace, lease, _request_timeout=self._request_timeout
            )
        except Exception as exc:  # it runs out by itself
            log.info(
                "could not release the lease %s/%s: %s", self.namespace, self.name, _describe(exc)
            )
            return
        with self._state:
            self._last_renew = float("-inf")
        log.info("released the lease %s/%s", self.namespace, self.name)

    # --- reports from the campaign thread ---

    def _check_running(self) -> None:
        if self._stop.is_set():
            raise _Stopped

    def _set_leader(self, leading: bool, ended: threading.Event | None) -> None:
        with self._state:
            if leading and (ended is None or ended.is_set() or self._stop.is_set()):
                return  # a late "started" of a round that is already over
            if leading == self._leader:
                return
            self._leader = leading
            self._transitions += 1
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
        with self._state:
            if leading != self._leader:
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

    def _renewed(self, lease_transitions: int) -> None:
        with self._state:
            self._last_renew = time.monotonic()
            self._holder = self.identity
            self._lease_transitions = lease_transitions

    def _observed(self, holder: str | None, lease_transitions: int | None) -> None:
        with self._state:
            self._holder = holder
            self._lease_transitions = lease_transitions

    def _call_failed(self, what: str, error: object) -> None:
        message = f"{what} lease {self.namespace}/{self.name}: {_describe(error)}"
        with self._state:
            self._failures += 1
            first = self._failures == 1
            self._last_error = message
        if first:
            log.warning("leader election: %s (retrying every %ss)", message, self.retry_period)

    def _call_worked(self) -> None:
        with self._state:
            failures, self._failures = self._failures, 0
        if failures:
            log.info("leader election: lease calls work again after %d failures", failures)
