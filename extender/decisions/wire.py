"""The kube-scheduler extender wire format (k8s.io/kube-scheduler/extender/v1) <-> Python.
The Go types have no json tags, so both ways use the Go field names (`Pod`, `NodeNames`).
Bodies decode into wiretypes.py's Structs (the one schema), a 400 naming the first bad
field; node names are checked once, there. The encoders answer the engine's decisions.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import filterfalse
from typing import Any, Literal, TypeVar, cast, get_args, get_type_hints

import msgspec
import orjson

from extender.decisions import wiretypes
from extender.decisions.model import FilterDecision, Priorities
from extender.decisions.pods import PodFacts, read_pod
from extender.decisions.resources import PodError
from extender.decisions.wiretypes import NodeList

JSON = dict[str, Any]
Verb = Literal["filter", "prioritize", "bind", "preempt"]
VERBS: tuple[Verb, ...] = ("filter", "prioritize", "bind", "preempt")
"""The extender verbs we serve, each at <urlPrefix>/<verb>."""


class WireError(ValueError):
    """A request body the scheduler could not have sent; becomes a 400 naming the problem."""


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    """An ExtenderArgs body as the engine reads it."""

    pod: PodFacts
    names: list[str]  # node names in request order (NodeNames, or Nodes.items[].metadata.name)
    node_list: JSON | None
    """The v1.NodeList when the scheduler sent full Nodes (nodeCacheCapable: false)."""
    exactly: frozenset[str] | None = None
    """The parser's `answered` set, when the request names exactly its nodes."""


BindingArgs = wiretypes.ExtenderBindingArgs
"""The bind body as it comes: every field a non-empty string."""


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    """An ExtenderPreemptionArgs body as the engine reads it."""

    pod: PodFacts
    victims: Mapping[str, Any]  # node -> MetaVictims (`{"Pods": [{"UID"}], "NumPDBViolations"}`)


_T = TypeVar("_T", bound=msgspec.Struct)
_DECODERS = {t: msgspec.json.Decoder(t) for t in {*wiretypes.REQUESTS.values(), NodeList}}


def _decode(body: bytes, kind: type[_T], where: str = "") -> _T:
    """`body` as `kind` (a wiretypes Struct); a WireError names the first bad field."""
    what = kind.__name__
    if not body:
        raise WireError(f"empty request body: expected a JSON {what} object")
    try:
        return cast(_T, _DECODERS[kind].decode(body))
    except msgspec.ValidationError as exc:
        text = str(exc)
        with contextlib.suppress(RecursionError):  # met after the first bad field
            text = _name_the_key(body, text, kind)
        raise WireError(_validation_message(text, what, where)) from None
    except msgspec.DecodeError as exc:
        raise WireError(f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise WireError("request body nests too deep to be a scheduler's request") from None


def _json_of(raw: msgspec.Raw) -> Any:
    try:
        return orjson.loads(memoryview(raw))
    except orjson.JSONDecodeError as exc:
        raise WireError(f"request body is not valid JSON: {exc}") from None


def _name_the_key(body: bytes, text: str, kind: type[msgspec.Struct]) -> str:
    """msgspec's path names no dict key (`$.NodeNameToVictims[...].Pods`): find the node."""
    field, found, _ = text.partition("`$.")[2].partition("[...]")
    hints = get_type_hints(kind)
    if not found or field not in hints:
        return text
    value_type = get_args(get_args(hints[field])[0])[1]  # dict[str, T] | None -> T
    entries = msgspec.json.decode(body, type=dict[str, msgspec.Raw])[field]
    for key, value in msgspec.json.decode(entries, type=dict[str, msgspec.Raw]).items():
        try:
            msgspec.json.decode(value, type=value_type)
        except msgspec.ValidationError:
            return text.replace("[...]", f"[{key!r}]", 1)
    return text


_EMPTY_NAMES = "ExtenderArgs: the node list is empty; nothing to filter or score"
_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]*)`")
_EXPECTED = re.compile(r"Expected `(?P<want>[^`]*)`(?P<more>[^,]*)(?:, got `(?P<got>[^`]*)`)?$")
_WANTED = {
    "array": "a list",
    "array | null": "a list",
    "str": "a string",
    "object": "an object",
    "object | null": "an object",
    "int": "an integer",
}
_PYTHON_NAME = {"array": "list", "object": "dict", "null": "NoneType"}  # as other messages


def _validation_message(text: str, what: str, where: str = "") -> str:
    """msgspec's message in our words ("NodeNames[3]: must be a non-empty string");
    `where`: the field the body came in."""
    message, _, at = text.partition(" - at `$")
    path = ".".join(filter(None, (where, at.rstrip("`").lstrip("."))))
    if (missing := _MISSING.fullmatch(message)) is not None:
        return f"{path or what}: missing field {missing['field']!r}"
    found = _EXPECTED.fullmatch(message)
    if found is None:  # a rule of the type's own (__post_init__)
        return f"{path or what}: {message}"
    got = _PYTHON_NAME.get(found["got"] or "", found["got"] or "")
    if not path:
        return f"request body must be a JSON {what} object, got {got or 'something else'}"
    if path == where:
        return f"{where}: must be a v1.{what} object, got {got}"
    want, more = found["want"], found["more"].strip()
    if "length >= 1" in more and path in ("NodeNames", "Nodes.items"):
        return _EMPTY_NAMES
    if want == "int" and more:
        wanted = "an integer that fits Go's int64"
    elif (want, more) == ("str", "of length >= 1"):
        wanted = "a non-empty string"
    else:
        wanted = _WANTED.get(want) or f"`{want}` {more}".strip()
    return f"{path}: must be {wanted}" + (f", got {got}" if got else "")


def _pod(raw: msgspec.Raw) -> PodFacts:
    try:
        return read_pod(_json_of(raw))
    except PodError as exc:
        raise WireError(str(exc)) from None


def parse_extender_args(
    body: bytes, answered: Callable[[PodFacts], frozenset[str]] | None = None
) -> ExtenderArgs:
    """ExtenderArgs: `Pod` plus `NodeNames` (nodeCacheCapable) or `Nodes` (a v1.NodeList).
    `answered(pod)`: the nodes of the pod's table.WholeAnswer; `exactly` says when
    `NodeNames` names exactly those (one hash per name spares the engine a lookup each)."""
    data = _decode(body, wiretypes.ExtenderArgs)
    pod = _pod(data.Pod)
    if wiretypes.sent(data.Nodes):  # checked even beside NodeNames: the body must be whole
        nodes = _decode(data.Nodes, NodeList, "Nodes")
        if data.NodeNames is None:
            listed = [item.metadata.name for item in nodes.items]
            return ExtenderArgs(pod=pod, names=listed, node_list=_json_of(data.Nodes))
    names = data.NodeNames or []  # not None (ExtenderArgs.__post_init__), not empty
    exactly = answered(pod) if answered is not None else frozenset()
    # A duplicate can only stand in for a node not asked about, which the scheduler never
    # looks up in the answer (kubernetes `pkg/scheduler/schedule_one.go`, `prioritizeNodes`).
    if len(names) == len(exactly) and exactly.issuperset(names):
        return ExtenderArgs(pod=pod, names=names, node_list=None, exactly=exactly)
    return ExtenderArgs(pod=pod, names=names, node_list=None)


def parse_binding_args(body: bytes) -> BindingArgs:
    return _decode(body, BindingArgs)


def parse_preemption_args(body: bytes) -> PreemptionArgs:
    """ExtenderPreemptionArgs in either form (both checked; meta wins), victims as UIDs."""
    data = _decode(body, wiretypes.ExtenderPreemptionArgs)
    pod = _pod(data.Pod)
    if data.NodeNameToMetaVictims is not None:
        meta = data.NodeNameToMetaVictims
        victims = {n: _meta(v, [p.UID for p in v.Pods or ()]) for n, v in meta.items()}
    else:
        full = data.NodeNameToVictims or {}
        victims = {n: _meta(v, [p.metadata.uid for p in v.Pods or ()]) for n, v in full.items()}
    return PreemptionArgs(pod=pod, victims=victims)


def _meta(victims: wiretypes.MetaVictims | wiretypes.Victims, uids: list[str]) -> JSON:
    return {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": victims.NumPDBViolations}


def encode_filter(args: ExtenderArgs, decision: FilterDecision) -> bytes:
    """ExtenderFilterResult in the form asked (NodeNames or Nodes). Our rejections go to
    FailedAndUnresolvableNodes: preemption cannot bring load or a metric back in time, and
    kube-scheduler's picks victims by its own Filter plugins, which these nodes passed.
    A shortlist's left-out nodes get no reason (the answer stays small)."""
    rejected, shortlisted, names = decision.failed, decision.passed, args.names
    if shortlisted is not None:
        passed = list(shortlisted)
    else:
        passed = list(filterfalse(rejected.__contains__, names)) if rejected else names
    nodes = args.node_list
    if nodes is not None and passed is not names:  # the list back without the others
        keep = frozenset(passed)
        kept = [item for item, n in zip(nodes["items"], names, strict=True) if n in keep]
        nodes = {"metadata": nodes.get("metadata", {}), "items": kept}
    return orjson.dumps(
        {
            "Nodes": nodes,
            "NodeNames": passed if nodes is None else None,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": rejected,
            "Error": "",
        }
    )


def encode_priorities(priorities: Priorities) -> bytes:
    """A HostPriorityList: precomputed whole, fragments joined, or this request's scores."""
    if priorities.whole is not None:
        return priorities.whole
    hosts = priorities.hosts
    if priorities.fragments is not None:
        return join_priorities(map(priorities.fragments.__getitem__, hosts))
    return join_priorities(map(host_priority, hosts, priorities.scores))


NO_SCORES = b"[]"
"""A pod not ours: every host scores 0, as one missing from the answer (`prioritizeNodes`)."""


def host_priority(host: str, score: int) -> bytes:
    """One pre-serialised HostPriority, copied to an exact-size object: orjson's output
    keeps its 4 KB buffer, and a table keeps one per node and policy."""
    return bytes(memoryview(orjson.dumps({"Host": host, "Score": score})))


def join_priorities(fragments: Iterable[bytes]) -> bytes:
    """A HostPriorityList; the brackets ride on the end fragments: one copy, not three."""
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
