"""What triggers a policy reload: SIGHUP, or a change in the file's directory (kubelet
swaps a ConfigMap volume's `..data` symlink; the file's own inode never changes)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable, Coroutine
from pathlib import Path

from watchfiles import Change, awatch

from extender.errors.backoff import Backoff
from extender.errors.causes import describe

log = logging.getLogger("decice.reload")

DEBOUNCE_MS = 300
"""Changes within this long are one batch: a ConfigMap update is several renames."""
_WAKE_MS = 1000  # the watcher thread returns this often, to notice a removed directory
_RETRY = Backoff(base=1.0, cap=30.0)  # a broken watch's retry waits (seconds)

Reload = Callable[[str], Coroutine[object, object, bool]]
"""Reloads the file, giving the reason (extender.policy.reload.PolicyReloader.reload)."""


class ReloadTriggers:
    """Calls `reload(reason)` after changes in `path`'s directory (`watch`) and on SIGHUP
    (`install_sighup`)."""

    def __init__(self, path: Path, reload: Reload) -> None:
        self.path = path
        self._reload = reload
        self._tasks: set[asyncio.Task[bool]] = set()
        self._sighup_loop: asyncio.AbstractEventLoop | None = None
        self.watching = asyncio.Event()
        """Set while the directory watch is established (and caught up with the file)."""

    async def watch(
        self, *, debounce_ms: int = DEBOUNCE_MS, force_polling: bool | None = None
    ) -> None:
        """Reload after changes in the file's directory until cancelled; a broken watch is
        retried, backed off."""
        failures = 0
        while True:
            stop = asyncio.Event()
            task = asyncio.create_task(self._watch_directory(stop, debounce_ms, force_polling))
            try:
                # wait(), not `await task`: cancelling us must not cancel the task before
                # `stop` is set (its thread would keep us waiting up to _WAKE_MS).
                await asyncio.wait([task])
            except asyncio.CancelledError:
                stop.set()
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                self.watching.clear()
                raise
            if self.watching.is_set():
                failures = 0  # it had been working: start the back-off afresh
            self.watching.clear()
            error = None if task.cancelled() else task.exception()
            cause = describe(error) if error is not None else "the watch ended"
            failures += 1
            delay = _RETRY.wait(failures)
            log.warning(
                "cannot watch %s for policy changes (%s); retrying in %.1fs (SIGHUP reloads)",
                self.path.parent,
                cause,
                delay,
            )
            await asyncio.sleep(delay)

    async def _watch_directory(
        self, stop: asyncio.Event, debounce_ms: int, force_polling: bool | None
    ) -> None:
        directory = self.path.absolute().parent  # the watcher reports absolute paths
        identity = _identity(directory)
        async for changes in awatch(
            directory,
            watch_filter=self._concerns_policy,
            debounce=debounce_ms,
            step=50,
            stop_event=stop,
            rust_timeout=_WAKE_MS,
            yield_on_timeout=True,
            force_polling=force_polling,
            recursive=False,  # the swap is a rename in this directory itself
        ):
            # A removed directory yields nothing ever again: check it on every wake-up.
            gone = any(c == Change.deleted and Path(p) == directory for c, p in changes)
            if gone or _identity(directory) != identity:
                raise FileNotFoundError(f"{directory} was removed or replaced")
            if not self.watching.is_set():
                # The first wake-up: the watch is up; catch a change made before it was.
                await self._reload("watch started")
                self.watching.set()
            elif changes:
                await self._reload("file changed")

    def _concerns_policy(self, change: Change, path: str) -> bool:
        """Changes that may touch the policy: the file, kubelet's `..` entries, the directory."""
        name = Path(path).name
        return (
            name == self.path.name
            or name.startswith("..")
            or path == str(self.path.absolute().parent)
        )

    def install_sighup(self, loop: asyncio.AbstractEventLoop | None = None) -> bool:
        """Reload on SIGHUP; False where signal handlers cannot be set (not the main thread)."""
        loop = loop or asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGHUP, self._on_sighup)
        except (AttributeError, NotImplementedError, RuntimeError, ValueError) as exc:
            log.debug("no SIGHUP reload: %s", describe(exc))
            return False
        self._sighup_loop = loop
        return True

    def remove_sighup(self) -> None:
        """Undo install_sighup (SIGHUP gets its default action again)."""
        loop, self._sighup_loop = self._sighup_loop, None
        if loop is not None and not loop.is_closed():
            loop.remove_signal_handler(signal.SIGHUP)

    def _on_sighup(self) -> None:
        assert self._sighup_loop is not None
        task = self._sighup_loop.create_task(self._reload("SIGHUP"))
        self._tasks.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._tasks.discard)


def _identity(directory: Path) -> tuple[int, int]:
    st = os.stat(directory)
    return st.st_dev, st.st_ino
