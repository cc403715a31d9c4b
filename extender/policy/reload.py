"""Live reload of the policy file: read, validate whole, apply; a bad file keeps the policy
in force (logged, shown in /readyz and /metrics; still ready). Only RELOADABLE sections
take effect; a change of another is logged as needing a restart."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import ValidationError

from extender.errors.causes import describe
from extender.policy.fields import ConfigError
from extender.policy.filewatch import ReloadTriggers
from extender.policy.loading import describe_errors, parse_text
from extender.policy.settings import Settings

log = logging.getLogger("decice.reload")

Apply = Callable[[Settings], Awaitable[None]]
"""Builds the new tables from Settings and swaps them in between requests."""

RELOADABLE = frozenset({"policies", "metrics", "defaultPolicy", "herdGuard"})
"""The sections (YAML keys) a reload applies; the others are read at start only."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The last reload attempt (the start counts as a successful one)."""

    at: float
    successful: bool
    reason: str
    error: str | None = None
    problems: tuple[str, ...] = ()


def restart_sections(running: Settings, new: Settings) -> list[str]:
    """YAML keys of the sections that differ between the two but only apply at start."""
    return [
        field.alias or name
        for name, field in Settings.model_fields.items()
        if (field.alias or name) not in RELOADABLE and getattr(running, name) != getattr(new, name)
    ]


def effective(running: Settings, new: Settings) -> Settings:
    """The new file's RELOADABLE sections over the running service's others, validated."""
    fields = {
        name: getattr(new if (field.alias or name) in RELOADABLE else running, name)
        for name, field in Settings.model_fields.items()
    }
    try:
        return Settings(**fields)
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc), "reloaded policy") from None


class PolicyReloader:
    """Reloads the policy file into the service through `apply`, one reload at a time."""

    def __init__(
        self,
        path: Path | str,
        environ: Mapping[str, str],
        settings: Settings,
        sha256: str,
        apply: Apply,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self._environ = dict(environ)  # a copy: a reload sees the start's overrides
        self._started = settings  # its non-reloadable sections stay in force until a restart
        self.settings = settings
        self.sha256 = sha256
        self._apply = apply
        self._clock = clock
        self._loaded_at = clock()
        self.last = Outcome(at=self._loaded_at, successful=True, reason="start")
        self._lock = asyncio.Lock()
        self.triggers = ReloadTriggers(self.path, self.reload)
        """The directory watch and SIGHUP, which call `reload`."""

    async def reload(self, reason: str) -> bool:
        """Apply the file if its bytes changed; False when the old policy was kept."""
        async with self._lock:  # two triggers never interleave; the second sees the first's hash
            return await self._reload(reason)

    async def _reload(self, reason: str) -> bool:
        source = str(self.path)
        try:
            data = await asyncio.to_thread(self.path.read_bytes)
        except OSError as exc:
            return self._failed(reason, "cannot read the file", [describe(exc)])
        sha = hashlib.sha256(data).hexdigest()
        if sha == self.sha256:
            if not self.last.successful:
                # The bad file was put back as it was: the file is the policy in force
                # again, and the failure no longer stands (the alert clears).
                self.last = Outcome(at=self._clock(), successful=True, reason=reason)
                log.info(
                    "policy file back to the policy in force (%s): sha256 %s", reason, sha[:12]
                )
            else:
                log.debug("policy unchanged (%s): sha256 %s", reason, sha[:12])
            return True
        try:
            # Off the event loop: a large file's validation must not delay requests.
            new = await asyncio.to_thread(parse_text, data, self._environ, source)
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
        self.settings, self.sha256, self._loaded_at = new, sha, now
        self.last = Outcome(at=now, successful=True, reason=reason)
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
        self.last = Outcome(self._clock(), False, reason, error, lines)
        log.error(
            "policy reload (%s) of %s failed, keeping sha256 %s: %s: %s",
            reason,
            self.path,
            self.sha256[:12],
            error,
            "; ".join(lines),
        )
        return False

    def detail(self) -> dict[str, object]:
        """For /readyz: the policy in force and the last attempt (a failure is not unready)."""
        return {
            "path": str(self.path),
            "sha256": self.sha256,
            "loadedAt": self._loaded_at,
            "watching": self.triggers.watching.is_set(),
            "lastReload": {**asdict(self.last), "problems": list(self.last.problems)},
        }

    def figures(self) -> tuple[bool, float, str]:
        """For /metrics: (last reload successful, loaded at, sha256)."""
        return self.last.successful, self._loaded_at, self.sha256
