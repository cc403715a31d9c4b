"""The kube-scheduler extender wire format (k8s.io/kube-scheduler/extender/v1) <-> Python.

The Go types have no json tags, so the scheduler sends the Go field names exactly
(`Pod`, `Nodes`, `NodeNames`, `PodUID`...) and we answer with the same canonical names.
Parsing is strict about what we read and ignores the rest; the big arrays are checked
by the lookups that use them (see table.py), not walked twice here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

JSON = dict[str, Any]


class WireError(ValueError):
    """A request body the scheduler could not have sent; becomes a 400 naming the problem."""


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What we read from a Pod: identity, scheduler, CPU request strings, nominated node."""

    uid: str
    name: str
    namespace: str
    scheduler_name: str
    cpu_requests: tuple[str, ...]
    init_cpu_requests: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    pod: PodFacts
    names: list[str]
    """Node names in request order, from NodeNames or from Nodes.items[].metadata.name."""
    node_list: JSON | None
    """The v1.NodeList when the scheduler sent full Nodes (nodeCacheCapable: false)."""


@dataclass(frozen=True, slots=True)
class BindingArgs:
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    pod: PodFacts
    victims: Mapping[str, Any]
    """Node -> MetaVictims (`{"Pods": [{"UID"}], "NumPDBViolations"}`), always meta form."""


def decode_object(body: bytes, what: str) -> JSON:
    if not body:
        raise WireError(f"empty request body: expected a JSON {what} object")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise WireError(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise WireError(f"request body must be a JSON {what} object, got {type(data).__name__}")
    return data


def _field(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in obj:
        raise WireError(f"{where}: missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise WireError(f"{where}.{key}: must be {kind.__name__}, got {type(value).__name__}")
    return value


def _optional_str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise WireError(f"{where}.{key}: must be a string, got {type(value).__name__}")
    return value


def _cpu_requests(containers: Any, where: str) -> tuple[str, ...]:
    if containers is None:
        return ()
    if not isinstance(containers, list):
        raise WireError(f"{where}: must be a list")
    out = []
    for c in containers:
        res = c.get("resources") if isinstance(c, dict) else None
        req = res.get("requests") if isinstance(res, dict) else None
        cpu = req.get("cpu") if isinstance(req, dict) else None
        if isinstance(cpu, str):
            out.append(cpu)
        elif isinstance(cpu, (int, float)) and not isinstance(cpu, bool):
            out.append(str(cpu))
    return tuple(out)


def parse_pod(pod: Any, where: str = "Pod") -> PodFacts:
    if not isinstance(pod, dict):
        raise WireError(f"{where}: must be an object, got {type(pod).__name__}")
    meta = _field(pod, "metadata", dict, where)
    spec = pod.get("spec") or {}
    if not isinstance(spec, dict):
        raise WireError(f"{where}.spec: must be an object")
    return PodFacts(
        uid=_optional_str(meta, "uid", f"{where}.metadata"),
        name=_field(meta, "name", str, f"{where}.metadata"),
        namespace=_optional_str(meta, "namespace", f"{where}.metadata") or "default",
        # The API server defaults an empty schedulerName to default-scheduler.
        scheduler_name=_optional_str(spec, "schedulerName", f"{where}.spec") or "default-scheduler",
        cpu_requests=_cpu_requests(spec.get("containers"), f"{where}.spec.containers"),
        init_cpu_requests=_cpu_requests(spec.get("initContainers"), f"{where}.spec.initContainers"),
    )


def _node_names_of(node_list: Any) -> list[str]:
    if not isinstance(node_list, dict):
        raise WireError(f"Nodes: must be a v1.NodeList object, got {type(node_list).__name__}")
    items = node_list.get("items")
    if not isinstance(items, list):
        raise WireError("Nodes.items: must be a list of v1.Node")
    try:
        names = [item["metadata"]["name"] for item in items]
    except (TypeError, KeyError):
        names = []  # fall through to the precise message below
    if len(names) != len(items) or not all(isinstance(n, str) and n for n in names):
        for i, item in enumerate(items):
            meta = item.get("metadata") if isinstance(item, dict) else None
            name = meta.get("name") if isinstance(meta, dict) else None
            if not isinstance(name, str) or not name:
                raise WireError(f"Nodes.items[{i}].metadata.name: must be a non-empty string")
    return names


def parse_extender_args(body: bytes) -> ExtenderArgs:
    """ExtenderArgs: `Pod` plus `NodeNames` (nodeCacheCapable) or `Nodes` (a v1.NodeList)."""
    data = decode_object(body, "ExtenderArgs")
    pod = parse_pod(data.get("Pod"))
    names = data.get("NodeNames")
    node_list = data.get("Nodes")
    if names is not None:
        if not isinstance(names, list):
            raise WireError(f"NodeNames: must be a list of node names, got {type(names).__name__}")
        node_list = None
    elif node_list is not None:
        names = _node_names_of(node_list)
    else:
        raise WireError("ExtenderArgs: both NodeNames and Nodes are null; send one of them")
    if not names:
        raise WireError("ExtenderArgs: the node list is empty; nothing to filter or score")
    return ExtenderArgs(pod=pod, names=names, node_list=node_list)


def check_names(names: Sequence[Any]) -> None:
    """The slow, precise check, run only when the fast lookups met something odd."""
    for i, n in enumerate(names):
        if not isinstance(n, str) or not n:
            raise WireError(f"NodeNames[{i}]: must be a non-empty string, got {n!r:.60}")


def parse_binding_args(body: bytes) -> BindingArgs:
    data = decode_object(body, "ExtenderBindingArgs")
    where = "ExtenderBindingArgs"
    values = {}
    for key in ("PodName", "PodNamespace", "PodUID", "Node"):
        value = _field(data, key, str, where)
        if not value:
            raise WireError(f"{where}.{key}: must not be empty")
        values[key] = value
    return BindingArgs(values["PodName"], values["PodNamespace"], values["PodUID"], values["Node"])


def _meta_victims(node: str, victims: Any, full: bool) -> JSON:
    where = f"NodeNameTo{'' if full else 'Meta'}Victims[{node!r}]"
    if not isinstance(victims, dict):
        raise WireError(f"{where}: must be an object")
    pods = victims.get("Pods") or []
    if not isinstance(pods, list):
        raise WireError(f"{where}.Pods: must be a list")
    violations = victims.get("NumPDBViolations", 0)
    if not isinstance(violations, int) or isinstance(violations, bool):
        raise WireError(f"{where}.NumPDBViolations: must be an integer")
    if not full:
        for i, p in enumerate(pods):
            if not isinstance(p, dict) or not isinstance(p.get("UID"), str):
                raise WireError(f"{where}.Pods[{i}].UID: must be a string")
        return victims
    uids = []
    for i, p in enumerate(pods):
        meta = p.get("metadata") if isinstance(p, dict) else None
        uid = meta.get("uid") if isinstance(meta, dict) else None
        if not isinstance(uid, str):
            raise WireError(f"{where}.Pods[{i}].metadata.uid: must be a string")
        uids.append({"UID": uid})
    return {"Pods": uids, "NumPDBViolations": violations}


def parse_preemption_args(body: bytes) -> PreemptionArgs:
    """ExtenderPreemptionArgs in either form; victims come back in meta form (UIDs)."""
    data = decode_object(body, "ExtenderPreemptionArgs")
    pod = parse_pod(data.get("Pod"))
    meta = data.get("NodeNameToMetaVictims")
    full = data.get("NodeNameToVictims")
    source, is_full = (meta, False) if meta is not None else (full, True)
    if source is None:
        return PreemptionArgs(pod=pod, victims={})
    if not isinstance(source, dict):
        key = "NodeNameToVictims" if is_full else "NodeNameToMetaVictims"
        raise WireError(f"{key}: must be an object node -> victims")
    victims = {str(n): _meta_victims(n, v, is_full) for n, v in source.items()}
    return PreemptionArgs(pod=pod, victims=victims)


def encode_filter_names(passed: list[str], failed: Mapping[str, str]) -> bytes:
    return orjson.dumps(
        {
            "Nodes": None,
            "NodeNames": passed,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": failed,
            "Error": "",
        }
    )


def encode_filter_nodes(
    node_list: JSON, kept: list[Any] | None, failed: Mapping[str, str]
) -> bytes:
    """Answer in the Nodes form; `kept` None means every node passed (reuse the list)."""
    nodes = (
        node_list if kept is None else {"metadata": node_list.get("metadata", {}), "items": kept}
    )
    return orjson.dumps(
        {
            "Nodes": nodes,
            "NodeNames": None,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": failed,
            "Error": "",
        }
    )


def encode_filter_error(message: str, names_form: bool) -> bytes:
    return orjson.dumps(
        {
            "Nodes": None,
            "NodeNames": [] if names_form else None,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": message,
        }
    )


def host_priority(host: str, score: int) -> bytes:
    """One pre-serialised HostPriority; the request path joins these."""
    return orjson.dumps({"Host": host, "Score": score})


def join_priorities(fragments: Iterable[bytes]) -> bytes:
    """A HostPriorityList from fragments; the brackets ride on the end fragments, so the
    answer (300 KB for 5,000 nodes) is copied once, not three times."""
    parts = list(fragments)
    if not parts:
        return b"[]"
    parts[0] = b"[" + parts[0]
    parts[-1] += b"]"
    return b",".join(parts)


def encode_binding_result(error: str = "") -> bytes:
    return orjson.dumps({"Error": error})


def encode_preemption_result(victims: Mapping[str, Any]) -> bytes:
    return orjson.dumps({"NodeNameToMetaVictims": victims})
