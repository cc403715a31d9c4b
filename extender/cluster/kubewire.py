"""The message format between the verbs' process and its Kubernetes-side process
(cluster.kubeside, cluster.kubeworker), over the child's stdin and stdout.

A frame is a 4-byte big-endian length, then that many bytes of JSON (orjson):

- a call, parent to child: `{"v": 1, "id": N, "op": "bind" | "get_pod" | "event",
  "args": [...]}`;
- its answer, child to parent: `{"v": 1, "id": N, "ok": VALUE}`, or `{"v": 1, "id": N,
  "err": {"kind": "KubeError" | "KubeAlreadyBound" | "KubeUnavailable", "status": int |
  null, "reason": str, "message": str, "node": str | null}}`.

`v` is the format's version: either side refuses a frame of another version (the two
processes always come from the same image; the check turns a mismatch into an error
named as such instead of a misread call). A frame is at most `MAX_FRAME` bytes.
"""

from __future__ import annotations

import struct
from typing import Any

import orjson

from extender.cluster.client.errors import KubeAlreadyBound, KubeError, KubeUnavailable

VERSION = 1
MAX_FRAME = 1 << 20
_LENGTH = struct.Struct(">I")
HEADER = _LENGTH.size


class WireProblem(Exception):
    """A frame that is not one of this format's."""


def frame(message: dict[str, Any]) -> bytes:
    body = orjson.dumps({"v": VERSION, **message})
    if len(body) > MAX_FRAME:
        raise WireProblem(f"a frame of {len(body)} bytes is over {MAX_FRAME}")
    return _LENGTH.pack(len(body)) + body


def length(header: bytes) -> int:
    (size,) = _LENGTH.unpack(header)
    if size > MAX_FRAME:
        raise WireProblem(f"a frame of {size} bytes is over {MAX_FRAME}")
    return int(size)


def message(body: bytes) -> dict[str, Any]:
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise WireProblem(f"a frame is not JSON: {exc}") from exc
    if not isinstance(decoded, dict) or decoded.get("v") != VERSION:
        got = decoded.get("v") if isinstance(decoded, dict) else None
        raise WireProblem(f"a frame of version {got!r}, this side speaks {VERSION}")
    if not isinstance(decoded.get("id"), int):
        raise WireProblem("a frame without an id")
    return decoded


def error_fields(exc: BaseException) -> dict[str, Any]:
    """What an answer carries of a failed call."""
    if isinstance(exc, KubeError):
        return {
            "kind": type(exc).__name__
            if isinstance(exc, KubeAlreadyBound | KubeUnavailable)
            else "KubeError",
            "status": exc.status,
            "reason": exc.reason,
            "message": exc.message,
            "node": getattr(exc, "node", None),
        }
    return {
        "kind": "KubeError",
        "status": None,
        "reason": "InternalError",
        "message": f"{type(exc).__name__}: {exc}",
        "node": None,
    }


def error_of(fields: dict[str, Any]) -> KubeError:
    """The exception an answer's `err` stands for, as the client would have raised it."""
    message_text = str(fields.get("message") or "")
    status = fields.get("status")
    status = status if isinstance(status, int) else None
    reason = str(fields.get("reason") or "")
    kind = fields.get("kind")
    if kind == "KubeAlreadyBound":
        return KubeAlreadyBound(
            message_text, node=str(fields.get("node") or ""), status=status, reason=reason
        )
    if kind == "KubeUnavailable":
        return KubeUnavailable(message_text, status=status, reason=reason)
    return KubeError(message_text, status=status, reason=reason)
