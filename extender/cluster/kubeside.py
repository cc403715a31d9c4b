"""The Kubernetes side of binds and Events in a process of its own, so their HTTP work
(TLS, aiohttp, JSON) does not run on the interpreter that answers filter and prioritize.

`KubeSide` is what the binder and the Event poster call in place of the client
(`bind`, `get_pod`, `create_event`); each call is a frame to the child
(cluster.kubewire) and its answer, matched by id, so binds run concurrently as before.
What a bind means stays here, in the verbs' process (cluster.binder: the guard, the UID
precondition, the reservation taken at once and released only on a definite 4xx, 409
read as already bound). `run()` is the child's supervisor:

- it starts `python -m extender.cli.kubeworker` (the same interpreter, the policy's
  kubeconfig, bind timeout and retries) and reads its answers;
- when the child exits, every call in flight fails with a `KubeUnavailable` that says
  the outcome is unknown (no status: the binder keeps the reservation, the scheduler
  retries the bind, and a retry of a bind that went through reads as already bound);
- while it is down, `unavailable()` says why, and the binder refuses binds with that
  message before reserving anything; filter and prioritize never touch it;
- it starts the child again after a back-off (errors.backoff), for as long as it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from extender.cluster.client.errors import KubeUnavailable
from extender.cluster.kubewire import HEADER, error_of, frame, length, message
from extender.decisions.model import PodEvent
from extender.decisions.pods import PodFacts
from extender.errors.backoff import Backoff

log = logging.getLogger("decice.kubeside")

MIN_RESTART = 0.2
LOST_GRACE = 2.0
"""Seconds a child whose stdout ended gets to exit before it is killed."""
MAX_RESTART = 10.0
STOP_GRACE = 5.0
DOWN = (
    "the extender's Kubernetes-side process is down ({why}); it is being restarted: "
    "this bind was not made, the scheduler retries it"
)

Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]


def worker_argv(kubeconfig: str | None, timeout: float, retries: int) -> list[str]:
    argv = [sys.executable, "-m", "extender.cli.kubeworker"]
    if kubeconfig:
        argv += ["--kubeconfig", kubeconfig]
    return [*argv, "--timeout", f"{timeout:g}", "--retries", str(retries)]


class KubeSide:
    def __init__(
        self,
        argv: Sequence[str],
        *,
        spawn: Spawn = asyncio.create_subprocess_exec,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """`rng`: the restarts' back-off's random source; `sleep`: its wait (tests)."""
        self._argv = list(argv)
        self._spawn = spawn
        self._sleep = sleep
        self._backoff = Backoff(base=MIN_RESTART, cap=MAX_RESTART, rng=rng or random.Random())
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next = 0
        self._why = "not started yet"
        self.starts = 0
        """Children started so far (1 + restarts)."""
        self.up = asyncio.Event()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def unavailable(self) -> str | None:
        """Why no call can be made now (None: the child is up)."""
        return None if self.up.is_set() else DOWN.format(why=self._why)

    # -- the calls --

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        return str(await self._call("bind", [namespace, name, uid, node]))

    async def get_pod(self, namespace: str, name: str) -> PodFacts:
        fields = await self._call("get_pod", [namespace, name])
        return PodFacts(**fields)

    async def create_event(self, event: PodEvent) -> None:
        await self._call("event", [dataclasses.asdict(event)])

    async def _call(self, op: str, args: list[Any]) -> Any:
        proc = self._proc
        if proc is None or proc.stdin is None or not self.up.is_set():
            raise KubeUnavailable(DOWN.format(why=self._why), reason="KubeSideDown")
        self._next += 1
        ident = self._next
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        try:
            proc.stdin.write(frame({"id": ident, "op": op, "args": args}))
            return await future
        finally:
            self._pending.pop(ident, None)

    # -- the supervisor --

    async def run(self) -> None:
        """Start the child, read its answers, start it again when it exits; forever."""
        failures = 0
        while True:
            try:
                proc = await self._spawn(
                    *self._argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
                )
            except Exception as exc:
                self._why = f"it could not be started: {exc}"
                log.error("Kubernetes-side process: %s", self._why)
            else:
                self._proc = proc
                self.starts += 1
                self.up.set()
                log.info("Kubernetes-side process started (pid %s)", proc.pid)
                began = asyncio.get_running_loop().time()
                try:
                    await self._read(proc)
                except asyncio.CancelledError:  # the service stops: let the child finish
                    self.up.clear()
                    await self._stop(proc)
                    raise
                finally:
                    await self._lost(proc)
                if asyncio.get_running_loop().time() - began > MAX_RESTART:
                    failures = 0  # it ran a while: a fresh failure, not a crash loop
            failures += 1
            await self._sleep(self._backoff.wait(failures))

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while True:
            try:
                header = await proc.stdout.readexactly(HEADER)
                body = await proc.stdout.readexactly(length(header))
                answer = message(body)
            except asyncio.IncompleteReadError:
                return
            except Exception as exc:  # a frame we cannot read: the child is not ours to trust
                log.error("Kubernetes-side process: %s; stopping it", exc)
                return
            future = self._pending.get(answer["id"])
            if future is None or future.done():
                continue
            if "err" in answer:
                future.set_exception(error_of(answer["err"]))
            else:
                future.set_result(answer.get("ok"))

    async def _lost(self, proc: asyncio.subprocess.Process) -> None:
        stopping = not self.up.is_set() and proc.returncode is not None
        self.up.clear()
        self._proc = None
        # Its stdout ended, so it is exiting or dead: let asyncio's child watcher read its
        # status first. kill() polls the child itself (subprocess.Popen.send_signal) and, on
        # a zombie, reaps it before the watcher can, which then reports 255, not the code.
        try:
            code = await asyncio.wait_for(proc.wait(), LOST_GRACE)
        except TimeoutError:  # a frame we could not read, from a child still running
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            code = await proc.wait()
        self._why = f"it exited with code {code}"
        if stopping:
            log.info("Kubernetes-side process (pid %s) stopped", proc.pid)
        else:
            log.warning("Kubernetes-side process (pid %s) %s; restarting it", proc.pid, self._why)
        unknown = KubeUnavailable(
            f"the Kubernetes-side process exited during the call ({self._why}): whether "
            "it reached the API server is unknown",
            reason="KubeSideLost",
        )
        for future in self._pending.values():
            if not future.done():
                future.set_exception(unknown)

    async def close(self) -> None:
        """Stop the child, when `run` is not there to (it stops it when cancelled)."""
        proc = self._proc
        if proc is not None:
            self.up.clear()
            await self._stop(proc)

    @staticmethod
    async def _stop(proc: asyncio.subprocess.Process) -> None:
        """Close the child's stdin: it finishes the calls it has, then exits (killed after
        `STOP_GRACE` seconds)."""
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), STOP_GRACE)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
