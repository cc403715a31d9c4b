"""The pod watch's sieve: events that change nothing the service keeps are dropped as raw
bytes, before they are decoded.

A pod watch without a selector sees every update of every pod: the kubelets' status
reports of running pods, other schedulers' pending pods. The service uses few of them
(cluster.podwatch): a pod's first event with `spec.nodeName` (a new assignment, for the
herd guard, requeue, the shadow), and a pod deleted, being deleted or finished (its
reservation released, a turned-away pod forgotten). So a line is dropped when

- the pod has no node (no `"nodeName":"` key in the line: the handler reads such a pod as
  waiting, and does nothing with it), or its UID is one the handler already read as
  assigned (`settle`): a pod's node never changes once set, and its assignment counted
  (or was too old to count) the first time;
- and nothing in it says the pod is going: not a DELETED event, no `deletionTimestamp`,
  no terminal phase.

Each test is a C-level substring search of the line (the JSON the API server writes:
keys in quotes, no spaces; a quote inside a string value is escaped, so `"key":"` only
matches a key). A line kept by mistake is only decoded as before; a line is dropped only
when the check above is certain. BOOKMARK and ERROR lines are always kept.

The sieve also reads each line's `metadata.resourceVersion` (the first such key of a pod
line: ObjectMeta writes it before labels and annotations, and no other field of a Pod
has one), so a watch that ends after dropped lines resumes from the last line it read.
"""

from __future__ import annotations

from collections.abc import Collection

_VERSION = b'"resourceVersion":"'
_UID = b'"uid":"'
_NODE = b'"nodeName":"'
_GOING = (b'"deletionTimestamp"', b'"phase":"Succeeded"', b'"phase":"Failed"')
_SIFTED_TYPES = (b'"ADDED"', b'"MODIFIED"')
_HEAD = 32
"""The event's type is its first key: `{"type":"MODIFIED","object":...`."""


class PodSieve:
    """`sieve(line)`: False for a pod watch event line the handler would do nothing with."""

    def __init__(self) -> None:
        self._settled: set[bytes] = set()
        """UIDs (as bytes) of the pods read as assigned: their updates change nothing."""
        self.version = ""
        """The resourceVersion of the last line read (kept or dropped)."""
        self.dropped = 0
        """Lines dropped since the start."""

    def __len__(self) -> int:
        return len(self._settled)

    def settle(self, uid: str) -> None:
        """The handler read the pod as assigned: its later updates can be dropped."""
        self._settled.add(uid.encode())

    def forget(self, uid: str) -> None:
        """The pod is gone (deleted or finished)."""
        self._settled.discard(uid.encode())

    def keep_only(self, uids: Collection[str]) -> None:
        """A whole list replaced the watch: the pods it lacks are gone."""
        listed = {uid.encode() for uid in uids}
        self._settled &= listed

    def __call__(self, line: bytes | bytearray) -> bool:
        start = line.find(_VERSION)
        if start != -1:
            start += len(_VERSION)
            end = line.find(b'"', start)
            if end != -1:
                self.version = line[start:end].decode("ascii", "replace")
        head = line[:_HEAD]
        if not any(kind in head for kind in _SIFTED_TYPES):
            return True  # DELETED, BOOKMARK, ERROR, or a line we cannot read: decoded
        if any(word in line for word in _GOING):
            return True
        if _NODE in line:
            at = line.find(_UID)
            if at == -1:
                return True
            at += len(_UID)
            end = line.find(b'"', at)
            if end == -1 or bytes(line[at:end]) not in self._settled:
                return True
        self.dropped += 1
        return False
