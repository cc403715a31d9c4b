"""This replica's state in a leader election: a thread-safe record the campaign thread
writes and any thread reads.

It holds what client-go's elector keeps: whether we lead, when we last renewed the Lease,
who holds it as last seen, and the current streak of failed Lease calls (logged once at
WARNING, its end at INFO).
"""

from __future__ import annotations

import logging
import threading
import time

from kubernetes.client.exceptions import ApiException

log = logging.getLogger("decice.leader")


def describe_failure(error: object) -> str:
    if isinstance(error, ApiException):
        return f"{error.status} {error.reason}".strip()
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class ElectionState:
    """This replica's state in the election of the Lease `namespace/name`."""

    def __init__(self, name: str, namespace: str, identity: str, retry_period: int) -> None:
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self._retry_period = retry_period
        self._lock = threading.Lock()
        self._leader = False
        self._last_renew = float("-inf")  # time.monotonic() of our last successful write
        self._transitions = 0
        self._holder: str | None = None
        self._lease_transitions: int | None = None
        self._last_error: str | None = None
        self._failures = 0  # of the current streak

    @property
    def leader(self) -> bool:
        """As the library last reported it (see LeaderElector.is_leader for acting on it)."""
        with self._lock:
            return self._leader

    def leads_within(self, deadline: float) -> bool:
        """Leading, and renewed within the last `deadline` seconds."""
        with self._lock:
            return self._leader and time.monotonic() - self._last_renew < deadline

    def renewed_within(self, seconds: float) -> bool:
        with self._lock:
            return time.monotonic() - self._last_renew < seconds

    def set_leader(self, leading: bool) -> bool:
        """Record a report of the library; True when it changes whether we lead."""
        with self._lock:
            if leading == self._leader:
                return False
            self._leader = leading
            self._transitions += 1
        return True

    def renewed(self, lease_transitions: int) -> None:
        with self._lock:
            self._last_renew = time.monotonic()
            self._holder = self.identity
            self._lease_transitions = lease_transitions

    def released(self) -> None:
        with self._lock:
            self._last_renew = float("-inf")

    def observed(self, holder: str | None, lease_transitions: int | None) -> None:
        with self._lock:
            self._holder = holder
            self._lease_transitions = lease_transitions

    def call_failed(self, what: str, error: object) -> None:
        message = f"{what} lease {self.namespace}/{self.name}: {describe_failure(error)}"
        with self._lock:
            self._failures += 1
            first = self._failures == 1
            self._last_error = message
        if first:
            log.warning("leader election: %s (retrying every %ss)", message, self._retry_period)

    def call_worked(self) -> None:
        with self._lock:
            failures, self._failures = self._failures, 0
        if failures:
            log.info("leader election: lease calls work again after %d failures", failures)

    def detail(self, leading: bool, campaigning: bool) -> dict[str, object]:
        """For /readyz and logs: who we are, whether we lead, the Lease as last seen."""
        with self._lock:
            return {
                "identity": self.identity,
                "leading": leading,
                "lease_name": self.name,
                "lease_namespace": self.namespace,
                "holder": self._holder,
                "transitions": self._transitions,
                "lease_transitions": self._lease_transitions,
                "last_error": self._last_error,
                "campaigning": campaigning,
            }
