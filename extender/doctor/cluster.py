"""The doctor's Kubernetes checks, pure: the node list, and the permissions the policy
needs (asked through SelfSubjectAccessReview by examine).
"""

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


# --- Kubernetes ------------------------------------------------------------------------


def permissions(settings: Settings) -> list[Permission]:
    """What the policy needs of the API, and why (one entry per verb and resource)."""
    out = [
        Permission("list", "nodes", why="node addresses and sizes"),
        Permission("watch", "nodes", why="node addresses and sizes"),
    ]
    if settings.bind.enabled:
        out.append(Permission("create", "pods", subresource="binding", why="bind.enabled"))
    if settings.kubernetes.watch_pods:
        out.append(Permission("list", "pods", why="kubernetes.watchPods"))
        out.append(Permission("watch", "pods", why="kubernetes.watchPods"))
    if settings.requeue.enabled:
        out.append(Permission("patch", "pods", why="requeue.enabled"))
    if settings.explain.events:
        out.append(Permission("create", "events", group="events.k8s.io", why="explain.events"))
    out.append(
        Permission(
            "create",
            "pods",
            subresource="eviction",
            why="decice-extender rebalance (its dry run asks too); the chart gives it to "
            "the rebalancer's own account",
            required=False,
        )
    )
    if settings.overload.enabled:
        why = "overload.enabled (taints on hot nodes)"
        out.append(Permission("get", "nodes", why=why))
        out.append(Permission("patch", "nodes", why=why))
        if not settings.explain.events:  # else asked above already
            out.append(Permission("create", "events", group="events.k8s.io", why=why))
        where = settings.overload.lease_namespace or ""
        out.append(
            Permission(
                "update",
                "leases",
                group="coordination.k8s.io",
                why="overload.enabled: one replica writes taints, elected on a Lease "
                f"({where or 'POD_NAMESPACE'}/{settings.overload.lease_name})",
                required=False,  # granted in the Lease's namespace: asked there if known
                namespace=where,
            )
        )
    out.append(
        Permission(
            "list",
            "poddisruptionbudgets",
            group="policy",
            why="decice-extender rebalance skips pods their budget guards; the chart gives "
            "it to the rebalancer's own account",
            required=False,
        )
    )
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
