"""The kube-scheduler extender wire format (k8s.io/kube-scheduler/extender/v1) <-> Python.

The Go types have no json tags, so the scheduler sends the Go field names exactly
(`Pod`, `Nodes`, `NodeNames`, `PodUID`...) and we answer with the same canonical names.
Parsing is strict about what we read and ignores the rest, as the types in wiretypes.py
describe it (a test holds these parsers to those types, and the OpenAPI document is made
from them). Node names are checked once, here, as msgspec decodes them; the engine and the
table can then trust them. The engine returns decisions (model.py) and the encoders below
turn them into answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import filterfalse
from typing import Any, Literal

import msgspec
import orjson

from extender.decisions import wiretypes
from extender.decisions.model import FilterDecision, Priorities
from extender.decisions.pods import PodFacts, read_pod
from extender.decisions.resources import PodError

JSON = dict[str, Any]
Verb = Literal["filter", "prioritize", "bind", "preempt"]
VERBS: tuple[Verb, ...] = ("filter", "prioritize", "bind", "preempt")
"""The extender verbs we serve, each at <urlPrefix>/<verb>."""


class WireError(ValueError):
    """A request body the scheduler could not have sent; becomes a 400 naming the problem."""


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    pod: PodFacts
    names: list[str]
    """Node names in request order, from NodeNames or from Nodes.items[].metadata.name."""
    node_list: JSON | None
    """The v1.NodeList when the scheduler sent full Nodes (nodeCacheCapable: false)."""
    exactly: frozenset[str] | None = None
    """The `exactly` set given to the parser, when the request names exactly its nodes."""


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


class _ArgsBody(msgspec.Struct):
    """ExtenderArgs as the request path decodes it: the node names typed (msgspec checks
    each while decoding); the pod and a v1.NodeList kept as their JSON text, decoded by
    orjson as every other body is (an integer past 64 bits becomes a float, so a NodeList
    answered back as it came always encodes) and read by read_pod and _node_names_of,
    whose messages name the field."""

    Pod: msgspec.Raw = msgspec.Raw()
    NodeNames: wiretypes.NodeNames | None = None
    Nodes: msgspec.Raw = msgspec.Raw()


def _json_of(raw: msgspec.Raw) -> Any:
    """A field kept as JSON text, decoded; None when the body did not have it."""
    if not raw:
        return None
    try:
        return orjson.loads(memoryview(raw))
    except orjson.JSONDecodeError as exc:
        raise WireError(f"request body is not valid JSON: {exc}") from None


_ARGS = msgspec.json.Decoder(_ArgsBody)
_EMPTY_NAMES = "ExtenderArgs: the node list is empty; nothing to filter or score"


def _decode_args(body: bytes) -> _ArgsBody:
    if not body:
        raise WireError("empty request body: expected a JSON ExtenderArgs object")
    try:
        return _ARGS.decode(body)
    except msgspec.ValidationError as exc:
        raise WireError(_validation_message(str(exc), "ExtenderArgs")) from None
    except msgspec.DecodeError as exc:
        raise WireError(f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise WireError("request body nests too deep to be a scheduler's request") from None


_EXPECTED = re.compile(r"Expected `(?P<want>[^`]*)`(?P<more>[^,]*)(?:, got `(?P<got>[^`]*)`)?$")
_WANTED = {"array": "a list", "array | null": "a list", "str": "a string", "object": "an object"}
_PYTHON_NAME = {"array": "list", "object": "dict", "null": "NoneType"}
"""JSON type names as our other messages name them (after the Python type)."""


def _validation_message(text: str, what: str) -> str:
    """msgspec's "Expected `str` of length >= 1 - at `$.NodeNames[3]`" in our words:
    "NodeNames[3]: must be a non-empty string"."""
    message, _, where = text.partition(" - at `$")
    path = where.rstrip("`").lstrip(".")
    found = _EXPECTED.fullmatch(message)
    got = found["got"] if found and found["got"] else ""
    got = _PYTHON_NAME.get(got, got)
    if not path:
        return f"request body must be a JSON {what} object, got {got or 'something else'}"
    if path == "NodeNames" and "length >= 1" in message:
        return _EMPTY_NAMES
    if found is None:
        return f"{path}: {message[:1].lower()}{message[1:]}"
    want, more = found["want"], found["more"].strip()
    wanted = "a non-empty string" if (want, more) == ("str", "of length >= 1") else None
    wanted = wanted or _WANTED.get(want) or f"`{want}` {more}".strip()
    return f"{path}: must be {wanted}" + (f", got {got}" if got else "")


def _pod(value: Any) -> PodFacts:
    try:
        return read_pod(value)
    except PodError as exc:
        raise WireError(str(exc)) from None


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


def parse_extender_args(
    body: bytes, answered: Callable[[PodFacts], frozenset[str]] | None = None
) -> ExtenderArgs:
    """ExtenderArgs: `Pod` plus `NodeNames` (nodeCacheCapable) or `Nodes` (a v1.NodeList).

    `answered(pod)`: valid node names (prioritize passes the nodes of the pod's policy's
    precomputed answer, table.WholeAnswer). When `NodeNames` names exactly these, the result
    says so and the names need no other check: each was found in a set of non-empty strings."""
    data = _decode_args(body)
    pod = _pod(_json_of(data.Pod))
    names = data.NodeNames
    node_list = _json_of(data.Nodes)
    if node_list is not None:  # read even beside NodeNames: the body must be whole
        listed = _node_names_of(node_list)
        if not listed:
            raise WireError(_EMPTY_NAMES)
    if names is not None:
        exactly = answered(pod) if answered is not None else frozenset()
        if _names_exactly(names, exactly):
            return ExtenderArgs(pod=pod, names=names, node_list=None, exactly=exactly)
        return ExtenderArgs(pod=pod, names=names, node_list=None)
    if node_list is None:
        raise WireError("ExtenderArgs: both NodeNames and Nodes are null; send one of them")
    return ExtenderArgs(pod=pod, names=listed, node_list=node_list)


def _names_exactly(names: list[str], nodes: frozenset[str]) -> bool:
    """`names` is `nodes`, in any order: one hash per name, which spares the engine a lookup
    per name (BENCHMARKS.md, "Prioritize within its floors"). A duplicate can only stand in
    for a node not asked about, which the scheduler never looks up in the answer
    (kubernetes `pkg/scheduler/schedule_one.go`, `prioritizeNodes`)."""
    return len(names) == len(nodes) and nodes.issuperset(names)


def parse_binding_args(body: bytes) -> BindingArgs:
    data = decode_object(body, "ExtenderBindingArgs")
    where = "ExtenderBindingArgs"
    values = {}
    for key in ("PodName", "PodNamespace", "PodUID", "Node"):
        if key not in data:
            raise WireError(f"{where}: missing field {key!r}")
        value = data[key]
        if not isinstance(value, str):
            raise WireError(f"{where}.{key}: must be str, got {type(value).__name__}")
        if not value:
            raise WireError(f"{where}.{key}: must not be empty")
        values[key] = value
    return BindingArgs(values["PodName"], values["PodNamespace"], values["PodUID"], values["Node"])


def _meta_victims(node: str, victims: Any, full: bool) -> JSON:
    where = f"NodeNameTo{'' if full else 'Meta'}Victims[{node!r}]"
    if not isinstance(victims, dict):
        raise WireError(f"{where}: must be an object")
    pods = victims.get("Pods")
    if pods is None:
        pods = []
    if not isinstance(pods, list):
        raise WireError(f"{where}.Pods: must be a list")
    violations = victims.get("NumPDBViolations", 0)
    if not isinstance(violations, int) or isinstance(violations, bool):
        raise WireError(f"{where}.NumPDBViolations: must be an integer")
    if not -(2**63) <= violations < 2**63:
        raise WireError(f"{where}.NumPDBViolations: must fit Go's int64")
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
    pod = _pod(data.get("Pod"))
    forms: dict[bool, dict[str, Any]] = {}
    for key, is_full in (("NodeNameToMetaVictims", False), ("NodeNameToVictims", True)):
        source = data.get(key)
        if source is None:
            continue
        if not isinstance(source, dict):
            raise WireError(f"{key}: must be an object node -> victims")
        forms[is_full] = {str(n): _meta_victims(n, v, is_full) for n, v in source.items()}
    # Both read (the body must be whole); the meta form wins when both are sent.
    return PreemptionArgs(pod=pod, victims=forms.get(False, forms.get(True, {})))


def encode_filter(args: ExtenderArgs, decision: FilterDecision) -> bytes:
    """ExtenderFilterResult in the form the scheduler asked in (NodeNames or Nodes).

    Every node we reject goes to FailedAndUnresolvableNodes with its reason: preempting
    pods cannot bring a node's measured load or a missing metric back in time, and
    kube-scheduler's preemption picks victims by its own Filter plugins, which every node we
    are asked about passed (it would find none there). Nodes too small for this pod are
    among them. Every node asked is passed or failed with a reason, but for the nodes a
    shortlist (prioritize.shortlist) leaves out of the names: the answer stays small at
    5,000 nodes. FailedNodes stays empty."""
    failed = rejected = decision.failed
    names = args.names
    shortlisted = decision.passed
    if args.node_list is None:
        if shortlisted is not None:
            passed = list(shortlisted)
        elif rejected:
            passed = list(filterfalse(rejected.__contains__, names))
        else:
            passed = names
        return orjson.dumps(
            {
                "Nodes": None,
                "NodeNames": passed,
                "FailedNodes": {},
                "FailedAndUnresolvableNodes": failed,
                "Error": "",
            }
        )
    nodes = args.node_list
    if shortlisted is not None or rejected:  # else the list goes back as it came
        kept_names = frozenset(shortlisted) if shortlisted is not None else None
        items = zip(nodes["items"], names, strict=True)
        kept = [
            item
            for item, n in items
            if (n in kept_names if kept_names is not None else n not in rejected)
        ]
        nodes = {"metadata": nodes.get("metadata", {}), "items": kept}
    return orjson.dumps(
        {
            "Nodes": nodes,
            "NodeNames": None,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": failed,
            "Error": "",
        }
    )


def encode_priorities(priorities: Priorities) -> bytes:
    """A HostPriorityList: precomputed whole, precomputed fragments joined, or this
    request's own scores."""
    if priorities.whole is not None:
        return priorities.whole
    hosts = priorities.hosts
    if priorities.fragments is not None:
        return join_priorities(map(priorities.fragments.__getitem__, hosts))
    return join_priorities(map(host_priority, hosts, priorities.scores))


NO_SCORES = b"[]"
"""The answer for a pod that is not ours: every host it asked about scores 0, which is
what the scheduler gives a host missing from the answer (kubernetes
`pkg/scheduler/schedule_one.go`, `prioritizeNodes`)."""


def host_priority(host: str, score: int) -> bytes:
    """One pre-serialised HostPriority; the request path joins these.

    Copied to an exact-size object: orjson's output keeps the 4 KB buffer it wrote into,
    and a table keeps one fragment per node and policy (100 MB at 5,000 nodes and 5
    policies, 0.4 MB copied)."""
    return bytes(memoryview(orjson.dumps({"Host": host, "Score": score})))


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
