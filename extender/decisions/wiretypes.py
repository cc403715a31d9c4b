"""The one schema of k8s.io/kube-scheduler/extender/v1 (Go field names: no json tags) as
msgspec Structs narrowed to the fields we read: wire.py decodes with `REQUESTS`, and
service.openapi derives its document from them. `Pod` (read by decisions.pods.read_pod,
as the API path's pods) and a full `Nodes` list (answered back as it came) are kept as
JSON text and documented by a Struct here. Pure.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

SCHEMA_REF = "#/components/schemas/{name}"  # in the OpenAPI document

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


PodText = Annotated[
    msgspec.Raw, msgspec.Meta(extra_json_schema={"$ref": SCHEMA_REF.format(name="Pod")})
]
"""A Pod kept as JSON text."""
NodeListText = Annotated[
    msgspec.Raw,
    msgspec.Meta(
        extra_json_schema={
            "anyOf": [{"$ref": SCHEMA_REF.format(name="NodeList")}, {"type": "null"}]
        }
    ),
]
"""A NodeList or null kept as JSON text (msgspec takes no `Raw | None`); see `sent`."""


def sent(text: msgspec.Raw) -> bool:
    """Whether a field kept as text came, and not as null."""
    return len(text) > 0 and bytes(memoryview(text)[:5]) != b"null"


DOCUMENTED = (Pod, NodeList)  # the OpenAPI components of the fields kept as text


class ExtenderArgs(msgspec.Struct):
    """The body of filter and prioritize: the pod, and the nodes in one of two forms."""

    Pod: PodText
    NodeNames: NodeNames | None = None
    Nodes: NodeListText = msgspec.field(default_factory=msgspec.Raw)

    def __post_init__(self) -> None:
        if self.NodeNames is None and not sent(self.Nodes):
            raise ValueError("both NodeNames and Nodes are null; send one of them")


class ExtenderBindingArgs(msgspec.Struct):
    """The body of bind: which pod goes to which node."""

    # The binder reads these under their Python names.
    pod_name: NonEmpty = msgspec.field(name="PodName")
    pod_namespace: NonEmpty = msgspec.field(name="PodNamespace")
    pod_uid: NonEmpty = msgspec.field(name="PodUID")
    node: NonEmpty = msgspec.field(name="Node")


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

    Pod: PodText
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
