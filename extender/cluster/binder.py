"""The bind verb: guard, de-duplicate (one call per UID at a time) and create the Binding;
a pod not ours or a node our filter rejected is refused with an `Error` naming the fix."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from extender.cluster.kubeapi import KubeAPI
from extender.decisions.engine import Engine
from extender.decisions.pods import PodMemo, name_problem, shown
from extender.decisions.wire import BindingArgs
from extender.policy.settings import Settings

log = logging.getLogger("decice.bind")
BOUND_CAPACITY = 10_000


def _name_problem(args: BindingArgs) -> str | None:
    """Why the request cannot name a real pod and node, or None (the names go into URLs)."""
    checks = (
        ("PodNamespace", args.pod_namespace, True),
        ("PodName", args.pod_name, False),
        ("Node", args.node, False),
    )
    for name, value, namespace in checks:
        if (problem := name_problem(value, namespace=namespace)) is not None:
            return f"{name} {shown(value)} {problem}"
    return None


def _who(args: BindingArgs) -> str:
    return (
        f"{shown(args.pod_namespace)}/{shown(args.pod_name)} ({shown(args.pod_uid)}) "
        f"-> {shown(args.node)}"
    )


def _not_bound(exc: Exception) -> bool:
    """A 4xx surely left the pod unbound; a timeout, 429 or 5xx may not (its room stays)."""
    status = getattr(exc, "status", None)  # KubeError's; not imported: no client here
    return isinstance(status, int) and 400 <= status < 500 and status not in (408, 429)


class BindRefused(Exception):
    """Our own guard said no; the message goes to the scheduler as the bind Error."""


@dataclass(eq=False)
class Binder:
    settings: Settings
    engine: Engine
    kube: KubeAPI | None
    clock: Callable[[], float] = time.time
    on_outcome: Callable[[str], None] = lambda outcome: None
    on_placed: Callable[[str], None] = lambda uid: None
    # uid -> (node, result) of the binds running; uid -> node of the last BOUND_CAPACITY done
    _inflight: dict[str, tuple[str, asyncio.Future[str]]] = field(default_factory=dict, init=False)
    _bound: OrderedDict[str, str] = field(default_factory=OrderedDict, init=False)

    def binding(self, uid: str) -> bool:
        """True while our bind of this pod runs (its watch event may arrive first)."""
        return uid in self._inflight

    async def bind(self, args: BindingArgs) -> str:
        """Bind and return the ExtenderBindingResult Error string ("" on success)."""
        uid = args.pod_uid
        while (running := self._inflight.get(uid)) is not None:
            # A retry while the first call runs: the same node shares its answer; another
            # waits for it and is decided afresh.
            node, first = running
            error = await asyncio.shield(first)
            if node == args.node:
                return error
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._inflight[uid] = (args.node, future)
        # What waiting duplicates get if this call is cancelled (shutdown).
        error = "decice: bind interrupted before it finished (extender shutting down); retry"
        try:
            error = await self._bind(args)
        except Exception as exc:  # never a 500 on the scheduler's bind path
            log.exception(
                "bind of %s/%s failed unexpectedly", shown(args.pod_namespace), shown(args.pod_name)
            )
            error = f"decice: bind failed unexpectedly: {type(exc).__name__}: {exc}"
        finally:
            del self._inflight[uid]
            future.set_result(error)
        return error

    async def _bind(self, args: BindingArgs) -> str:
        try:
            outcome = await self._guarded_bind(args)
        except BindRefused as refused:
            log.warning("bind refused: %s: %s", _who(args), refused)
            self.on_outcome("refused")
            return f"decice: {refused}"
        except Exception as exc:
            log.warning("bind failed: %s: %s", _who(args), exc)
            self.on_outcome("error")
            return (
                f"decice: bind of {args.pod_namespace}/{args.pod_name} to {args.node} failed: {exc}"
            )
        # DEBUG, as kube-scheduler logs its binds at V(2) (pkg/scheduler/schedule_one.go).
        if log.isEnabledFor(logging.DEBUG):
            log.debug("bind %s: %s", outcome, _who(args))
        self.on_outcome(outcome)
        return ""

    async def _guarded_bind(self, args: BindingArgs) -> str:
        if not self.settings.bind.enabled:
            raise BindRefused(
                "binding is disabled in this extender's policy (bind.enabled: false); "
                "remove bindVerb from the scheduler's extender entry"
            )
        problem = _name_problem(args)
        if problem is not None:
            raise BindRefused(problem)
        done = self._bound.get(args.pod_uid)
        if done is not None:
            if done == args.node:
                return "already-bound"
            raise BindRefused(f"pod {args.pod_name} is already bound to node {done!r}")
        if self.kube is None:
            raise BindRefused(
                "no Kubernetes client is configured (set KUBECONFIG or run in-cluster)"
            )
        kube = self.kube
        memo = self.engine.pods.get(args.pod_uid)
        cores: float | None
        if memo is not None:
            ours = self.engine.is_ours(memo.facts)
            scheduler, cores = memo.facts.scheduler_name, memo.facts.cpu_request
            self._check_node(args, memo)
        else:  # no filter call seen for this UID (restart, or no filterVerb): ask the API
            pod = await kube.get_pod(args.pod_namespace, args.pod_name)
            if pod.uid != args.pod_uid:
                raise BindRefused(
                    f"pod {args.pod_namespace}/{args.pod_name} has UID {pod.uid}, "
                    f"not {args.pod_uid}: it was deleted and re-created"
                )
            if pod.node_name:
                if pod.node_name == args.node:
                    self._remember(args)
                    return "already-bound"
                raise BindRefused(f"pod {args.pod_name} is already bound to node {pod.node_name!r}")
            ours = pod.scheduler_name in self.settings.scheduler_names
            scheduler, cores = pod.scheduler_name, pod.cpu_request
        if not ours and self.settings.bind.foreign_pods == "refuse":
            raise BindRefused(
                f"pod {args.pod_namespace}/{args.pod_name} has schedulerName {scheduler!r}, "
                f"not one of {sorted(self.settings.scheduler_names)}; this extender owns bindVerb "
                "for every profile of its scheduler: run a dedicated scheduler whose only profile "
                "is ours, drop bindVerb, or set bind.foreignPods: bind"
            )
        # Reserved first: the scheduler scores its next pods while the Binding is in flight.
        reserved = ours and self.engine.reserve(args.pod_uid, args.node, cores, self.clock())
        try:
            outcome = await kube.bind(args.pod_namespace, args.pod_name, args.pod_uid, args.node)
        except Exception as exc:
            if reserved and _not_bound(exc):
                self.engine.release(args.pod_uid, self.clock())
            raise
        self._remember(args)
        self.engine.pods.placed(args.pod_uid, args.node)
        if ours and outcome == "bound":  # a retried bind (already-bound) had its Event
            self.on_placed(args.pod_uid)
        return outcome

    def _check_node(self, args: BindingArgs, memo: PodMemo) -> None:
        # The API accepts a Binding to a node that does not exist, so check it ourselves.
        if memo.candidates is not None and args.node not in memo.candidates:
            raise BindRefused(
                f"node {args.node!r} was not among the nodes sent to this extender's filter for "
                f"pod {args.pod_namespace}/{args.pod_name} in its latest filter call"
            )
        if args.node in memo.rejected:
            raise BindRefused(
                f"node {args.node!r} was rejected by this extender's filter for pod "
                f"{args.pod_namespace}/{args.pod_name} in its latest filter call"
            )

    def _remember(self, args: BindingArgs) -> None:
        self._bound[args.pod_uid] = args.node
        while len(self._bound) > BOUND_CAPACITY:
            self._bound.popitem(last=False)

    async def drain(self, timeout: float) -> bool:
        """Wait for in-flight binds (graceful shutdown); True when none is left."""
        pending = [future for _, future in self._inflight.values()]
        if not pending:
            return True
        _, not_done = await asyncio.wait(pending, timeout=timeout)
        return not not_done
