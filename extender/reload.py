"""Live reload of the policy file, on a change of the file or on SIGHUP.

Kubernetes mounts a ConfigMap as a directory of symlinks:

    policy.yaml -> ..data/policy.yaml
    ..data -> ..2026_11_24_00_00_00.1
    ..2026_11_24_00_00_00.1/policy.yaml

and kubelet's atomic writer updates it by writing a new `..<timestamp>` directory, pointing
a temporary symlink at it and renaming that onto `..data` (one atomic rename), then removing
the old directory. `policy.yaml` itself is never written: a watch on the file (its inode)
sees nothing. So the file's directory is watched, and after any batch of changes there the
file is read again; the sha256 of its bytes turns the several events of one update, and
events of unrelated files, into one read and no reload.

A reload validates the whole file before anything changes. A bad file keeps the policy in
force: an ERROR names every problem, /readyz (`detail`) and /metrics
(`decice_config_last_reload_successful` 0) show it, and the service stays ready. Only
`policies`, `metrics`, `defaultPolicy` and `herdGuard` take effect on reload; a change of
any other section is logged as needing a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError
from watchfiles import Change, awatch

from extender.causes import describe
from extender.config import ConfigError, Settings, describe_errors, parse_text
from extender.telemetry import ConfigFigures, Telemetry

log = logging.getLogger("decice.reload")

Apply = Callable[[Settings], Awaitable[None]]
"""Builds the new tables from Settings and swaps them in between requests."""

RELOADABLE = frozenset({"policies", "metrics", "defaultPolicy", "herdGuard"})
"""The sections (YAML keys) a reload applies; the others are read at start only."""

DEBOUNCE_MS = 300
"""Changes within this long are one batch: a ConfigMap update is several renames."""
_WAKE_MS = 1000  # the watcher thread returns this often, to notice a removed directory
_RETRY_FIRST = 1.0
_RETRY_MAX = 30.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """The last reload attempt (the start counts as a successful one)."""

    at: float
    successful: bool
    reason: str
    error: str | None = None
    problems: tuple[str, ...] = ()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_policy(path: Path, environ: Mapping[str, str]) -> tuple[Settings, str]:
    """The file's Settings and the sha256 of the very bytes they came from (one read, so
    a PolicyReloader started from them never misses a change made in between)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError([describe(exc)], str(path)) from exc
    return _parse(data, environ, str(path)), sha256_hex(data)


def restart_sections(running: Settings, new: Settings) -> list[str]:
    """YAML keys of the sections that differ between the two but only apply at start."""
    return [
        field.alias or name
        for name, field in Settings.model_fields.items()
        if (field.alias or name) not in RELOADABLE and getattr(running, name) != getattr(new, name)
    ]


def effective(running: Settings, new: Settings) -> Settings:
    """What a reload puts in force: the new file's RELOADABLE sections on top of the
    running service's other sections (those were read at start: listeners, clients and
    their tasks are built from them). Validated again as a whole: ConfigError when the
    mix does not hold (a static provider whose values lack a new metric, say)."""
    fields = {
        name: getattr(new if (field.alias or name) in RELOADABLE else running, name)
        for name, field in Settings.model_fields.items()
    }
    try:
        return Settings(**fields)
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc), "reloaded policy") from None


def _parse(data: bytes, environ: Mapping[str, str], source: str) -> Settings:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [f"$: not UTF-8 text ({exc.reason} at byte {exc.start})"], source
        ) from exc
    return parse_text(text, environ, source)


class PolicyReloader:
    """Reloads the policy file into the service through `apply`, one reload at a time.

    `settings` and `sha256` are what the service started with (see `read_policy`);
    `environ` holds the overrides used at start (PROMETHEUS_URL, KUBECONFIG), applied on
    every reload too. `apply` receives the whole new Settings; only the RELOADABLE sections
    are meant to change (the others are compared with the start's and logged).
    """

    def __init__(
        self,
        path: Path | str,
        environ: Mapping[str, str],
        settings: Settings,
        sha256: str,
        apply: Apply,
        telemetry: Telemetry,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self._environ = dict(environ)  # a copy: a reload sees the start's overrides
        self._started = settings  # its non-reloadable sections stay in force until a restart
        self._settings = settings
        self._sha256 = sha256
        self._apply = apply
        self._clock = clock
        self._loaded_at = clock()
        self._last = Outcome(at=self._loaded_at, successful=True, reason="start")
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[bool]] = set()
        self._sighup_loop: asyncio.AbstractEventLoop | None = None
        self.watching = asyncio.Event()
        """Set while the directory watch is established (and caught up with the file)."""
        telemetry.watch_config(self._figures)

    @property
    def settings(self) -> Settings:
        """The Settings last applied."""
        return self._settings

    @property
    def sha256(self) -> str:
        """sha256 (hex) of the file bytes the policy in force came from."""
        return self._sha256

    @property
    def last(self) -> Outcome:
        return self._last

    # -- reload ------------------------------------------------------------------------------

    async def reload(self, reason: str) -> bool:
        """Read, validate and apply the file if its bytes changed. True when the policy in
        force is the file's (changed or not); False when the old one was kept."""
        async with self._lock:  # two triggers never interleave; the second sees the first's hash
            return await self._reload(reason)

    async def _reload(self, reason: str) -> bool:
        source = str(self.path)
        try:
            data = await asyncio.to_thread(self.path.read_bytes)
        except OSError as exc:
            return self._failed(reason, "cannot read the file", [describe(exc)])
        sha = sha256_hex(data)
        if sha == self._sha256:
            if not self._last.successful:
                # The bad file was put back as it was: the file is the policy in force
                # again, and the failure no longer stands (the alert clears).
                self._last = Outcome(at=self._clock(), successful=True, reason=reason)
                log.info(
                    "policy file back to the policy in force (%s): sha256 %s", reason, sha[:12]
                )
            else:
                log.debug("policy unchanged (%s): sha256 %s", reason, sha[:12])
            return True
        try:
            # Off the event loop: a large file's validation must not delay requests.
            new = await asyncio.to_thread(_parse, data, self._environ, source)
        except ConfigError as exc:
            return self._failed(reason, "invalid policy", exc.problems)
        restart = restart_sections(self._started, new)
        if restart:
            log.warning(
                "policy file %s: changed but need a restart: %s (the rest is applied)",
                source,
                ", ".join(restart),
            )
        try:
            await self._apply(new)
        except Exception as exc:
            return self._failed(reason, "applying the policy failed", [describe(exc)])
        now = self._clock()
        self._settings, self._sha256, self._loaded_at = new, sha, now
        self._last = Outcome(at=now, successful=True, reason=reason)
        log.info(
            "policy reloaded (%s): sha256 %s, policies %s (default %s)",
            reason,
            sha[:12],
            ", ".join(new.policy_map),
            new.default.name,
        )
        return True

    def _failed(self, reason: str, error: str, problems: list[str]) -> bool:
        lines = tuple(" ".join(p.split()) for p in problems)  # YAML errors span lines
        self._last = Outcome(self._clock(), False, reason, error, lines)
        log.error(
            "policy reload (%s) of %s failed, keeping sha256 %s: %s: %s",
            reason,
            self.path,
            self._sha256[:12],
            error,
            "; ".join(lines),
        )
        return False

    # -- status --------------------------------------------------------------------------------

    def detail(self) -> dict[str, object]:
        """For /readyz: the policy in force and the last attempt (a failure is not unready)."""
        last = self._last
        return {
            "path": str(self.path),
            "sha256": self._sha256,
            "loadedAt": self._loaded_at,
            "watching": self.watching.is_set(),
            "lastReload": {
                "at": last.at,
                "successful": last.successful,
                "reason": last.reason,
                "error": last.error,
                "problems": list(last.problems),
            },
        }

    def _figures(self) -> ConfigFigures:
        return self._last.successful, self._loaded_at, self._sha256

    # -- triggers: the directory watch ---------------------------------------------------------

    async def watch(
        self, *, debounce_ms: int = DEBOUNCE_MS, force_polling: bool | None = None
    ) -> None:
        """Reload after changes in the file's directory, until cancelled. A watch that
        cannot start or breaks is retried (1 s doubling to 30 s); it never raises.
        force_polling None: inotify & co, unless WATCHFILES_FORCE_POLLING is set."""
        delay = _RETRY_FIRST
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
                delay = _RETRY_FIRST  # it had been working: start the back-off afresh
            self.watching.clear()
            error = None if task.cancelled() else task.exception()
            cause = describe(error) if error is not None else "the watch ended"
            log.warning(
                "cannot watch %s for policy changes (%s); retrying in %gs (SIGHUP reloads)",
                self.path.parent,
                cause,
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX)

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
                await self.reload("watch started")
                self.watching.set()
            elif changes:
                await self.reload("file changed")

    def _concerns_policy(self, change: Change, path: str) -> bool:
        """The changes that may touch the policy: the file itself (an edit, an editor's
        rename onto it), kubelet's `..data` and `..<timestamp>` entries, and the directory.
        Anything else in the directory (a log written beside the file) is not read for."""
        name = Path(path).name
        return (
            name == self.path.name
            or name.startswith("..")
            or path == str(self.path.absolute().parent)
        )

    # -- triggers: SIGHUP ----------------------------------------------------------------------

    def install_sighup(self, loop: asyncio.AbstractEventLoop | None = None) -> bool:
        """Reload on SIGHUP (from the running loop by default). False where the platform or
        thread cannot take signal handlers (Windows, not the main thread)."""
        hup = getattr(signal, "SIGHUP", None)
        if hup is None:
            return False
        loop = loop or asyncio.get_running_loop()
        try:
            loop.add_signal_handler(hup, self._on_sighup)
        except (NotImplementedError, RuntimeError, ValueError) as exc:
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
        task = self._sighup_loop.create_task(self.reload("SIGHUP"))
        self._tasks.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._tasks.discard)


def _identity(directory: Path) -> tuple[int, int]:
    st = os.stat(directory)
    return st.st_dev, st.st_ino
