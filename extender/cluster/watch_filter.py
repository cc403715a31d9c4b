"""The pod watch's filter: events that change nothing the service keeps are dropped as raw
bytes, before they are decoded.

A pod watch without a selector sees every update of every pod: the kubelets' status
reports of running pods, other schedulers' pending pods. The service uses few of them
(cluster.podwatch): a pod's first event with `spec.nodeName` (a new assignment, for the
herd guard, requeue, the shadow), and a pod deleted, being deleted or finished (its
reservation released, a turned-away pod forgotten). So a line is dropped when

- the pod has no node (no `"nodeName":"` key in the line) and no nomination (no
  `"nominatedNodeName":"`, and not one the handler counts as nominated: `nominate`), or
  its UID is one the handler already read as assigned (`settle`): a pod's node never
  changes once set, and its assignment counted (or was too old to count) the first time,
  unless the herd guard still holds it and its spec changed (`track`: an in-place resize
  bumps `metadata.generation`, and what the pod counts at changes with it);
- and nothing in it says the pod is going: not a DELETED event, no `deletionTimestamp`,
  no terminal phase.

Each test is a C-level substring search of the line (the JSON the API server writes:
keys in quotes, no spaces, an object's fields in its Go struct's order; a quote inside a
string value is escaped, so `"key":"` only matches a key): `deletionTimestamp` is looked
for just after `resourceVersion` (ObjectMeta's order), the phase at the last `"phase":"`
(status is a Pod's last field, phase its first), the rest over the line. A line kept by
mistake is only decoded as before. BOOKMARK and ERROR lines are always kept. The tests cost
a fraction of decoding the line (BENCHMARKS.md, "The pod watch pays only for what it
uses").

The filter also reads each line's `metadata.resourceVersion` (the first such key of a pod
line: ObjectMeta writes it before labels and annotations, and no other field of a Pod
has one), so a watch that ends after dropped lines resumes from the last line it read.
"""

from __future__ import annotations

from collections.abc import Collection

_VERSION = b'"resourceVersion":"'
_GENERATION = b'"generation":'
_UID = b'"uid":"'
_NODE = b'"nodeName":"'
_NOMINATED = b'"nominatedNodeName":"'
_STATUS = b'"status":{'
_DELETING = b'"deletionTimestamp"'
_PHASE = b'"phase":"'
_FILTERED_TYPES = (b'{"type":"MODIFIED"', b'{"type":"ADDED"')
_TERMINAL = (b"Succeeded", b"Failed")
_META_WINDOW = 256
"""ObjectMeta writes `deletionTimestamp` right after `resourceVersion`, `generation` and
`creationTimestamp` (its Go struct's order), before labels and annotations."""


class PodWatchFilter:
    """`watch_filter(line)`: False for a pod watch event line the handler would do nothing with."""

    def __init__(self) -> None:
        self._settled: set[bytes] = set()
        """UIDs (as bytes) of the pods read as assigned: their updates change nothing."""
        self._nominated: set[bytes] = set()
        """UIDs of pods counted on their nominated node: every line of theirs is kept."""
        self._generations: dict[bytes, bytes] = {}
        """Settled pods the herd guard still holds -> their `metadata.generation` then."""
        self._version: bytes | bytearray = b""
        self.dropped = 0
        """Lines dropped since the start."""

    def __len__(self) -> int:
        return len(self._settled)

    def settle(self, uid: str) -> None:
        """The handler read the pod as assigned: its later updates can be dropped."""
        self._settled.add(uid.encode())

    def forget(self, uid: str) -> None:
        """The pod is gone (deleted or finished)."""
        key = uid.encode()
        self._settled.discard(key)
        self._nominated.discard(key)
        self._generations.pop(key, None)

    def nominate(self, uid: str, counted: bool) -> None:
        """The handler counts (or stopped counting) the pod on its nominated node."""
        if counted:
            self._nominated.add(uid.encode())
        else:
            self._nominated.discard(uid.encode())

    def track(self, uid: str, generation: object) -> None:
        """Keep the settled pod's lines whose `metadata.generation` is not `generation`
        (None: stop): the herd guard holds it, and a resize changes what it counts."""
        key = uid.encode()
        if generation is None:
            self._generations.pop(key, None)
        else:
            self._generations[key] = str(generation).encode()

    @property
    def tracked(self) -> int:
        """Pods kept an eye on: nominated, or held with their generation."""
        return len(self._nominated) + len(self._generations)

    def keep_only(self, uids: Collection[str]) -> None:
        """A whole list replaced the watch: the pods it lacks are gone."""
        listed = {uid.encode() for uid in uids}
        self._settled &= listed
        self._generations = {k: g for k, g in self._generations.items() if k in listed}

    @property
    def version(self) -> str:
        """The resourceVersion of the last line read (kept or dropped)."""
        return self._version.decode("ascii", "replace")

    @version.setter
    def version(self, value: str) -> None:
        self._version = value.encode()

    def __call__(self, line: bytearray) -> bool:
        # Ordered by cost: each `in` over a whole line scans some 2 KiB; the keys near
        # the start are found at once.
        rv = line.find(_VERSION)
        if rv != -1:
            start = rv + len(_VERSION)
            end = line.find(b'"', start)
            if end != -1:
                self._version = line[start:end]
        if not line.startswith(_FILTERED_TYPES):
            return True  # DELETED, BOOKMARK, ERROR, or a line we cannot read: decoded
        at = line.find(_UID)
        if at == -1:
            return True
        at += len(_UID)
        end = line.find(b'"', at)
        if end == -1:
            return True
        uid = bytes(line[at:end])
        if uid in self._nominated:
            return True  # nominated: its nomination may move, clear or become a bind
        settled = uid in self._settled
        if not settled and (_NODE in line or self._nominated_in(line)):
            return True  # a new assignment, or a new nomination
        if (
            settled
            and uid in self._generations
            and self._generation(line, rv) != (self._generations[uid])
        ):
            return True  # a held pod's spec changed (an in-place resize)
        # Settled, or without a node: kept only when the pod is going.
        if rv == -1:
            if _DELETING in line:
                return True
        elif line.find(_DELETING, rv, rv + _META_WINDOW) != -1:
            return True
        # status.phase is the status' first field, the status the object's last: the
        # phase is the last `"phase":"` of the line.
        phase = line.rfind(_PHASE)
        if phase != -1 and line.startswith(_TERMINAL, phase + len(_PHASE)):
            return True
        self.dropped += 1
        return False

    @staticmethod
    def _nominated_in(line: bytearray) -> bool:
        """The pod's status names a nominated node. The status is a pod's last field, so the
        search starts at its key, found from the end (a status holds no object `"status"`)."""
        at = line.rfind(_STATUS)
        return at != -1 and line.find(_NOMINATED, at) != -1

    @staticmethod
    def _generation(line: bytearray, rv: int) -> bytes:
        """`metadata.generation` of a pod line: ObjectMeta writes it right after
        `resourceVersion` (b"" when the line has none)."""
        at = line.find(_GENERATION, max(rv, 0), (rv + _META_WINDOW) if rv != -1 else len(line))
        if at == -1:
            return b""
        at += len(_GENERATION)
        end = at
        while end < len(line) and 48 <= line[end] <= 57:
            end += 1
        return bytes(line[at:end])
