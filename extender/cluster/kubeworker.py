"""The Kubernetes-side process: `python -m extender.cli.kubeworker [--kubeconfig PATH]
--timeout S --retries N` runs `run`, started and restarted by cluster.kubeside.

It reads calls from stdin (cluster.kubewire), makes each through its own KubeClient (the
same kubeconfig, or in-cluster service account, as the verbs' process), concurrently, and
writes each answer to stdout as it comes. It decides nothing: the guard, the reservation
and what an answer means stay in the verbs' process (cluster.binder). It exits when stdin
closes (its parent is gone) and logs to stderr, the container's log.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from extender.cluster.client import KubeClient, load_api_client
from extender.cluster.kubewire import HEADER, WireProblem, error_fields, frame, length, message
from extender.decisions.model import PodEvent
from extender.policy.sections import RETRY_BACKOFF

log = logging.getLogger("decice.kubeworker")

Call = Callable[[KubeClient, list[Any]], Awaitable[Any]]


async def _bind(kube: KubeClient, args: list[Any]) -> Any:
    namespace, name, uid, node = (str(a) for a in args)
    return await kube.bind(namespace, name, uid, node)


async def _get_pod(kube: KubeClient, args: list[Any]) -> Any:
    facts = await kube.get_pod(str(args[0]), str(args[1]))
    return {
        "uid": facts.uid,
        "name": facts.name,
        "namespace": facts.namespace,
        "scheduler_name": facts.scheduler_name,
        "cpu_request": facts.cpu_request,
        "node_name": facts.node_name,
        "policy": facts.policy,
        "owners": facts.owners,
        "labels": facts.labels,
    }


async def _event(kube: KubeClient, args: list[Any]) -> Any:
    await kube.create_event(PodEvent(**args[0]))
    return None


CALLS: dict[str, Call] = {"bind": _bind, "get_pod": _get_pod, "event": _event}


class Worker:
    def __init__(self, kube: KubeClient, out: asyncio.WriteTransport) -> None:
        self._kube = kube
        self._out = out
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, call: dict[str, Any]) -> None:
        task = asyncio.create_task(self._answer(call))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _answer(self, call: dict[str, Any]) -> None:
        ident = call["id"]
        op = CALLS.get(str(call.get("op")))
        args = call.get("args")
        try:
            if op is None or not isinstance(args, list):
                raise WireProblem(f"no such call: {call.get('op')!r}")
            answer: dict[str, Any] = {"id": ident, "ok": await op(self._kube, args)}
        except Exception as exc:
            answer = {"id": ident, "err": error_fields(exc)}
        self._out.write(frame(answer))


async def serve(
    kube: KubeClient, reader: asyncio.StreamReader, out: asyncio.WriteTransport
) -> None:
    worker = Worker(kube, out)
    while True:
        try:
            header = await reader.readexactly(HEADER)
            body = await reader.readexactly(length(header))
        except asyncio.IncompleteReadError:
            # The parent closed our stdin: it is gone or stopping us. The calls under way
            # finish (each bounded by the client's timeout), their answers written.
            await worker.drain()
            return
        worker.start(message(body))


async def run(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 21)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, sys.stdout)
    api = load_api_client(args.kubeconfig)
    kube = KubeClient(
        api.configuration, timeout=args.timeout, retries=args.retries, backoff=RETRY_BACKOFF
    )
    try:
        await serve(kube, reader, out)
    finally:
        await kube.close()


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m extender.cli.kubeworker")
    p.add_argument("--kubeconfig")
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--retries", type=int, default=2)
    return p.parse_args(argv)
