"""The doctor's Kubernetes checks, pure: the node list, and the permissions the policy
needs (examine asks them through SelfSubjectAccessReview)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from extender.decisions.model import NodeInfo
from extender.doctor.rows import Row, few
from extender.errors.causes import describe
from extender.policy.settings import Settings


@dataclass(frozen=True, slots=True)
class Permission:
    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    why: str = ""
    required: bool = True
    """False: a denial is a warning (a feature not in use yet)."""
    namespace: str = ""
    """Asked in this namespace; empty: at the cluster scope."""

    @property
    def name(self) -> str:
        what = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{self.verb} {what}" + (f".{self.group}" if self.group else "")


def permissions(settings: Settings) -> list[Permission]:
    """What the policy needs of the API, and why (one entry per verb and resource)."""
    nodes, pods, events = "node addresses and sizes", "kubernetes.watchPods", "explain.events"
    chart = "; the chart gives it to the rebalancer's own account"
    out = [Permission("list", "nodes", why=nodes), Permission("watch", "nodes", why=nodes)]
    if settings.bind.enabled:
        out.append(Permission("create", "pods", subresource="binding", why="bind.enabled"))
    if settings.kubernetes.watch_pods:
        out += [Permission("list", "pods", why=pods), Permission("watch", "pods", why=pods)]
    if settings.requeue.enabled:
        out.append(Permission("patch", "pods", why="requeue.enabled"))
    if settings.explain.events:
        out.append(Permission("create", "events", group="events.k8s.io", why=events))
    why = "decice-extender rebalance (its dry run asks too)" + chart
    out.append(Permission("create", "pods", subresource="eviction", why=why, required=False))
    overload = settings.overload
    if overload.enabled:
        why = "overload.enabled (taints on hot nodes)"
        out += [Permission("get", "nodes", why=why), Permission("patch", "nodes", why=why)]
        if not settings.explain.events:  # else asked above already
            out.append(Permission("create", "events", group="events.k8s.io", why=why))
        where = overload.lease_namespace or ""
        why = "overload.enabled: one replica writes taints, elected on a Lease "
        why += f"({where or 'POD_NAMESPACE'}/{overload.lease_name})"
        # Granted in the Lease's namespace: asked there when known.
        lease = "update", "leases", "coordination.k8s.io"
        out.append(Permission(*lease, why=why, required=False, namespace=where))
    why = "decice-extender rebalance skips pods their budget guards" + chart
    out.append(Permission("list", "poddisruptionbudgets", "policy", why=why, required=False))
    return out


def permission_row(permission: Permission, answer: tuple[bool, str] | BaseException) -> Row:
    check = f"rbac {permission.name}"
    if isinstance(answer, BaseException):
        return Row(check, "FAIL", f"cannot ask (SelfSubjectAccessReview): {describe(answer)}")
    allowed, reason = answer
    if allowed:
        return Row(check, "ok", f"allowed ({permission.why})")
    because = f" ({reason})" if reason else ""
    return Row(
        check,
        "FAIL" if permission.required else "warn",
        f"denied{because}: {permission.why} needs it; grant it to the extender's account",
    )


def nodes_row(nodes: Sequence[NodeInfo] | BaseException) -> Row:
    if isinstance(nodes, BaseException):
        return Row("kubernetes", "FAIL", f"cannot list nodes: {describe(nodes)}")
    if not nodes:
        return Row("kubernetes", "FAIL", "the API lists no nodes")
    without = [n.name for n in nodes if not n.internal_ips]
    if without:
        return Row(
            "kubernetes",
            "warn",
            f"{len(nodes)} nodes; without InternalIP (no `instance` mapping): {few(without)}",
        )
    return Row("kubernetes", "ok", f"{len(nodes)} nodes listed")
