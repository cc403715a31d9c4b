"""The Lease calls of a leader election: `kubernetes.leaderelection`'s LeaseLock, made fit
for a long-running service.

Where the library's own lock falls short, this one:
* talks through the given `ApiClient`, not one built from the process-wide default
  configuration, and bounds every call with a request timeout;
* answers a transport error (refused connection, timeout) as a failed call, so the library
  retries it every `retry_period` instead of ending its thread (it expects `ApiException`);
* raises `Stopped` on its next call once the elector is stopping, which ends the library's
  otherwise endless loops;
* keeps client-go's `leaseTransitions` bookkeeping, and reports every call to `ElectionState`.
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable
from typing import Any

import kubernetes.client
from kubernetes.client.exceptions import ApiException
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from extender.cluster.leader.state import ElectionState, describe_failure

log = logging.getLogger("decice.leader")

# The `kubernetes` package leaves these unannotated.
_lease_spec: Callable[..., Any] = LeaseLock.get_lease_spec
_lock_record: Callable[..., Any] = LeaseLock.get_lock_object


class Stopped(Exception):
    """Raised by the lock once the elector is stopping: ends the library's loops."""


def _status(error: object) -> int | None:
    status = getattr(error, "status", None)
    return status if isinstance(status, int) else None


class Lock(LeaseLock):
    """The library's LeaseLock with our client, bounded calls and the stop flag."""

    def __init__(
        self,
        api: kubernetes.client.CoordinationV1Api,
        state: ElectionState,
        stop: threading.Event,
        request_timeout: float,
    ) -> None:
        # Not LeaseLock.__init__: it builds a CoordinationV1Api from the process-wide
        # default configuration.
        self.name = state.name
        self.namespace = state.namespace
        self.identity = state.identity
        self.lease_reference: Any = None
        self.api_instance = api
        self._state = state
        self._stop = stop
        self._timeout = request_timeout

    def _check_running(self) -> None:
        if self._stop.is_set():
            raise Stopped

    def get(self, name: str, namespace: str) -> tuple[bool, Any]:
        self._check_running()
        try:
            lease = self.api_instance.read_namespaced_lease(
                name, namespace, _request_timeout=self._timeout
            )
        except ApiException as exc:
            if exc.status == 404:
                self._state.call_worked()
            else:
                self._state.call_failed("read", exc)
            return False, exc
        except Exception as exc:  # transport: the library takes any non-404 as "retry"
            self._state.call_failed("read", exc)
            return False, exc
        self._state.call_worked()
        self.lease_reference = lease
        spec = lease.spec
        self._state.observed(
            getattr(spec, "holder_identity", None), getattr(spec, "lease_transitions", None)
        )
        return True, _lock_record(self, lease)

    def create(self, name: str, namespace: str, election_record: Any) -> bool:
        self._check_running()
        spec = _lease_spec(self, election_record)
        spec.lease_transitions = 0
        body = kubernetes.client.V1Lease(
            metadata=kubernetes.client.V1ObjectMeta(name=name, namespace=namespace), spec=spec
        )
        try:
            self.lease_reference = self.api_instance.create_namespaced_lease(
                namespace, body, _request_timeout=self._timeout
            )
        except Exception as exc:
            if _status(exc) == 409:  # another replica created it first: not a failure
                self._state.call_worked()
            else:
                self._state.call_failed("create", exc)
            return False
        self._state.call_worked()
        self._state.renewed(0)
        return True

    def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        self._check_running()
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
                _request_timeout=self._timeout,
            )
        except Exception as exc:
            if _status(exc) == 409:  # written by another replica since our read
                self._state.call_worked()
            else:
                self._state.call_failed("update", exc)
            return False
        self._state.call_worked()
        self._state.renewed(transitions)
        return True

    def release(self) -> None:
        """Give the Lease up if we hold it: no holder, a 1 s duration."""
        try:
            lease = self.api_instance.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=self._timeout
            )
            spec = lease.spec
            if spec is None or spec.holder_identity != self.identity:
                return
            now = datetime.datetime.now(datetime.UTC)
            spec.holder_identity = None
            spec.lease_duration_seconds = 1
            spec.acquire_time = spec.renew_time = now
            self.api_instance.replace_namespaced_lease(
                self.name, self.namespace, lease, _request_timeout=self._timeout
            )
        except Exception as exc:  # it runs out by itself
            log.info(
                "could not release the lease %s/%s: %s",
                self.namespace,
                self.name,
                describe_failure(exc),
            )
            return
        self._state.released()
        log.info("released the lease %s/%s", self.namespace, self.name)
