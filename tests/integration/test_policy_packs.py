"""The policy packs of config/policies/, each run unchanged on a real Prometheus.

One Prometheus (module scope) scrapes one endpoint serving every pack's input with the
exporters' real metric names and label sets: node-exporter's raw counters and gauges and
kube-state-metrics' `kube_pod_info` (as kube-prometheus-stack scrapes them), NVIDIA DCGM
exporter's per-GPU gauges and Kepler's per-node joules counters. Prometheus computes the
kube-prometheus-stack recording rules the packs read itself: the real ones in
kube-prometheus-stack-rules.yaml, and NODE_RULES below (copied from the chart's
node-exporter.rules group) for memory and disk. Seven minutes of counter history are
backfilled with promtool first, so `[5m]` rates are whole from the first scrape.
Each pack runs on VictoriaMetrics too (`packs_prometheus` is parametrized): the same
series scraped by it, the same rules run by vmalert, the same history imported.

Each pack is loaded with the extender's own loader (only PROMETHEUS_URL set), served by
`build_service`, and asked to prioritize and filter: the scores must order the nodes as
the values say and the filter must reject exactly the node above the threshold.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from extender.policy.loading import load_settings
from extender.policy.settings import Settings
from extender.service.compose import build_service
from tests.harness.prometheus_fixtures import BACKENDS, metrics_server
from tests.harness.promharness import MetricsServer, StockExporter, approx_values, format_value

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "config" / "policies"
DOCS = ROOT / "docs" / "configuration.md"
STOCK_RULES = Path(__file__).with_name("kube-prometheus-stack-rules.yaml")

# The rules of kube-prometheus-stack's node-exporter.rules group that the memory and disk
# packs read (kube-prometheus-stack-rules.yaml holds only the CPU ones): the same
# expressions, only re-wrapped.
NODE_RULES = """\
groups:
  - name: node-exporter.rules
    rules:
      - record: instance:node_memory_utilisation:ratio
        expr: |-
          1 - (
            (
              node_memory_MemAvailable_bytes{job="node-exporter"}
              or
              (
                node_memory_Buffers_bytes{job="node-exporter"}
                +
                node_memory_Cached_bytes{job="node-exporter"}
                +
                node_memory_MemFree_bytes{job="node-exporter"}
                +
                node_memory_Slab_bytes{job="node-exporter"}
              )
            )
          /
            node_memory_MemTotal_bytes{job="node-exporter"}
          )
      - record: instance_device:node_disk_io_time_seconds:rate5m
        expr: |-
          rate(node_disk_io_time_seconds_total{job="node-exporter",
            device=~"(/dev/)?(mmcblk.p.+|nvme.+|rbd.+|sd.+|vd.+|xvd.+|dm-.+|md.+|dasd.+)"}[5m])
"""

NODES = ["node-1", "node-2", "node-3"]
#: A node the API would list with no GPU (no DCGM series at all).
CPU_ONLY_NODE = "node-4"

# What each node does. Chosen so that no score sits on a rounding edge.
CPU = {"node-1": 0.1, "node-2": 0.4, "node-3": 0.3}
MEMORY = {"node-1": 0.78, "node-2": 0.2, "node-3": 0.96}
#: Busy seconds per second of each disk; loop devices are not disks (the rule drops them).
DISK = {
    "node-1": {"sda": 0.1, "nvme0n1": 0.3},
    "node-2": {"sda": 0.97, "nvme0n1": 0.2},
    "node-3": {"sda": 0.04, "nvme0n1": 0.02, "loop0": 0.99},
}
#: Utilisation (%) of each GPU.
GPUS = {"node-1": [10.0, 30.0], "node-2": [90.0, 100.0, 80.0, 60.0], "node-3": [40.0]}
#: Watts per Kepler mode.
POWER = {
    "node-1": {"dynamic": 80.0, "idle": 60.0},
    "node-2": {"dynamic": 250.0, "idle": 100.0},
    "node-3": {"dynamic": 20.0, "idle": 50.0},
}
MEM_TOTAL = 16.0 * 1024**3


def _sample(name: str, labels: dict[str, str], value: float, at: float | None = None) -> str:
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    stamp = "" if at is None else f" {at:.3f}"
    return f"{name}{{{body}}} {format_value(value)}{stamp}\n"


def _memory_fields(used: float) -> dict[str, float]:
    """node-exporter's /proc/meminfo gauges (bytes) of a node with `used` of its memory in use."""
    free = (1 - used) * MEM_TOTAL
    return {
        "MemTotal": MEM_TOTAL,
        "MemAvailable": free,
        "MemFree": 0.4 * free,
        "Buffers": 0.1 * free,
        "Cached": 0.3 * free,
        "Slab": 0.05 * MEM_TOTAL,
    }


class PackExporter(StockExporter):
    """StockExporter's node-exporter CPU counters and kube_pod_info, plus the series of
    node-exporter (memory, disks), DCGM exporter and Kepler every pack reads.

    Counters grow linearly from ``t0`` at their per-second rate, so ``history()`` and the
    live scrapes are one continuous series and ``rate()`` gives the rate back.
    """

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        super().__init__()

    # -- series
    def _counter_series(self) -> list[tuple[str, dict[str, str], float]]:
        """(sample name, labels, increase per second) of every counter we add."""
        out = []
        for node in NODES:
            for device, busy in DISK[node].items():
                labels = {**self._target(node), "device": device}
                out.append(("node_disk_io_time_seconds_total", labels, busy))
        for node in NODES:
            kepler = {
                "container": "kepler-exporter",
                "endpoint": "http",
                "instance": node,  # Kepler's ServiceMonitor relabels the node name in
                "job": "kepler-exporter",
                "namespace": "kepler",
                "pod": f"kepler-exporter-{node}",
                "service": "kepler-exporter",
            }
            for mode, watts in POWER[node].items():
                labels = {**kepler, "mode": mode, "source": "acpi"}
                out.append(("kepler_node_platform_joules_total", labels, watts))
        return out

    def _value(self, per_second: float, t: float) -> float:
        return 1000.0 + per_second * (t - self.t0)

    def _gauges(self) -> str:
        lines = []
        memory = {node: _memory_fields(MEMORY[node]) for node in NODES}
        for field in memory[NODES[0]]:
            name = f"node_memory_{field}_bytes"
            lines.append(f"# TYPE {name} gauge\n")
            for node in NODES:
                lines.append(_sample(name, self._target(node), memory[node][field]))
        lines.append("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n")
        for k, node in enumerate(NODES):
            for i, util in enumerate(GPUS[node]):
                labels = {
                    "gpu": str(i),
                    "UUID": f"GPU-{k:08x}-0000-0000-0000-{i:012x}",
                    "device": f"nvidia{i}",
                    "modelName": "NVIDIA A100-SXM4-80GB",
                    "Hostname": node,
                    "DCGM_FI_DRIVER_VERSION": "550.54.15",
                    "pci_bus_id": f"00000000:{0x10 + i:02X}:00.0",
                    "container": "nvidia-dcgm-exporter",
                    "endpoint": "gpu-metrics",
                    "instance": f"10.244.{k}.7:9400",
                    "job": "nvidia-dcgm-exporter",
                    "namespace": "gpu-operator",
                    "pod": f"nvidia-dcgm-exporter-{node}",
                    "service": "nvidia-dcgm-exporter",
                }
                if i == 0:  # a GPU given to a pod: its labels, renamed by the scrape
                    labels |= {
                        "exported_container": "trainer",
                        "exported_namespace": "ml",
                        "exported_pod": f"train-{node}",
                    }
                lines.append(_sample("DCGM_FI_DEV_GPU_UTIL", labels, util))
        return "".join(lines)

    def _counters_at(self, t: float) -> str:
        lines = []
        family = ""
        for name, labels, rate in self._counter_series():
            if name != family:
                family = name
                lines.append(f"# TYPE {name} counter\n")
            lines.append(_sample(name, labels, self._value(rate, t)))
        return "".join(lines)

    # -- exposition
    def history(self, start: float, end: float, step: float) -> str:
        base = super().history(start, end, step)
        assert base.endswith("# EOF\n")
        lines = [base.removesuffix("# EOF\n")]
        steps = int((end - start) // step) + 1
        family = ""
        with self._lock:
            series = self._counter_series()
        for name, labels, rate in series:  # OpenMetrics: one series' samples together
            if name != family:
                family = name
                lines.append(f"# TYPE {name.removesuffix('_total')} counter\n")
            for i in range(steps):
                at = start + i * step
                lines.append(_sample(name, labels, self._value(rate, at), at))
        lines.append("# EOF\n")
        return "".join(lines)

    def _response(self) -> tuple[int, str]:
        status, body = super()._response()
        return status, body + self._gauges() + self._counters_at(time.time())


@pytest.fixture(scope="module", params=BACKENDS)
def packs_prometheus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MetricsServer]:
    tmp = tmp_path_factory.mktemp("packs")
    now = time.time()
    start = now - 420
    with PackExporter(t0=start) as exporter:
        for node, load in CPU.items():
            exporter.set(node, load, now=start)
        rules = tmp / "node-rules.yaml"
        rules.write_text(NODE_RULES)
        with metrics_server(
            request.param,
            [exporter.target],
            tmp / request.param,
            rule_files=[STOCK_RULES, rules],
            history=exporter.history(start, now - 2, step=1),
        ) as server:
            yield server


def ask(client: TestClient, verb: str, nodes: list[str]) -> Any:
    pod = {"metadata": {"name": "p", "uid": "u1"}, "spec": {"schedulerName": "decice_sched"}}
    body = orjson.dumps({"Pod": pod, "NodeNames": nodes, "Nodes": None})
    response = client.post(f"/{verb}", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    return response.json()


class Outcome:
    """What the extender made of one pack: scores, filter verdict and the values it read."""

    def __init__(self, settings: Settings, nodes: list[str]) -> None:
        service = build_service(settings)
        with TestClient(service.app) as client:  # lifespan: the first refresh runs first
            ready = client.get("/readyz").json()
            assert ready["ready"] is True, ready
            self.ready_nodes = {m: ready["metrics"][m]["nodes"] for m in ready["metrics"]}
            self.scores: dict[str, int] = {
                h["Host"]: h["Score"] for h in ask(client, "prioritize", nodes)
            }
            verdict = ask(client, "filter", nodes)
        self.passed: list[str] = verdict["NodeNames"]
        self.rejected: dict[str, str] = verdict["FailedAndUnresolvableNodes"] or {}
        self.values = {
            name: dict(series.values) for name, series in service.engine.snapshot.metrics.items()
        }


def run_pack(
    prometheus: MetricsServer,
    name: str,
    expected: dict[str, dict[str, float]],
    nodes: list[str] = NODES,
    tol: float = 5e-3,
) -> Outcome:
    """Load config/policies/`name` as an operator would, wait until Prometheus answers its
    queries with `expected` (metric -> node -> value), then serve it and ask it.

    Rates are off by a few parts in 10^5: a scrape's timestamp is taken a moment before
    our counters are read, hence the tolerance."""
    settings = load_settings(POLICIES / name, environ={"PROMETHEUS_URL": prometheus.url})
    assert settings.prometheus.url == prometheus.url
    assert [m.name for m in settings.default.metrics] == list(expected)
    label = settings.prometheus.node_label
    for m in settings.default.metrics:
        # The first scrape lands ~5 s after start; the rules need one more evaluation.
        prometheus.wait_for(m.query, approx_values(expected[m.name], label, tol), timeout=40)
    outcome = Outcome(settings, nodes)
    for metric, values in expected.items():
        assert outcome.values[metric] == pytest.approx(values, abs=tol)
    return outcome


def ranking(scores: dict[str, int]) -> list[str]:
    return sorted(scores, key=lambda n: (-scores[n], n))


def test_memory_pack(packs_prometheus: MetricsServer) -> None:
    out = run_pack(packs_prometheus, "memory.yaml", {"memory": MEMORY})
    assert out.ready_nodes == {"memory": 3}
    assert out.scores == {"node-1": 2, "node-2": 8, "node-3": 0}
    assert ranking(out.scores) == sorted(MEMORY, key=MEMORY.__getitem__)
    assert out.passed == ["node-1", "node-2"]
    assert out.rejected == {"node-3": "decice: memory above 0.9"}


def test_gpu_dcgm_pack_scores_the_mean_of_each_nodes_gpus(
    packs_prometheus: MetricsServer,
) -> None:
    means = {node: sum(gpus) / len(gpus) for node, gpus in GPUS.items()}
    assert means == {"node-1": 20.0, "node-2": 82.5, "node-3": 40.0}
    nodes = [*NODES, CPU_ONLY_NODE]
    out = run_pack(packs_prometheus, "gpu-dcgm.yaml", {"gpu": means}, nodes=nodes)
    assert out.ready_nodes == {"gpu": 3}
    # 0..100 %, lower is better; the node without GPUs is neutral (fail-open), not punished.
    assert out.scores == {"node-1": 8, "node-2": 2, "node-3": 6, CPU_ONLY_NODE: 5}
    assert ranking({n: out.scores[n] for n in NODES}) == ["node-1", "node-3", "node-2"]
    assert out.passed == nodes and out.rejected == {}


def test_power_kepler_pack_sums_the_modes_into_watts(packs_prometheus: MetricsServer) -> None:
    watts = {node: sum(modes.values()) for node, modes in POWER.items()}
    assert watts == {"node-1": 140.0, "node-2": 350.0, "node-3": 70.0}
    out = run_pack(packs_prometheus, "power-kepler.yaml", {"power": watts}, tol=2.0)
    assert out.ready_nodes == {"power": 3}
    assert out.scores == {"node-1": 8, "node-2": 4, "node-3": 9}  # 0..600 W, lower is better
    assert ranking(out.scores) == ["node-3", "node-1", "node-2"]
    assert out.passed == NODES and out.rejected == {}


def test_disk_io_pack_takes_each_nodes_busiest_disk(packs_prometheus: MetricsServer) -> None:
    # loop0 on node-3 is busy but is not a disk: the recording rule leaves it out.
    busiest = {"node-1": 0.3, "node-2": 0.97, "node-3": 0.04}
    out = run_pack(packs_prometheus, "disk-io.yaml", {"disk_io": busiest})
    assert out.ready_nodes == {"disk_io": 3}
    assert out.scores == {"node-1": 7, "node-2": 0, "node-3": 10}
    assert ranking(out.scores) == ["node-3", "node-1", "node-2"]
    assert out.passed == ["node-1", "node-3"]
    assert out.rejected == {"node-2": "decice: disk_io above 0.9"}


def test_cpu_memory_spread_pack_weighs_both(packs_prometheus: MetricsServer) -> None:
    out = run_pack(packs_prometheus, "cpu-memory-spread.yaml", {"cpu": CPU, "memory": MEMORY})
    assert out.ready_nodes == {"cpu": 3, "memory": 3}
    # node-1 has the idlest CPU but little free memory: node-2 wins on the two together.
    assert min(CPU, key=CPU.__getitem__) == "node-1"
    assert out.scores == {"node-1": 6, "node-2": 7, "node-3": 4}
    assert ranking(out.scores)[0] == "node-2"
    assert out.passed == ["node-1", "node-2"]
    assert out.rejected == {"node-3": "decice: memory above 0.9"}


#: Every pack and the test that runs it: a pack added without a test fails below.
TESTED = {
    "memory.yaml": test_memory_pack,
    "gpu-dcgm.yaml": test_gpu_dcgm_pack_scores_the_mean_of_each_nodes_gpus,
    "power-kepler.yaml": test_power_kepler_pack_sums_the_modes_into_watts,
    "disk-io.yaml": test_disk_io_pack_takes_each_nodes_busiest_disk,
    "cpu-memory-spread.yaml": test_cpu_memory_spread_pack_weighs_both,
}


def test_every_pack_is_tested_and_documented() -> None:
    shipped = sorted(p.name for p in POLICIES.iterdir())
    assert shipped == sorted(TESTED)
    docs = DOCS.read_text(encoding="utf-8")
    for name in shipped:
        assert f"config/policies/{name}" in docs, f"{name} is not listed in {DOCS.name}"


@pytest.mark.parametrize("path", sorted(POLICIES.glob("*")), ids=lambda p: p.name)
def test_every_pack_loads(path: Path) -> None:
    settings = load_settings(path, environ={"PROMETHEUS_URL": "http://127.0.0.1:9090"})
    assert settings.provider == "prometheus"
    assert settings.prometheus.url == "http://127.0.0.1:9090"
    assert all(m.query.strip() for m in settings.fetched_metrics)
    assert path.read_text(encoding="utf-8").startswith("# Policy pack: ")
