"""A bounded load test against the real uvicorn server (subprocess): 12,000 mixed filter /
prioritize / bind requests (2,000 warm-up + 10,000 measured) over 32 keep-alive
connections, binds going to FakeKubeAPI through a kubeconfig. Zero errors, no pod bound
twice, RSS flat after warm-up. Loopback only; bounded in count and in time (60 s)."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from pathlib import Path

import orjson

from tests.harness.counts import COUNTS
from tests.harness.kubeapi import FakeKubeAPI, write_kubeconfig
from tests.harness.service import LOCALHOST, rss_kib, running_service
from tests.harness.stack import NS, binding_args, extender_args, policy

CONCURRENCY = 32
WARMUP_PODS = 500
PODS = 2_500  # x 4 requests: filter, prioritize, bind, the scheduler's bind retry
TIME_LIMIT = 60.0
# The pod memory and the bound-UID map keep ~2 KiB per new pod (bounded at 10,000 each):
# 2,500 new pods after warm-up account for ~5 MiB; a leak per request would be far more.
RSS_TOLERANCE_KIB = 12 * 1024
NODE_NAMES = ["node-1", "node-2", "node-3", "node-4", "node-5"]
PASSING = ["node-1", "node-2", "node-3", "node-4"]  # node-5 is above the threshold


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, await reader.readexactly(length)


def request(verb: str, body: bytes) -> bytes:
    return (
        f"POST /{verb} HTTP/1.1\r\nHost: {LOCALHOST}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def pod_requests(i: int, rng: random.Random) -> list[tuple[str, bytes]]:
    name, uid = f"load-{i}", f"00000000-0000-4000-8000-{i:012d}"
    args = orjson.dumps(extender_args(uid, name, NODE_NAMES))
    bind = orjson.dumps(binding_args(uid, name, rng.choice(PASSING)))
    return [("filter", args), ("prioritize", args), ("bind", bind), ("bind", bind)]


async def drive(port: int, pods: range, seed: int) -> Counter[str]:
    """Every pod's requests in order on one connection; CONCURRENCY connections at once."""
    rng = random.Random(seed)
    queue: asyncio.Queue[list[tuple[str, bytes]]] = asyncio.Queue()
    for i in pods:
        queue.put_nowait(pod_requests(i, rng))
    outcome: Counter[str] = Counter()

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(LOCALHOST, port)
        try:
            while not queue.empty():
                for verb, body in queue.get_nowait():
                    writer.write(request(verb, body))
                    status, answer = await read_response(reader)
                    outcome["requests"] += 1
                    outcome[f"{verb} {status}"] += 1
                    if status >= 500:
                        outcome["5xx"] += 1
                    if status != 200:
                        outcome["errors"] += 1
                    elif verb != "prioritize" and orjson.loads(answer)["Error"] != "":
                        outcome["errors"] += 1
                        outcome[f"error: {orjson.loads(answer)['Error'][:120]}"] += 1
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return outcome


def test_load_mixed_verbs(tmp_path: Path) -> None:
    started = time.monotonic()
    with FakeKubeAPI(token="load-token") as api:
        for i in range(WARMUP_PODS + PODS):
            api.add_pod(NS, f"load-{i}", f"00000000-0000-4000-8000-{i:012d}")
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, "load-token")
        raw = policy(
            server={"gracePeriod": 5},
            bind={"enabled": True, "timeout": 5, "retries": 2},
            explain={"events": True},  # Events on every bind, under load, rate-limited
        )
        raw["prometheus"] = {"interval": 1}  # the static provider refreshes each second
        # The herd guard stays on (each bind reserves CPU and patches the table), on nodes
        # big enough that 3,000 pods do not fill them: full nodes would be filtered and the
        # binds refused, which is the guard working, not an error of the service.
        raw["herdGuard"] = {"enabled": True, "defaultNodeCores": 1e6, "settle": 1}
        with running_service(
            raw, tmp_path, {"KUBECONFIG": str(kubeconfig)}, log_level="warning"
        ) as svc:
            warm = asyncio.run(asyncio.wait_for(drive(svc.port, range(WARMUP_PODS), 1), TIME_LIMIT))
            rss_warm = rss_kib(svc.pid)
            t0 = time.monotonic()
            main = asyncio.run(
                asyncio.wait_for(
                    drive(svc.port, range(WARMUP_PODS, WARMUP_PODS + PODS), 2), TIME_LIMIT
                )
            )
            elapsed = time.monotonic() - t0
            rss_end = rss_kib(svc.pid)
            _, metrics = svc.get("/metrics")
            assert svc.alive()
            code = svc.stop()
        bound = [api.bind_count(NS, f"load-{i}") for i in range(WARMUP_PODS + PODS)]
        posts = sum(1 for r in api.requests if r.method == "POST" and "/binding" in r.path)
        events = len(api.events)
        evented = {e["regarding"]["uid"] for e in api.events}
    total = warm + main
    COUNTS["load requests sent"] += total["requests"]
    COUNTS["load errors"] += total["errors"]
    COUNTS["load 5xx"] += total["5xx"]
    COUNTS["load req/s (measured phase)"] = int(main["requests"] / elapsed)
    COUNTS["load RSS growth after warm-up (KiB)"] = rss_end - rss_warm
    print(
        f"\nload: {dict(total)}; {main['requests'] / elapsed:.0f} req/s; "
        f"RSS {rss_warm} -> {rss_end} KiB; total {time.monotonic() - started:.1f}s"
    )
    assert main["requests"] >= 10_000 and total["requests"] == 4 * (WARMUP_PODS + PODS)
    assert total["errors"] == 0 and total["5xx"] == 0, total
    assert set(bound) == {1}  # every pod bound exactly once
    assert posts == WARMUP_PODS + PODS  # the bind retries made no API call
    # Events are best-effort, 5 a second: some were posted, none twice, the rest dropped
    assert 0 < events == len(evented)
    assert b'decice_events_total{outcome="posted"}' in metrics
    assert rss_end - rss_warm < RSS_TOLERANCE_KIB, (rss_warm, rss_end)
    assert b'decice_requests_total{code="200",verb="bind"} 6000.0' in metrics
    assert code == 0
    json.dumps(dict(total))  # keep the outcome serialisable for the report
