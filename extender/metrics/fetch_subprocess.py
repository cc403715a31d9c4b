"""Node metrics fetched and decoded in a subprocess, for answers too big to decode beside
the verbs (orjson holds the GIL while it decodes megabytes). A `spawn`ed pool of one
(`fork` would copy threads mid-flight) runs the in-process code; one that dies fails its
one refresh, one whose parent is gone exits. `spawn` re-imports the main module: a script
that builds a PrometheusProvider must guard its entry point.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

from extender.decisions.model import NodeInventory, NodeName
from extender.errors.causes import BadAnswer, PartialAnswer
from extender.policy.backend import PrometheusSettings

log = logging.getLogger("decice.metrics")

PARENT_CHECK_SECONDS = 1.0  # how often the subprocess looks for its parent
GRACE_SECONDS = 10.0  # waited beyond the query's timeout before it is taken for stuck


def in_subprocess(last_series: int | None, above: int | None) -> bool:
    """The next fetch goes to the subprocess: its last answer held more than `above`
    series (prometheus.childProcessAbove; None: never, 0: always)."""
    return above == 0 or (above is not None and last_series is not None and last_series > above)


@dataclass(frozen=True, slots=True)
class Fetched:
    """What the subprocess sends back for one query: the mapped values, or the error."""

    values: dict[NodeName, float] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    series: int = 0
    error: str | None = None  # errors.causes.describe's, when the fetch failed
    partial: bool = False  # the error was a partial answer


Work = Callable[[PrometheusSettings, str, NodeInventory], Fetched]
"""A module-level function (pickled by name): metrics.providers.fetch_in_subprocess."""


def _start_subprocess(parent: int) -> None:
    # ProcessPoolExecutor's child blocks on a queue whose write end it also holds, so it
    # would outlive a SIGKILLed service: a thread watches the parent instead.
    def exit_with_parent() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(0)

    threading.Thread(target=exit_with_parent, daemon=True).start()


class FetchSubprocess:
    """The subprocess of a PrometheusProvider, started at first use and after it died."""

    def __init__(self, settings: PrometheusSettings, work: Work) -> None:
        self._settings = settings
        self._work = work
        self._pool: ProcessPoolExecutor | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()

    def fetch(self, query: str, inventory: NodeInventory) -> Fetched:
        """Blocking: one query in the subprocess, raising as in process; a dead or hung one
        raises BadAnswer and is replaced at the next call."""
        # Only `instance` labels are mapped through the addresses.
        needed = inventory if self._settings.node_label == "instance" else NodeInventory()
        pool = self._running()
        try:
            if self._pid is None:  # started: ask it who it is (to kill it when it hangs)
                self._pid = pool.submit(os.getpid).result(timeout=GRACE_SECONDS)
            future: Future[Fetched] = pool.submit(self._work, self._settings, query, needed)
            fetched = future.result(timeout=self._settings.timeout + GRACE_SECONDS)
        except BrokenProcessPool as exc:
            self._discard(pool)
            raise BadAnswer(f"the metrics fetch process exited ({exc}); restarting it") from exc
        except FutureTimeout as exc:
            self._discard(pool, kill=True)
            raise BadAnswer(
                f"the metrics fetch process gave no answer in "
                f"{self._settings.timeout + GRACE_SECONDS:g}s; restarting it"
            ) from exc
        if fetched.error is not None:
            if fetched.partial:
                raise PartialAnswer(fetched.error, [])
            raise BadAnswer(fetched.error)
        return fetched

    def pids(self) -> list[int]:
        return [self._pid] if self._pool is not None and self._pid is not None else []

    def close(self) -> None:
        with self._lock:
            pool, self._pool, self._pid = self._pool, None, None
        if pool is not None:  # a fetch still running ends with its timeout; exit joins it
            pool.shutdown(wait=False, cancel_futures=True)

    def _running(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start_subprocess,
                    initargs=(os.getpid(),),
                )
            return self._pool

    def _discard(self, pool: ProcessPoolExecutor, kill: bool = False) -> None:
        with self._lock:
            pid = self._pid
            if self._pool is pool:
                self._pool, self._pid = None, None
        if kill and pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        pool.shutdown(wait=False, cancel_futures=True)
        log.warning("the metrics fetch process is gone; the next refresh starts a new one")
