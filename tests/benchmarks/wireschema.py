"""Parsing a filter/prioritize body: the parse before issue 38 (orjson, then a check of
each name) against typed decodes by msgspec and by pydantic, and the parse the service
uses now (extender.decisions.wire: msgspec types the names, orjson decodes the pod).

    python -m tests.benchmarks.wireschema [--nodes 5000] [--runs 3] [--quick]

Every contender returns what the request path needs: the pod's facts (read_pod, the same
for all) and the node names, each checked to be a non-empty string. The body is the
captured scheduler pod with `--nodes` cloud-style NodeNames (bench.request_body). Rows:

- before: orjson, then two C-level passes over the names (`before_parse`, the code
  wire.py had, kept here to compare against);
- msgspec: `msgspec.json.decode` into a Struct whose NodeNames are
  `list[Annotated[str, Meta(min_length=1)]]`, the Pod decoded as a dict for read_pod;
- pydantic: `model_validate_json` on a model of the same shape (StringConstraints);
- now: `wire.parse_extender_args`, the msgspec row with the pod kept as JSON text and
  decoded by orjson;
- and /prioritize's form of before and now: the names also looked up in the policy's
  answered nodes (one set check that spares the engine a lookup per name).

Each run times a bounded loop with the collector paused (as the verbs run), in this
process; prints the median per call of `--runs` runs. Needs msgspec (the test extras);
asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
import orjson
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from extender.decisions.pods import PodFacts, read_pod
from extender.decisions.wire import parse_extender_args
from tests.benchmarks.bench import node_names, request_body


class MsgspecArgs(msgspec.Struct):
    Pod: dict[str, Any]
    NodeNames: list[Annotated[str, msgspec.Meta(min_length=1)]] | None = None
    Nodes: dict[str, Any] | None = None


class PydanticArgs(BaseModel):
    model_config = ConfigDict(extra="ignore")
    Pod: dict[str, Any]
    NodeNames: list[Annotated[str, StringConstraints(min_length=1)]] | None = Field(default=None)
    Nodes: dict[str, Any] | None = None


_MSGSPEC = msgspec.json.Decoder(MsgspecArgs)


def with_msgspec(body: bytes) -> tuple[PodFacts, list[str]]:
    args = _MSGSPEC.decode(body)
    return read_pod(args.Pod), args.NodeNames or []


def with_pydantic(body: bytes) -> tuple[PodFacts, list[str]]:
    args = PydanticArgs.model_validate_json(body)
    return read_pod(args.Pod), args.NodeNames or []


def before_parse(
    body: bytes, answered: frozenset[str] | None = None
) -> tuple[PodFacts, list[str], bool]:
    """The parse of NodeNames-form ExtenderArgs before issue 38: orjson, read_pod, then
    the names found in `answered` (one set check) or checked by two C-level passes."""
    data = orjson.loads(body)
    pod = read_pod(data["Pod"])
    names = data["NodeNames"]
    if answered is not None and len(names) == len(answered) and answered.issuperset(names):
        return pod, names, True
    try:
        "".join(names)
        ok = all(names)
    except TypeError:
        ok = False
    if not ok:
        raise ValueError("a name that is not a non-empty string")
    return pod, names, False


def per_call_us(parse: Callable[[bytes], object], body: bytes, loops: int, seconds: float) -> float:
    times: list[float] = []
    deadline = time.monotonic() + seconds
    gc.disable()
    try:
        while len(times) < loops and time.monotonic() < deadline:
            start = time.perf_counter()
            parse(body)
            times.append(time.perf_counter() - start)
    finally:
        gc.enable()
    return statistics.median(times) * 1e6


def rows(n: int, loops: int, seconds: float) -> dict[str, float]:
    names = node_names(n)
    body = request_body(names, "names")
    exact = frozenset(names)
    # Every contender reads the same pod and names.
    now = parse_extender_args(body)
    assert with_msgspec(body) == (now.pod, now.names) == with_pydantic(body)
    assert before_parse(body)[:2] == (now.pod, now.names)
    return {
        f"before: orjson + name checks, {n:,} names": per_call_us(
            before_parse, body, loops, seconds
        ),
        f"msgspec Struct, {n:,} names": per_call_us(with_msgspec, body, loops, seconds),
        f"pydantic model_validate_json, {n:,} names": per_call_us(
            with_pydantic, body, loops, seconds
        ),
        f"now: wire.parse_extender_args, {n:,} names": per_call_us(
            parse_extender_args, body, loops, seconds
        ),
        f"before, prioritize (names in the answer's set), {n:,} names": per_call_us(
            lambda b: before_parse(b, exact), body, loops, seconds
        ),
        f"now, prioritize (names in the answer's set), {n:,} names": per_call_us(
            lambda b: parse_extender_args(b, lambda pod: exact), body, loops, seconds
        ),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="100 names, short loops")
    args = p.parse_args(argv)
    n, loops, seconds = (100, 100, 0.2) if args.quick else (args.nodes, 3000, 3.0)
    runs = [rows(n, loops, seconds) for _ in range(args.runs)]
    width = max(map(len, runs[0]))
    print(f"{'parse':<{width}}  median us per call (runs)")
    for key in runs[0]:
        values = [r[key] for r in runs]
        spread = ", ".join(f"{v:.1f}" for v in values)
        print(f"{key:<{width}}  {statistics.median(values):8.1f}  ({spread})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
