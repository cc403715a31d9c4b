"""The pod watch's filter: event lines that change nothing the service keeps are dropped as
raw bytes, before they are decoded. The service uses a pod's first line with a node or a
nomination (cluster.podwatch) and the lines of a pod going (DELETED, `deletionTimestamp`,
a terminal phase); a pod's node never changes once set (`settle`), unless the herd guard
holds it and an in-place resize bumps its generation (`track`).

Each test is a C-level substring search of the API server's JSON (no spaces, fields in Go
struct order, quotes in values escaped): `deletionTimestamp` just after `resourceVersion`,
the phase at the last `"phase":"` (status is a Pod's last field). A line kept by mistake is
only decoded as before; BOOKMARK and ERROR lines are always kept. Each line's
resourceVersion is read, so a watch resumes after the last line, dropped or not.
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
"""ObjectMeta writes `deletionTimestamp` and `generation` soon after `resourceVersion`."""


class PodWatchFilter:
    """`watch_filter(line)`: False for a pod watch event line the handler would do nothing with."""

    def __init__(self) -> None:
        self._settled: set[bytes] = set()  # UIDs of pods read as assigned
        self._nominated: set[bytes] = set()  # UIDs counted on their nominated node
        self._generations: dict[bytes, bytes] = {}  # held settled pods -> their generation
        self._version: bytes | bytearray = b""
        self.dropped = 0

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
        (self._nominated.add if counted else self._nominated.discard)(uid.encode())

    def track(self, uid: str, generation: object) -> None:
        """Keep the settled pod's lines of another `metadata.generation` (None: stop)."""
        key = uid.encode()
        if generation is None:
            self._generations.pop(key, None)
        else:
            self._generations[key] = str(generation).encode()

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
        # Ordered by cost: the keys near the start are found at once.
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
        phase = line.rfind(_PHASE)
        if phase != -1 and line.startswith(_TERMINAL, phase + len(_PHASE)):
            return True
        self.dropped += 1
        return False

    @staticmethod
    def _nominated_in(line: bytearray) -> bool:
        """The pod's status (its last field) names a nominated node."""
        at = line.rfind(_STATUS)
        return at != -1 and line.find(_NOMINATED, at) != -1

    @staticmethod
    def _generation(line: bytearray, rv: int) -> bytes:
        """`metadata.generation` of a pod line, near `resourceVersion` (b"": none)."""
        at = line.find(_GENERATION, max(rv, 0), (rv + _META_WINDOW) if rv != -1 else len(line))
        if at == -1:
            return b""
        at += len(_GENERATION)
        end = at
        while end < len(line) and 48 <= line[end] <= 57:
            end += 1
        return bytes(line[at:end])
