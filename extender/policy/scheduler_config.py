"""What `decice-extender scheduler-config` checks and prints besides the extender entry.

Flag checkers (argparse `type=` functions: a bad value exits 2 naming the flag), the
address kube-scheduler dials, the `leaderElection` block of a KubeSchedulerConfiguration,
and the Role + RoleBinding its lease needs. docs/scheduler.md explains the rules.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

DEFAULT_WEIGHT = 2
"""The extender weight the shipped configs and `scheduler-config` use: from the simulation
(docs/operating.md, "Weight"): against 1, fewer hot node-minutes in skewed (a third),
moving-load and misrequested, worse beyond noise nowhere."""
MIN_WEIGHT = 1
MAX_WEIGHT = 100
DEFAULT_HTTP_TIMEOUT = "5s"
DEFAULT_LEASE_NAME = "decice-scheduler"
DEFAULT_LEASE_NAMESPACE = "decice-system"  # the Helm chart's namespace (deploy/render.py)
DEFAULT_SERVICE_ACCOUNT = "decice-extender"  # the chart's ServiceAccount (release name)
DEFAULT_SCHEDULER_LEASE = "kube-scheduler"  # the default scheduler's lease, in kube-system
ROLE_SUFFIX = "-leader-election"

_WHERE_TO_DIAL = (
    "use 127.0.0.1 when kube-scheduler runs beside the extender (same pod), "
    "else a name or address it can reach, e.g. the Service name "
    "decice-extender.decice-system.svc or the pod IP"
)

# --- --weight -----------------------------------------------------------------------------


def extender_weight(text: str) -> int:
    """--weight: an integer 1..100.

    kube-scheduler refuses a weight below 1 for an extender with a prioritizeVerb. It adds
    our 0..10 score x 10 x weight to the score plugins' 0..100 x plugin weight; the default
    plugins' weights sum to 12, so at weight 100 the extender already outweighs all of them
    about eight times over. A larger number changes no ranking and is most likely a typo.
    """
    try:
        weight = int(text.strip(), 10)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an integer: the extender weight is a whole number "
            f"{MIN_WEIGHT}..{MAX_WEIGHT}"
        ) from None
    if weight < 1:
        raise argparse.ArgumentTypeError(
            f"{weight} is not positive: kube-scheduler refuses an extender weight below 1 "
            f"(use {MIN_WEIGHT}..{MAX_WEIGHT})"
        )
    if weight > MAX_WEIGHT:
        raise argparse.ArgumentTypeError(
            f"{weight} is above {MAX_WEIGHT}: at {MAX_WEIGHT} the extender's score already "
            "outweighs all default score plugins together about eight times; a larger "
            "weight changes nothing but is likely a mistake"
        )
    return weight


# --- --http-timeout -----------------------------------------------------------------------

# Go's time.ParseDuration syntax (ns to h, no days), not Prometheus's (windows.duration).
_NS_PER_UNIT = {
    "ns": 1,
    "us": 10**3,
    "\u00b5s": 10**3,  # micro sign, as Go accepts
    "\u03bcs": 10**3,  # Greek small mu, as Go accepts
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_DURATION = re.compile(rf"(?:{_DURATION_PART.pattern})+")
_MAX_GO_DURATION_NS = 2**63 - 1


def duration_ns(text: str) -> int | None:
    """Nanoseconds of a Go duration with units ("5s", "500ms", "1m30s", "2.5s"), as Go's
    time.ParseDuration reads it; None if it is not one (no sign, every number with a unit,
    the format values.schema.json allows)."""
    if not _DURATION.fullmatch(text):
        return None
    total = 0
    for number, unit in _DURATION_PART.findall(text):
        total += int(Fraction(number) * _NS_PER_UNIT[unit])  # Go truncates each part
    return total


def go_duration(text: str) -> str:
    """--http-timeout: a positive Go duration with units, printed as the string given."""
    value = text.strip()
    example = "e.g. 5s, 500ms, 1m30s or 2.5s"
    if value.startswith("-"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is negative: give a positive duration, {example}"
        )
    ns = duration_ns(value)
    if ns is None:
        if re.fullmatch(r"[0-9]+(\.[0-9]+)?", value):
            raise argparse.ArgumentTypeError(
                f"{text!r} has no unit: kube-scheduler reads a Go duration ({example}), "
                f"so write {value}s for seconds"
            )
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Go duration: numbers with units ns, us, ms, s, m, h, {example}"
        )
    if ns <= 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is zero: kube-scheduler would silently use its default (5s) instead; "
            f"give a positive duration, {example}"
        )
    if ns > _MAX_GO_DURATION_NS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is too long for a Go duration (about 290 years)"
        )
    return value


# --- --host and urlPrefix -----------------------------------------------------------------

_DNS_LABEL = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?")


def _is_dns_name(name: str) -> bool:
    """An RFC 1123 host name whose last label is not all digits (that would be a bad IP)."""
    name = name.removesuffix(".")
    labels = name.split(".")
    return (
        0 < len(name) <= 253
        and all(_DNS_LABEL.fullmatch(label) for label in labels)
        and not labels[-1].isdigit()
    )


def url_host(host: str) -> str:
    """A host as it goes into a URL: IPv6 literals in brackets, anything else as it is."""
    inner = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ip = ipaddress.ip_address(inner)
    except ValueError:
        return host
    return f"[{ip.compressed}]" if ip.version == 6 else ip.compressed


def dial_host(text: str) -> str:
    """--host: an address kube-scheduler can dial, in URL form (IPv6 bracketed).

    A loopback address, a DNS name (e.g. a Service: decice-extender.decice-system.svc) or
    a concrete IP; never a wildcard listen address (0.0.0.0, ::), a multicast or broadcast
    address, a URL, or a host:port (the port comes from the policy's server.port).
    """
    host = text.strip()
    if not host:
        raise argparse.ArgumentTypeError(f"empty: {_WHERE_TO_DIAL}")
    if "/" in host or "@" in host:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a host: give only the name or address; the scheme, port and "
            "path come from the policy (server.tls, server.port, server.urlPrefix)"
        )
    bracketed = host.startswith("[") and host.endswith("]")
    inner = host[1:-1] if bracketed else host
    try:
        ip = ipaddress.ip_address(inner)
    except ValueError:
        ip = None
    if ip is None:
        if bracketed:
            raise argparse.ArgumentTypeError(f"{text!r}: brackets hold an IPv6 address")
        if ":" in host:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a host: leave out the port (it comes from the policy's "
                "server.port); an IPv6 address must be a valid one"
            )
        if not _is_dns_name(host):
            raise argparse.ArgumentTypeError(
                f"{text!r} is neither an IP address nor a DNS name (letters, digits and '-' "
                f"in dot-separated labels); {_WHERE_TO_DIAL}"
            )
        return host
    if ip.is_unspecified:
        raise argparse.ArgumentTypeError(
            f"{text!r} is a wildcard listen address, not one a client can dial: {_WHERE_TO_DIAL}"
        )
    if ip.is_multicast or ip == ipaddress.IPv4Address("255.255.255.255"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is a multicast or broadcast address: {_WHERE_TO_DIAL}"
        )
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        raise argparse.ArgumentTypeError(
            f"{text!r} has a zone index, which names an interface of one host: use a "
            "routable address or a DNS name"
        )
    return url_host(ip.compressed)


def scheduler_dials(listen: str) -> str:
    """Where a scheduler beside us reaches a listener on `listen`: loopback for a wildcard."""
    inner = listen[1:-1] if listen.startswith("[") and listen.endswith("]") else listen
    if not inner:
        return "127.0.0.1"
    try:
        if ipaddress.ip_address(inner).is_unspecified:
            return "127.0.0.1"  # 0.0.0.0, and :: (dual-stack on Linux) both accept it
    except ValueError:
        pass
    return url_host(listen)


# --- leader election ----------------------------------------------------------------------

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS_LABEL_LOWER = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_MAX_LEASE_NAME = 253 - len(ROLE_SUFFIX)


def lease_name(text: str) -> str:
    """--lease-name: a Lease name (DNS subdomain), never the default scheduler's."""
    if text == DEFAULT_SCHEDULER_LEASE:
        raise argparse.ArgumentTypeError(
            f"{text!r} is the default scheduler's lease: two schedulers sharing it would take "
            f"turns, each stopping the other; use another name (default {DEFAULT_LEASE_NAME})"
        )
    if not _DNS_SUBDOMAIN.fullmatch(text) or len(text) > _MAX_LEASE_NAME:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Lease name: lower-case letters, digits, '-' and '.', starting "
            f"and ending with a letter or digit, at most {_MAX_LEASE_NAME} characters (the "
            f"Role --rbac prints is named <name>{ROLE_SUFFIX})"
        )
    return text


def namespace_name(text: str) -> str:
    """--lease-namespace: a namespace name (DNS label)."""
    if not _DNS_LABEL_LOWER.fullmatch(text) or len(text) > 63:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a namespace name: lower-case letters, digits and '-', starting "
            "and ending with a letter or digit, at most 63 characters"
        )
    return text


@dataclass(frozen=True, slots=True)
class Subject:
    """Who runs the scheduler: a ServiceAccount (namespace None: the lease's) or a User."""

    kind: str
    name: str
    namespace: str | None = None

    def as_rbac(self, lease_namespace: str) -> dict[str, str]:
        if self.kind == "ServiceAccount":
            ns = self.namespace or lease_namespace
            return {"kind": "ServiceAccount", "name": self.name, "namespace": ns}
        return {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": self.name}


def service_account(text: str) -> Subject:
    """--service-account: [NAMESPACE/]NAME of the ServiceAccount kube-scheduler runs as."""
    namespace, _, name = text.rpartition("/")
    if namespace:
        namespace_name(namespace)
    if not _DNS_SUBDOMAIN.fullmatch(name) or len(name) > 253:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not [NAMESPACE/]NAME of a ServiceAccount: the name is lower-case "
            "letters, digits, '-' and '.'"
        )
    return Subject("ServiceAccount", name, namespace or None)


def user_name(text: str) -> Subject:
    """--user: the user name kube-scheduler authenticates as (e.g. system:kube-scheduler)."""
    if not text.strip() or text != text.strip():
        raise argparse.ArgumentTypeError(
            f"{text!r}: give the user name, e.g. system:kube-scheduler"
        )
    return Subject("User", text)


def leader_election(name: str, namespace: str) -> dict[str, Any]:
    """The KubeSchedulerConfiguration leaderElection block for a lease of our own."""
    return {
        "leaderElect": True,
        "resourceLock": "leases",
        "resourceName": name,
        "resourceNamespace": namespace,
    }


def rbac_command(name: str, namespace: str) -> str:
    args = ["decice-extender scheduler-config --rbac"]
    if namespace != DEFAULT_LEASE_NAMESPACE:
        args.append(f"--lease-namespace {namespace}")
    if name != DEFAULT_LEASE_NAME:
        args.append(f"--lease-name {name}")
    return " ".join(args)


def full_header(name: str, namespace: str) -> str:
    """The comment block above `scheduler-config --full`: the RBAC its lease needs."""
    return (
        "# KubeSchedulerConfiguration for decice-extender (docs/scheduler.md).\n"
        f"# Leader election holds the Lease {namespace}/{name}. Bind the scheduler's\n"
        "# identity to the system:kube-scheduler ClusterRole (it may create leases and write\n"
        "# events in every namespace, but get/update only the lease named kube-scheduler)\n"
        f"# and to a Role in {namespace} with get/update on {name} (plus create).\n"
        "# Print that Role and its RoleBinding with:\n"
        f"#   {rbac_command(name, namespace)} [--service-account NS/NAME | --user NAME]\n"
    )


def rbac_documents(name: str, namespace: str, subject: Subject) -> list[dict[str, Any]]:
    """The Role + RoleBinding kube-scheduler's leader election needs on its own lease.

    client-go's LeaseLock gets, creates and updates the Lease (nothing else: no list,
    watch, patch or delete). `create` cannot be narrowed by resourceNames (the name is not
    known to the authorizer before the object exists), so it has a rule of its own. The
    LeaderElection Events go to the lease's namespace; system:kube-scheduler, bound
    cluster-wide, already grants events create/patch/update in both "" and events.k8s.io.
    """
    role = f"{name}{ROLE_SUFFIX}"

    def metadata() -> dict[str, Any]:
        return {
            "name": role,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "decice"},
        }

    group = "coordination.k8s.io"
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata(),
            "rules": [
                {"apiGroups": [group], "resources": ["leases"], "verbs": ["create"]},
                {
                    "apiGroups": [group],
                    "resources": ["leases"],
                    "resourceNames": [name],
                    "verbs": ["get", "update"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata(),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [subject.as_rbac(namespace)],
        },
    ]


def rbac_header(name: str, namespace: str) -> str:
    return (
        f"# kube-scheduler leader election on the Lease {namespace}/{name}\n"
        "# (decice-extender scheduler-config --rbac; docs/scheduler.md). Bind the\n"
        "# system:kube-scheduler and system:volume-scheduler ClusterRoles to the same\n"
        "# identity with ClusterRoleBindings: they cover events and everything else.\n"
    )
