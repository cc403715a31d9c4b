"""The extender wire format as types: what kube-scheduler sends us and what we answer.

One description of k8s.io/kube-scheduler/extender/v1 (Go field names: the Go types have
no json tags) as msgspec Structs, narrowed to the fields we read. Three things come
from it:

- the parse of ExtenderArgs' node names on the request path (wire.py decodes
  `NodeNames` with the `NodeNames` type below: one C-level pass, measured faster than
  decoding with orjson then checking each name, BENCHMARKS.md "One wire schema");
- the OpenAPI document (service.openapi derives its schemas from these types);
- the check that wire.py's parsers accept exactly the bodies these types accept
  (tests/decisions/test_wiretypes.py), so the document says what the parser does.

Fields we do not read are not described and are ignored wherever they appear, as by the
parsers. Pure.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
NodeNames = Annotated[
    list[NonEmpty],
    msgspec.Meta(min_length=1, description="Node names (nodeCacheCapable); never empty."),
]


class ObjectMeta(msgspec.Struct):
    name: str
    namespace: str | None = None
    uid: str | None = None


class PodSpec(msgspec.Struct):
    schedulerName: str | None = None
    nodeName: str | None = None
    containers: list[Any] | None = None
    initContainers: list[Any] | None = None


class Pod(msgspec.Struct):
    """A v1.Pod: the fields the extender reads (decisions.pods.read_pod)."""

    metadata: ObjectMeta
    spec: PodSpec | None = None


class NodeMeta(msgspec.Struct):
    name: NonEmpty


class Node(msgspec.Struct):
    metadata: NodeMeta


class NodeList(msgspec.Struct):
    """A v1.NodeList (nodeCacheCapable: false); answered back without the failed nodes."""

    items: Annotated[list[Node], msgspec.Meta(min_length=1)]


class ExtenderArgs(msgspec.Struct):
    """The body of filter and prioritize: the pod, and the nodes in one of two forms."""

    Pod: Pod
    Nodes: NodeList | None = None
    NodeNames: NodeNames | None = None

    def __post_init__(self) -> None:
        if self.NodeNames is None and self.Nodes is None:
            raise ValueError("both NodeNames and Nodes are null; send one of them")


class ExtenderBindingArgs(msgspec.Struct):
    PodName: NonEmpty
    PodNamespace: NonEmpty
    PodUID: NonEmpty
    Node: NonEmpty


Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
"""Go's int64 (NumPDBViolations)."""


class MetaPod(msgspec.Struct):
    UID: str


class MetaVictims(msgspec.Struct):
    Pods: list[MetaPod] | None = None
    NumPDBViolations: Int64 = 0


class VictimMeta(msgspec.Struct):
    uid: str


class VictimPod(msgspec.Struct):
    metadata: VictimMeta


class Victims(msgspec.Struct):
    Pods: list[VictimPod] | None = None
    NumPDBViolations: Int64 = 0


class ExtenderPreemptionArgs(msgspec.Struct):
    """The body of preempt: candidate nodes with their victims, as whole pods or UIDs
    (nodeCacheCapable); we answer in UIDs."""

    Pod: Pod
    NodeNameToVictims: dict[str, Victims] | None = None
    NodeNameToMetaVictims: dict[str, MetaVictims] | None = None


class ExtenderFilterResult(msgspec.Struct):
    Nodes: dict[str, Any] | None
    NodeNames: list[str] | None
    FailedNodes: dict[str, str]
    FailedAndUnresolvableNodes: dict[str, str]
    Error: str


class HostPriority(msgspec.Struct):
    Host: str
    Score: Annotated[int, msgspec.Meta(ge=0, le=10)]


HostPriorityList = list[HostPriority]


class ExtenderBindingResult(msgspec.Struct):
    Error: str


class ExtenderPreemptionResult(msgspec.Struct):
    NodeNameToMetaVictims: dict[str, MetaVictims]


class Error(msgspec.Struct):
    """Any 4xx of ours: what is wrong with the request."""

    Error: str


REQUESTS: dict[str, type[msgspec.Struct]] = {
    "filter": ExtenderArgs,
    "prioritize": ExtenderArgs,
    "bind": ExtenderBindingArgs,
    "preempt": ExtenderPreemptionArgs,
}
"""verb -> the body it takes."""

ANSWERS: dict[str, Any] = {
    "filter": ExtenderFilterResult,
    "prioritize": HostPriorityList,
    "bind": ExtenderBindingResult,
    "preempt": ExtenderPreemptionResult,
}
"""verb -> what it answers with 200."""
