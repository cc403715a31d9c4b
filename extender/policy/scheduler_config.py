"""What `decice-extender scheduler-config` checks and prints besides the extender entry:
flag checkers (argparse `type=` functions), the address kube-scheduler dials, and the RBAC
of its leader-election Lease (docs/scheduler.md)."""

from __future__ import annotations

import argparse
import ipaddress
import re
from typing import Any

from extender.policy.windows import GO_UNITS, duration

DEFAULT_WEIGHT = 2
"""The extender weight the shipped configs and `scheduler-config` use: from the simulation
(docs/operating.md, "Weight"): against 1, fewer hot node-minutes in skewed (a third),
moving-load and misrequested, worse beyond noise nowhere."""
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


def extender_weight(text: str) -> int:
    """--weight: an integer 1..100 (kube-scheduler refuses below 1; at 100 our 0..10 x 10 x
    weight outweighs the default plugins' weights (12 x 0..100) eight times over)."""
    try:
        weight = int(text.strip(), 10)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an integer: the extender weight is a whole number 1..{MAX_WEIGHT}"
        ) from None
    if weight < 1:
        raise argparse.ArgumentTypeError(
            f"{weight} is not positive: kube-scheduler refuses an extender weight below 1 "
            f"(use 1..{MAX_WEIGHT})"
        )
    if weight > MAX_WEIGHT:
        raise argparse.ArgumentTypeError(
            f"{weight} is above {MAX_WEIGHT}: at {MAX_WEIGHT} the extender's score already "
            "outweighs all default score plugins together about eight times; a larger "
            "weight changes nothing but is likely a mistake"
        )
    return weight


_MAX_GO_DURATION = (2**63 - 1) / 1e9  # seconds


def go_duration(text: str) -> str:
    """--http-timeout: a positive Go duration with units, printed as the string given."""
    value = text.strip()
    example = "e.g. 5s, 500ms, 1m30s or 2.5s"
    if value.startswith("-"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is negative: give a positive duration, {example}"
        )
    seconds = duration(value, GO_UNITS)
    if seconds is None:
        if re.fullmatch(r"[0-9]+(\.[0-9]+)?", value):
            raise argparse.ArgumentTypeError(
                f"{text!r} has no unit: kube-scheduler reads a Go duration ({example}), "
                f"so write {value}s for seconds"
            )
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Go duration: numbers with units ns, us, ms, s, m, h, {example}"
        )
    if seconds * 1e9 < 1:  # Go truncates to whole nanoseconds
        raise argparse.ArgumentTypeError(
            f"{text!r} is zero: kube-scheduler would silently use its default (5s) instead; "
            f"give a positive duration, {example}"
        )
    if seconds > _MAX_GO_DURATION:
        raise argparse.ArgumentTypeError(
            f"{text!r} is too long for a Go duration (about 290 years)"
        )
    return value


_DNS_LABEL = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?")


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address `host` is (an IPv6 literal bracketed or not), or None."""
    try:
        return ipaddress.ip_address(host[1:-1] if host[:1] + host[-1:] == "[]" else host)
    except ValueError:
        return None


def url_host(host: str) -> str:
    """A host as it goes into a URL: IPv6 literals in brackets, anything else as it is."""
    ip = _ip(host)
    if ip is None:
        return host
    return f"[{ip.compressed}]" if ip.version == 6 else ip.compressed


def dial_host(text: str) -> str:
    """--host: an address kube-scheduler can dial (a loopback or concrete IP, a DNS name),
    in URL form; never a wildcard, multicast or broadcast address, a URL, or a host:port."""
    host = text.strip()
    if not host:
        raise argparse.ArgumentTypeError(f"empty: {_WHERE_TO_DIAL}")
    if "/" in host or "@" in host:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a host: give only the name or address; the scheme, port and "
            "path come from the policy (server.tls, server.port, server.urlPrefix)"
        )
    ip = _ip(host)
    if ip is None:
        if host.startswith("[") and host.endswith("]"):
            raise argparse.ArgumentTypeError(f"{text!r}: brackets hold an IPv6 address")
        if ":" in host:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a host: leave out the port (it comes from the policy's "
                "server.port); an IPv6 address must be a valid one"
            )
        labels = host.removesuffix(".").split(".")
        if not (
            len(host) <= 253
            and all(_DNS_LABEL.fullmatch(label) for label in labels)
            and not labels[-1].isdigit()  # all digits: a bad IP, not a name
        ):
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
    return url_host(host)


def scheduler_dials(listen: str) -> str:
    """Where a scheduler beside us reaches a listener on `listen`: loopback for a wildcard
    (0.0.0.0, and :: which is dual-stack on Linux)."""
    ip = _ip(listen)
    if not listen.strip("[]") or (ip is not None and ip.is_unspecified):
        return "127.0.0.1"
    return url_host(listen)


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


Subject = dict[str, str | None]
"""Who runs the scheduler, as a RoleBinding subject (a namespace None: the lease's)."""


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
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace or None}


def user_name(text: str) -> Subject:
    """--user: the user name kube-scheduler authenticates as (e.g. system:kube-scheduler)."""
    if not text.strip() or text != text.strip():
        raise argparse.ArgumentTypeError(
            f"{text!r}: give the user name, e.g. system:kube-scheduler"
        )
    return {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": text}


def full_header(name: str, namespace: str) -> str:
    """The comment block above `scheduler-config --full`: the RBAC its lease needs."""
    flags = (("namespace", namespace, DEFAULT_LEASE_NAMESPACE), ("name", name, DEFAULT_LEASE_NAME))
    lease = "".join(
        f" --lease-{flag} {value}" for flag, value, default in flags if value != default
    )
    return (
        "# KubeSchedulerConfiguration for decice-extender (docs/scheduler.md).\n"
        f"# Leader election holds the Lease {namespace}/{name}. Bind the scheduler's\n"
        "# identity to the system:kube-scheduler ClusterRole (it may create leases and write\n"
        "# events in every namespace, but get/update only the lease named kube-scheduler)\n"
        f"# and to a Role in {namespace} with get/update on {name} (plus create).\n"
        "# Print that Role and its RoleBinding with:\n"
        f"#   decice-extender scheduler-config --rbac{lease} [--service-account NS/NAME | "
        "--user NAME]\n"
    )


def rbac_documents(name: str, namespace: str, subject: Subject) -> list[dict[str, Any]]:
    """The Role + RoleBinding kube-scheduler's leader election needs on its own lease:
    client-go's LeaseLock gets, creates and updates it (`create` cannot be narrowed by
    resourceNames, so it has a rule of its own)."""
    rbac, role = "rbac.authorization.k8s.io", f"{name}{ROLE_SUFFIX}"

    def meta() -> dict[str, Any]:  # one each: a shared dict would print as a YAML alias
        return {
            "name": role,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "decice"},
        }

    leases = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"]}
    rules = [{**leases, "verbs": ["create"]}]
    rules.append({**leases, "resourceNames": [name], "verbs": ["get", "update"]})
    return [
        {"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": meta(), "rules": rules},
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": meta(),
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": role},
            "subjects": [{k: namespace if v is None else v for k, v in subject.items()}],
        },
    ]


def rbac_header(name: str, namespace: str) -> str:
    return (
        f"# kube-scheduler leader election on the Lease {namespace}/{name}\n"
        "# (decice-extender scheduler-config --rbac; docs/scheduler.md). Bind the\n"
        "# system:kube-scheduler and system:volume-scheduler ClusterRoles to the same\n"
        "# identity with ClusterRoleBindings: they cover events and everything else.\n"
    )
