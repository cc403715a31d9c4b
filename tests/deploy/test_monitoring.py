"""The chart's observability pack: the Grafana dashboard and the Prometheus alerts.

- promtool: `check rules` on files/alerts.yaml (and on the rendered PrometheusRule's groups)
  and `test rules` on tests/deploy/alerts_test.yaml, whose cases cover every alert firing
  and not firing; skipped only when promtool is not installed (CI installs it).
- the dashboard JSON, offline: unique panel ids, gridPos, datasource and targets, defined
  variables, and only series extender/service/telemetry.py exports (counters only under
  rate), the shadow mode's included; the "Shadow mode" row shows those and only those; the
  "kube-scheduler" row only series the real kube-scheduler v1.35.4 exports
  (tests/fixtures/kube-scheduler/metrics.txt), joined to the chosen job on the pod (their
  values on a real scheduler: tests/e2e/test_scheduler_metrics.py).
- the chart: both objects render and pass `helm lint --strict`; the ConfigMap carries the
  dashboard JSON and the sidecar label; the PrometheusRule carries the rules file's groups,
  with the release's job and the policy's maxAge.
- a real `prometheus` scraping the real service (`decice-extender serve`, with a fake
  Kubernetes API and a fake node exporter, all on 127.0.0.1): after filter, prioritize
  and bind calls from the captured kube-scheduler bodies, and a few faults, every dashboard
  target (variables resolved and substituted as Grafana does) and every alert expression
  returns series, and the alerts the faults should trigger go pending in Prometheus. Beside
  it a real shadow (`decice-extender shadow`, its own fake Kubernetes API, scraped as the job
  of a `mode: shadow` release) judges the placements of another scheduler: with its job
  chosen, the "Shadow mode" row's targets return series too.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from extender.decisions.model import Snapshot
from extender.service.telemetry import OverloadTelemetry, ShadowTelemetry, Telemetry
from tests.deploy.chart import KUBE_VERSION, render_mod
from tests.deploy.test_chart import (
    CHART,
    NAMESPACE,
    RELEASE,
    REQUIRED_LABELS,
    find,
    schema_errors,
)
from tests.harness.kubeapi import FakeKubeAPI, write_kubeconfig
from tests.harness.loopback import LOCALHOST, wait_until
from tests.harness.promharness import FakeExporter, PrometheusServer, Result, prometheus_binary
from tests.harness.service import Service, running_service

ROOT = Path(__file__).resolve().parents[2]
FILES = CHART / "files"
ALERTS = FILES / "alerts.yaml"
DASHBOARD = FILES / "decice-extender-dashboard.json"
ALERTS_TEST = Path(__file__).resolve().parent / "alerts_test.yaml"
FIXTURES = ROOT / "tests" / "fixtures" / "kube-scheduler"

#: The scrape job the rules file is written for: the chart's Service name for release
#: "decice-extender", which prometheus-operator gives the ServiceMonitor's targets.
JOB = "decice-extender-metrics"
JOB_SELECTOR = f'job="{JOB}"'
#: kube-scheduler's own job: the chart's Service <fullname>-scheduler-metrics.
SCHEDULER_JOB_SELECTOR = 'job="decice-extender-scheduler-metrics"'
#: How the "kube-scheduler" row ties kube-scheduler's series to the chosen extender job:
#: both containers share the pod, and decice_build_info is one series a pod.
SCHEDULER_JOIN = (
    ' * on (namespace, pod) group_left () decice_build_info{namespace="$namespace", job="$job"}'
)
SCHEDULER_METRICS = FIXTURES / "metrics.txt"
STALE_ALERT = "DeciceMetricDataStale"
BOTH_ON: dict[str, Any] = {
    "metrics": {"dashboard": {"enabled": True}, "prometheusRule": {"enabled": True}}
}
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
#: Grafana's own variables a target may use besides the dashboard's.
GRAFANA_VARIABLES = {"__rate_interval", "__interval", "__range"}

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not installed (CI installs the Debian package prometheus)",
)


# --- helpers: the files ---------------------------------------------------------------


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def query_panels() -> list[dict[str, Any]]:
    """The panels that query (rows only group them)."""
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def row_of(panel: dict[str, Any]) -> str:
    """The title of the (expanded) row a panel sits under: the last row above it."""
    rows = [p for p in dashboard()["panels"] if p["type"] == "row"]
    above = [r for r in rows if r["gridPos"]["y"] < panel["gridPos"]["y"]]
    assert above, f"{panel['title']} is under no row"
    title: str = max(above, key=lambda r: r["gridPos"]["y"])["title"]
    return title


def dashboard_targets() -> list[tuple[str, dict[str, Any]]]:
    """(panel title / refId, target) of every query of the dashboard."""
    return [(f"{p['title']}/{t['refId']}", t) for p in query_panels() for t in p["targets"]]


def shown_for(panel: dict[str, Any]) -> str:
    """Whose panel it is: "shadow" for the "Shadow mode" row (a `mode: shadow` release's job
    chosen), "extender" for every other."""
    return "shadow" if row_of(panel) == SHADOW_ROW else "extender"


def rules_file() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return loaded


def alert_rules() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in rules_file()["groups"] for r in g["rules"] if "alert" in r}


def exported_series() -> dict[str, str]:
    """Every series name extender/service/telemetry.py exports -> its metric type, from the real
    Telemetry with every collector registered, shadow mode's (ShadowTelemetry with its
    exceedance counts, on the same registry as build_shadow puts it) and the overload taint
    writer's
    (OverloadTelemetry, with overload.enabled) (counters as <name>_total,
    histograms as <name>_bucket/_count/_sum), plus Prometheus' own `up`."""
    telemetry = Telemetry()
    ShadowTelemetry(telemetry.registry).watch_exceedance(
        lambda: {("default", "best", "exceeded"): 1}
    )
    OverloadTelemetry(telemetry.registry, lambda: 0)
    telemetry.watch(lambda: Snapshot.empty(["cpu"]))
    telemetry.watch_nodes(lambda: ({"default": {"node-1": 5}}, {"cpu": {"node-1": 0.5}}))
    telemetry.watch_placement(lambda: ({"bind": 1}, 1, 1, {"pods": True}))
    telemetry.watch_config(lambda: (True, 1.8e9, "a" * 64))  # a service run from a file
    names = {"up": "gauge"}
    for family in telemetry.registry.collect():
        if family.type == "counter":
            names[f"{family.name}_total"] = "counter"
        elif family.type == "histogram":
            for suffix in ("_bucket", "_count", "_sum"):
                names[f"{family.name}{suffix}"] = "histogram"
        elif family.type == "info":
            names[f"{family.name}_info"] = "info"
        else:
            names[family.name] = family.type
    return names


def kube_scheduler_series() -> dict[str, str]:
    """Every series name of the real kube-scheduler's /metrics (captured from v1.35.4 with
    the shipped chain: tests/fixtures/kube-scheduler/README.md) -> its metric type."""
    names = {}
    text = SCHEDULER_METRICS.read_text(encoding="utf-8")
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            names[sample.name] = family.type
    return names


def is_scheduler_panel(panel: dict[str, Any]) -> bool:
    """A panel of kube-scheduler's own series (the "kube-scheduler" row)."""
    return any(
        n.startswith("scheduler_") for t in panel["targets"] for n in metric_names(t["expr"])
    )


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_WORD = re.compile(r"(?<![\w.$])[a-zA-Z_:][a-zA-Z0-9_:]*")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
_SELECTOR = re.compile(r"(?<![\w.$])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^{}]*\})?")


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression selects (not functions, labels, keywords)."""
    bare = _STRING.sub('""', expr)
    bare = _GROUPING.sub(" ", _RANGE.sub("", _MATCHERS.sub("", bare)))
    names = set()
    for match in _WORD.finditer(bare):
        word = match.group()
        if bare[match.end() :].lstrip().startswith("(") or word.lower() in _KEYWORDS:
            continue  # a function or an aggregation; or/and/unless/bool/offset
        names.add(word)
    return names


def selectors(expr: str) -> dict[str, list[str]]:
    """Series name -> the matcher blocks ("" for none) it is selected with in `expr`."""
    names = metric_names(expr)
    found: dict[str, list[str]] = {}
    for match in _SELECTOR.finditer(expr):
        if match.group(1) in names:
            found.setdefault(match.group(1), []).append(match.group(2) or "")
    return found


_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")


def variables_in(text: str) -> set[str]:
    return {next(g for g in m.groups() if g) for m in _VARIABLE.finditer(text)}


def interpolate(text: str, values: dict[str, str]) -> str:
    """Grafana's substitution of $var, ${var} and [[var]] (single values, no regex
    escaping needed for these names); an unknown variable is a KeyError."""
    return _VARIABLE.sub(lambda m: values[next(g for g in m.groups() if g)], text)


def rate_interval(scrape_seconds: float, interval_seconds: float) -> str:
    """Grafana's $__rate_interval: max($__interval + scrape interval, 4 x scrape interval)."""
    return f"{max(interval_seconds + scrape_seconds, 4 * scrape_seconds):g}s"


def without_final_comparison(expr: str) -> str:
    """`X == 0` -> `X`, `absent(X)` -> `X`: the series an alert is computed from."""
    absent = re.fullmatch(r"absent\((.*)\)", expr.strip(), re.DOTALL)
    if absent:
        return absent.group(1)
    stripped = re.sub(r"\s*(?:==|!=|>=|<=|>|<)\s*[0-9.e+]+\s*$", "", expr.strip())
    assert stripped != expr.strip(), f"no final comparison in {expr!r}"
    return stripped


def render(values: dict[str, Any], name: str = RELEASE) -> list[dict[str, Any]]:
    docs = render_mod.documents(render_mod.render_chart(values, name=name, namespace=NAMESPACE))
    return [yaml.safe_load(doc) for doc in docs]


def prometheus_rule(values: dict[str, Any], name: str = RELEASE) -> dict[str, Any]:
    return find(render(values, name), "PrometheusRule")


def promtool(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


# --- promtool ----------------------------------------------------------------------------


@needs_promtool
def test_promtool_check_rules() -> None:
    done = promtool("check", "rules", str(ALERTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in done.stdout


@needs_promtool
def test_promtool_unit_tests_pass() -> None:
    done = promtool("test", "rules", str(ALERTS_TEST))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_unit_tests_cover_every_alert_firing_and_not_firing() -> None:
    cases = yaml.safe_load(ALERTS_TEST.read_text(encoding="utf-8"))
    assert cases["rule_files"] == [str(Path("../..") / ALERTS.relative_to(ROOT))]
    fires: set[str] = set()
    quiet: set[str] = set()
    for group in cases["tests"]:
        for case in group.get("alert_rule_test", []):
            (fires if case["exp_alerts"] else quiet).add(case["alertname"])
    assert fires == set(alert_rules()), "an alert without a case where it fires"
    assert quiet == set(alert_rules()), "an alert without a case where it stays quiet"


def test_every_alert_has_for_severity_summary_description_and_runbook() -> None:
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    for name, rule in alert_rules().items():
        assert re.fullmatch(r"\d+[smh]", rule["for"]), name
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        notes = rule["annotations"]
        assert set(notes) == {"summary", "description", "runbook_url"}, name
        anchor = notes["runbook_url"].rsplit("#", 1)[1]
        assert anchor == name.lower() and f"\n#### {name}\n" in readme, name
        names = metric_names(rule["expr"])
        if all(n.startswith("scheduler_") for n in names):
            assert SCHEDULER_JOB_SELECTOR in rule["expr"], f"{name} does not select the job"
            assert names <= set(kube_scheduler_series()), name
        else:
            assert JOB_SELECTOR in rule["expr"], f"{name} does not select the job"
            assert names <= set(exported_series()), name
    stale = alert_rules()[STALE_ALERT]["expr"]
    assert stale.strip().endswith(" > 60"), "templates/prometheusrule.yaml replaces this"


# --- the dashboard, offline ----------------------------------------------------------------


def test_dashboard_structure() -> None:
    d = dashboard()
    assert 36 <= d["schemaVersion"] <= 41
    assert d["uid"] == "decice-extender" and d["title"] and d["id"] is None
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert list(variables) == ["datasource", "namespace", "job"]
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "job"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"] == DATASOURCE
        assert variables[name]["definition"] == variables[name]["query"]["query"]
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) for i in ids), ids
    cells: set[tuple[int, int]] = set()
    for panel in d["panels"]:
        grid = panel["gridPos"]
        assert set(grid) == {"h", "w", "x", "y"} and all(isinstance(v, int) for v in grid.values())
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
        if panel["type"] == "row":
            assert not panel.get("targets") and panel["panels"] == []
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["title"] and panel["description"], panel["id"]
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
            assert target["expr"].strip(), panel["title"]
            assert target["instant"] != target["range"], panel["title"]
            if panel["type"] == "table":
                assert target["instant"] and target["format"] == "table", panel["title"]


def test_dashboard_queries_only_series_the_service_exports() -> None:
    exported = {**exported_series(), **kube_scheduler_series()}
    defined = {v["name"] for v in dashboard()["templating"]["list"]} | GRAFANA_VARIABLES
    used: set[str] = set()
    for where, target in dashboard_targets():
        expr = target["expr"]
        names = metric_names(expr)
        assert names, f"{where}: no series in {expr!r}"
        unknown = names - set(exported)
        assert not unknown, f"{where}: {sorted(unknown)} are not exported"
        used |= names
        assert variables_in(expr) <= defined, f"{where}: undefined variables in {expr!r}"
        # every series is narrowed to the chosen namespace and job (kube-scheduler's through
        # the pod it shares with the extender)
        for name, blocks in selectors(expr).items():
            for block in blocks:
                assert 'namespace="$namespace"' in block, (where, name)
                if name.startswith("scheduler_"):
                    assert SCHEDULER_JOIN in expr, (where, name)
                else:
                    assert 'job="$job"' in block, (where, name)
        # counters and histogram buckets only under rate/increase, gauges never
        for match in re.finditer(r"\b(rate|increase)\(\s*([a-zA-Z_:][\w:]*)", expr):
            assert match.group(2).endswith(("_total", "_bucket")), (where, match.group(2))
        for name in names:
            if name.endswith(("_total", "_bucket")):
                assert re.search(rf"\b(?:rate|increase)\(\s*{name}\b", expr), (where, name)
        if "histogram_quantile" in expr:
            assert "_bucket" in expr and re.search(r"\bby \([^)]*\ble\b", expr), where
    for variable in dashboard()["templating"]["list"][1:]:
        assert metric_names(re.sub(r"label_values\((.*),\s*\w+\)", r"\1", variable["definition"]))
    # and every family the service exports has a panel
    families = {re.sub(r"_(total|bucket|count|sum)$", "", n) for n in exported_series()}
    shown = {re.sub(r"_(total|bucket|count|sum)$", "", n) for n in used}
    assert families - shown == set(), "exported but on no panel"


def test_the_shadow_row_shows_the_shadow_series_and_no_other_row_does() -> None:
    rows = [p["title"] for p in dashboard()["panels"] if p["type"] == "row"]
    assert rows[-1] == SHADOW_ROW and rows.count(SHADOW_ROW) == 1
    shadow = [p for p in query_panels() if shown_for(p) == "shadow"]
    assert [p["title"] for p in shadow] == SHADOW_PANELS
    for panel in query_panels():
        names = set().union(*(metric_names(t["expr"]) for t in panel["targets"]))
        of_shadow = {n for n in names if n.startswith("decice_shadow_")}
        if shown_for(panel) == "shadow":
            assert names and names == of_shadow, panel["title"]
            assert "alert" not in panel and "thresholds" not in panel["fieldConfig"]["defaults"]
        else:
            assert not of_shadow, panel["title"]
    exported = {
        re.sub(r"_(total|bucket|count|sum)$", "", n)
        for n in exported_series()
        if n.startswith("decice_shadow_")
    }
    assert exported == {
        "decice_shadow_assignments",
        "decice_shadow_score_gap",
        "decice_shadow_rejected",
        "decice_shadow_exceedance",
    }
    # No alert on the shadow's series: it advises, nothing pages on it.
    assert not [n for r in alert_rules().values() for n in metric_names(r["expr"]) if "shadow" in n]
    gap = next(p for p in shadow if "decice_shadow_score_gap" in p["targets"][0]["expr"])
    assert [t["expr"].split(",")[0] for t in gap["targets"]] == [
        "histogram_quantile(0.5",
        "histogram_quantile(0.9",
    ]
    # The variables list every release of the chart, whatever its mode, from a series every
    # mode keeps current: a shadow answers no verb (decice_requests_total says nothing of
    # it), every mode refreshes its metrics.
    for variable in dashboard()["templating"]["list"][1:]:
        assert metric_names(variable["definition"].split(",")[0]) == {"decice_metric_age_seconds"}


def test_metric_names_parser() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (verb, le) (rate(decice_request_duration_seconds_bucket"
        '{namespace="$namespace", job="$job", verb=~"a|b"}[$__rate_interval]))) '
        "or on (verb) topk by (metric) (10, max by (node) (decice_node_score)) > bool 1e3"
    )
    assert metric_names(expr) == {"decice_request_duration_seconds_bucket", "decice_node_score"}
    assert selectors(expr)["decice_node_score"] == [""]
    assert without_final_comparison('up{job="x"} == 0') == 'up{job="x"}'
    assert without_final_comparison('absent(up{job="x"})') == 'up{job="x"}'
    assert interpolate("a[$__rate_interval] ${job} [[namespace]]", {
        "__rate_interval": "4s", "job": "j", "namespace": "n"
    }) == "a[4s] j n"  # fmt: skip
    assert rate_interval(15, 60) == "75s" and rate_interval(15, 15) == "60s"


# --- the chart -------------------------------------------------------------------------


def test_both_objects_are_off_by_default() -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in render({})}
    assert ("ConfigMap", f"{RELEASE}-dashboard") not in kinds
    assert "PrometheusRule" not in {kind for kind, _ in kinds}


def test_chart_lints_strict_with_both_enabled() -> None:
    report = helm.lint(
        CHART, BOTH_ON, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}"
    )
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert not report["errors"] and not problems, json.dumps(report, indent=2)
    with helm.Chart.load(CHART) as chart:
        assert schema_errors(chart.merge_values(BOTH_ON)) == []


def test_dashboard_configmap_carries_the_json_and_the_sidecar_label() -> None:
    cm = find(render(BOTH_ON), "ConfigMap", f"{RELEASE}-dashboard")
    kubernetes_validate.validate(cm, KUBE_VERSION, strict=True)
    meta = cm["metadata"]
    assert meta["namespace"] == NAMESPACE
    assert meta["labels"]["grafana_dashboard"] == "1"
    assert set(meta["labels"]) >= REQUIRED_LABELS
    assert list(cm["data"]) == ["decice-extender.json"]
    assert json.loads(cm["data"]["decice-extender.json"]) == dashboard()
    # labels, annotations and namespace follow the values
    custom = {
        "labels": {"grafana_dashboard": "yes", "team": "sched"},
        "annotations": {"grafana_folder": "Scheduling"},
        "namespace": "monitoring",
    }
    meta = find(
        render({"metrics": {"dashboard": {"enabled": True, **custom}}}),
        "ConfigMap",
        f"{RELEASE}-dashboard",
    )["metadata"]
    assert meta["namespace"] == "monitoring"
    assert {"grafana_dashboard": "yes", "team": "sched"}.items() <= meta["labels"].items()
    assert meta["annotations"] == {"grafana_folder": "Scheduling"}


def test_prometheus_rule_carries_the_rules_file_groups() -> None:
    values = copy.deepcopy(BOTH_ON)
    values["metrics"]["prometheusRule"]["labels"] = {"release": "kube-prometheus-stack"}
    rule = prometheus_rule(values)
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["name"] == RELEASE and rule["metadata"]["namespace"] == NAMESPACE
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert set(rule["metadata"]["labels"]) >= REQUIRED_LABELS
    assert set(rule) == {"apiVersion", "kind", "metadata", "spec"}
    # the default release's job and the default policy's maxAge (60): the file itself
    assert rule["spec"] == rules_file()
    for group in rule["spec"]["groups"]:
        assert set(group) <= {"name", "interval", "rules", "limit"}
        for r in group["rules"]:
            assert set(r) <= {"alert", "record", "expr", "for", "labels", "annotations"}


def test_prometheus_rule_follows_the_release_job_and_max_age() -> None:
    values: dict[str, Any] = {
        "metrics": {
            "prometheusRule": {
                "enabled": True,
                "ruleLabels": {"team": "sched", "severity": "page"},
                "namespace": "monitoring",
            }
        },
        "policy": {
            "metrics": [
                {"name": "cpu", "query": "up", "maxAge": 120},
                {"name": "memory", "query": "up", "maxAge": 30},
            ]
        },
    }
    rule = prometheus_rule(values, name="sched")
    job = "sched-decice-extender-metrics"  # <fullname>-metrics, the Service's name
    scheduler_job = "sched-decice-extender-scheduler-metrics"  # kube-scheduler's Service
    services = render({"metrics": {"serviceMonitor": {"enabled": True}}}, "sched")
    assert find(services, "Service", job) and find(services, "Service", scheduler_job)
    assert rule["metadata"]["namespace"] == "monitoring"
    exprs = {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}
    expected = {
        name: r["expr"]
        .replace(JOB_SELECTOR, f'job="{job}"')
        .replace(SCHEDULER_JOB_SELECTOR, f'job="{scheduler_job}"')
        for name, r in alert_rules().items()
    }
    expected[STALE_ALERT] = expected[STALE_ALERT].strip().removesuffix(" > 60") + " > 120"
    assert exprs == expected
    for r in (r for g in rule["spec"]["groups"] for r in g["rules"]):
        own = alert_rules()[r["alert"]]["labels"]
        assert r["labels"] == {"team": "sched", **own}  # the alert's severity wins
        assert r["annotations"] == alert_rules()[r["alert"]]["annotations"]
    # explicit jobs and threshold
    values["metrics"]["prometheusRule"].update(
        job="kubernetes-pods", schedulerJob="kube-scheduler", metricMaxAge=90.5
    )
    exprs = {
        r["alert"]: r["expr"] for g in prometheus_rule(values)["spec"]["groups"] for r in g["rules"]
    }
    for name, expr in exprs.items():
        wanted = "kube-scheduler" if name in ON_THE_SCHEDULER else "kubernetes-pods"
        assert f'job="{wanted}"' in expr and "decice-extender" not in expr, expr
    assert exprs[STALE_ALERT] == 'decice_metric_age_seconds{job="kubernetes-pods"} > 90.5'


@needs_promtool
def test_rendered_prometheus_rule_passes_promtool(tmp_path: Path) -> None:
    values = {"metrics": {"prometheusRule": {"enabled": True, "metricMaxAge": 45}}}
    spec = prometheus_rule(values, name="other")["spec"]
    path = tmp_path / "rendered.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    done = promtool("check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"dashboard": {"enabeld": True}}, "enabeld"),
        ({"dashboard": {"labels": {"grafana_dashboard": 1}}}, "grafana_dashboard"),
        ({"prometheusRule": {"metricMaxAge": 0}}, "metricMaxAge"),
        ({"prometheusRule": {"job": 'a"b'}}, "job"),
        ({"prometheusRule": {"ruleLabels": {"bad-name": "x"}}}, "ruleLabels"),
        ({"prometheusRule": {"namespace": "Not_A_Namespace"}}, "namespace"),
    ],
)
def test_bad_monitoring_values_are_refused(values: dict[str, Any], where: str) -> None:
    with helm.Chart.load(CHART) as chart:
        merged = chart.merge_values({"metrics": values})
        with pytest.raises(helm.HelmValuesError):
            chart.render({"metrics": values}, name=RELEASE, namespace=NAMESPACE)
    assert any(where in e for e in schema_errors(merged)), schema_errors(merged)


# --- a real Prometheus scraping the real service ---------------------------------------------

NS = "decice"
TOKEN = "monitoring-t0ken"
#: Node values the fake exporter serves (decice_node_cpu{node=...}); above 0.9 is filtered.
NODE_CPU = {"node-1": 0.2, "node-2": 0.95, "node-3": 0.95, "node-4": 0.3, "node-5": 0.5}
SCRAPE_SECONDS = 1.0  # promharness' scrape and evaluation interval
#: Alerts the fixture's faults make fire: expected labels of their series.
INDUCED = {
    "DeciceMetricDataStale": {"metric": "broken"},  # never refreshed: +Inf
    "DeciceRefreshFailing": {"metric": "broken"},  # a query Prometheus rejects
    "DeciceBindErrors": {"verb": "bind", "outcome": "error"},  # a pod the API does not have
    "DecicePodsTurnedAway": {},  # a pod whose only candidate is above the threshold
    "DeciceConfigReloadFailed": {},  # the policy file rewritten with no metrics
}
#: Alerts of a healthy service: their series exist but the final comparison holds for none.
QUIET = {"DeciceExtenderDown", "DeciceExtenderAbsent", "DeciceWatchDown"}
#: Alerts on kube-scheduler's own series: tests/e2e/test_scheduler_metrics.py, on a real one.
ON_THE_SCHEDULER = {"DeciceSchedulerPodsPending"}
#: The dashboard row of `mode: shadow` and its panels.
SHADOW_ROW = "Shadow mode"
SHADOW_PANELS = [
    "Placements judged by verdict",
    "Agreement with our advice",
    "Score gap p50 / p90",
    "Placements on nodes our filter rejects",
    "Exceedance by verdict",
    "Exceedance outcomes",
]
#: The scrape job of a `mode: shadow` release "decice-shadow" beside the extender's: the
#: chart's Service <fullname>-metrics, as its ServiceMonitor's targets get it.
SHADOW_RELEASE = "decice-shadow"
SHADOW_JOB = f"{SHADOW_RELEASE}-{RELEASE}-metrics"
#: The shadow's placements, made by "another scheduler" in each of two waves: onto our best
#: node (node-1, lowest CPU) and ones our filter rejects (node-2, above 0.9) among others.
SHADOW_WAVE = ("node-1", "node-4", "node-5", "node-2")


class ScrapingPrometheus(PrometheusServer):
    """promharness' server with more jobs: the extender (and the shadow), each labelled like
    a target of the chart's ServiceMonitor (job = the Service name, namespace, pod)."""

    def __init__(self, exporter: str, workdir: Path, binary: str) -> None:
        self.exporter = exporter
        self.jobs: dict[str, tuple[str, str]] = {}
        """job -> (target, pod)."""
        super().__init__([exporter], workdir=workdir, binary=binary, rule_files=[ALERTS])

    def write_config(self, targets: list[str]) -> None:
        super().write_config([self.exporter])
        if not self.jobs:
            return
        config = json.loads(self.config_file.read_text())
        for job, (target, pod) in self.jobs.items():
            config["scrape_configs"].append(
                {
                    "job_name": job,
                    "static_configs": [
                        {"targets": [target], "labels": {"namespace": NAMESPACE, "pod": pod}}
                    ],
                }
            )
        self.config_file.write_text(json.dumps(config, indent=2) + "\n")

    def scrape(self, jobs: dict[str, tuple[str, str]]) -> None:
        """Scrape these jobs too (one reload: Prometheus syncs targets every 5 s at most)."""
        self.jobs.update(jobs)
        self.write_config([])
        self.reload()

    def get(self, path: str, params: list[tuple[str, str]]) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as response:
            payload = json.load(response)
        assert payload["status"] == "success", payload
        return payload["data"]

    def query_range(self, expr: str, start: float, end: float, step: float) -> Result:
        data = self.get(
            "/api/v1/query_range",
            [
                ("query", expr),
                ("start", f"{start:.3f}"),
                ("end", f"{end:.3f}"),
                ("step", str(step)),
            ],
        )
        assert data["resultType"] == "matrix", data
        result: Result = data["result"]
        return result

    def label_values(self, label: str, match: str | None, start: float) -> list[str]:
        params = [("start", f"{start:.3f}"), ("end", f"{time.time():.3f}")]
        if match is not None:
            params.append(("match[]", match))
        values: list[str] = self.get(f"/api/v1/label/{label}/values", params)
        return values


@dataclass
class Stack:
    prometheus: ScrapingPrometheus
    service: Service
    api: FakeKubeAPI
    exporter: FakeExporter
    since: float
    """Just before Prometheus was told to scrape the service (before any request)."""
    shadow: Service
    """`decice-extender shadow`, scraped as SHADOW_JOB, behind its own fake API server."""


def fixture_body(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return loaded


def filter_args(name: str, uid: str, nodes: list[str]) -> dict[str, Any]:
    """The captured filter call, for another pod (created now) and other candidate nodes."""
    body = fixture_body("filter-nodecache.json")
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    body["Pod"]["metadata"].update(name=name, uid=uid, creationTimestamp=created)
    body["NodeNames"] = nodes
    return body


def post(svc: Service, verb: str, body: Any) -> Any:
    status, answer = svc.post(f"/{verb}", body)
    assert status == 200, (verb, status, answer)
    return json.loads(answer)


def scraped(svc: Service) -> str:
    status, body = svc.get("/metrics")
    assert status == 200
    return body.decode()


def series_with_samples(exposition: str) -> set[str]:
    return {
        sample.name
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


def service_policy(prometheus_url: str) -> dict[str, Any]:
    return {
        "schedulerNames": ["decice_sched"],
        "server": {"gracePeriod": 2},
        "provider": "prometheus",
        "prometheus": {"url": prometheus_url, "interval": 0.5, "timeout": 2, "maxBackoff": 1},
        "metrics": [
            {"name": "cpu", "query": "decice_node_cpu", "filter": {"above": 0.9}, "maxAge": 30},
            # PromQL Prometheus rejects (400): a refresh error every time, data age +Inf
            {"name": "broken", "query": "decice_node_cpu{", "maxAge": 30},
        ],
        "herdGuard": {"enabled": True, "metric": "cpu"},
        "bind": {"enabled": True, "timeout": 2, "retries": 0},
        "requeue": {"enabled": True, "patchesPerSecond": 50},
        "explain": {"nodeMetrics": True, "events": True, "eventsPerSecond": 50},
        # node-2 (cpu above 0.9) tainted a second after the first fresh data
        "overload": {"enabled": True, "forSeconds": 1, "leaseNamespace": NS},
    }


def shadow_policy(prometheus_url: str) -> dict[str, Any]:
    """What a `mode: shadow` release runs: the extender's cpu metric (no herd guard, so our
    best node is the least busy one), judging the pods of "default-scheduler"."""
    return {
        "schedulerNames": ["decice_sched"],
        "server": {"gracePeriod": 2},
        "provider": "prometheus",
        "prometheus": {"url": prometheus_url, "interval": 0.5, "timeout": 2, "maxBackoff": 1},
        "metrics": [
            {"name": "cpu", "query": "decice_node_cpu", "filter": {"above": 0.9}, "maxAge": 30}
        ],
        "herdGuard": {"enabled": False},
        "shadow": {"schedulerNames": ["default-scheduler"], "namespaces": [NS]},
    }


def has_the_exporters_values(svc: Service) -> Callable[[], bool]:
    return lambda: 'decice_metric_nodes{metric="cpu"} 5.0' in scraped(svc)


def watching(svc: Service) -> Callable[[], bool]:
    def up() -> bool:
        status, body = svc.get("/readyz")
        watches = json.loads(body).get("watches", {}) if status == 200 else {}
        return bool(watches) and all(w["watching"] for w in watches.values())

    return up


def names_include(wanted: set[str]) -> Callable[[Result], bool]:
    """A `wait_for` predicate: the series of `count by (__name__)` include `wanted`."""
    return lambda result: {s["metric"]["__name__"] for s in result} >= wanted


def shadow_wave(api: FakeKubeAPI, shadow: Service, wave: int) -> None:
    """The placements of SHADOW_WAVE, by "default-scheduler", judged by the shadow."""
    for i, node in enumerate(SHADOW_WAVE):
        name = f"placed-{wave}-{i}"
        api.add_pod(NS, name, f"00000000-0000-4000-8000-{wave:06d}{i:06d}", "default-scheduler")
        api.assign(NS, name, node)
    seen = wave * len(SHADOW_WAVE)
    wait_until(
        lambda: json.loads(shadow.get("/shadow")[1])["seen"] == seen,
        30,
        f"the shadow judged wave {wave}",
    )


def value_is(value: float) -> Callable[[Result], bool]:
    """A `wait_for` predicate: one series, with this value."""
    return lambda result: len(result) == 1 and float(result[0]["value"][1]) == value


def samples(prom: PrometheusServer, expr: str) -> dict[str, float]:
    """Instant query: JSON of each series' labels -> value."""
    return {
        json.dumps(item["metric"], sort_keys=True): float(item["value"][1])
        for item in prom.query(expr)
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Prometheus (1 s scrapes, the alerts loaded) scraping a fake node exporter, the
    service and a shadow; the service behind a fake Kubernetes API, driven through every
    code path the dashboard shows; the shadow behind another, judging two waves of
    placements (one scrape apart, so rate() sees the second). About 20 s on 2 cores."""
    binary = prometheus_binary()  # a missing binary fails (the suite's rule), never skips
    workdir = tmp_path_factory.mktemp("monitoring")
    with contextlib.ExitStack() as stack:
        exporter = stack.enter_context(FakeExporter())
        for node, cpu in NODE_CPU.items():
            exporter.set(node, cpu)
        api = stack.enter_context(FakeKubeAPI(token=TOKEN))
        for i, node in enumerate(NODE_CPU, start=1):
            api.add_node(node, f"10.0.0.{i}")
        captured = fixture_body("bind.json")
        api.add_pod(NS, captured["PodName"], captured["PodUID"])
        api.add_pod(NS, "turned-away", "00000000-0000-4000-8000-00000000000a")
        api.add_pod(NS, "requeued", "00000000-0000-4000-8000-00000000000b")
        kubeconfig = write_kubeconfig(workdir / "kubeconfig", api.url, TOKEN)

        prom = ScrapingPrometheus(exporter.target, workdir / "prometheus", binary)
        stack.callback(prom.close)
        prom.start()
        prom.wait_for("decice_node_cpu", lambda r: len(r) == len(NODE_CPU))

        svc = stack.enter_context(
            running_service(
                service_policy(prom.url),
                workdir,
                {"KUBECONFIG": str(kubeconfig)},
                log_level="warning",
            )
        )
        # the shadow: its own API server (the faults below are the extender's), same nodes
        shadow_api = stack.enter_context(FakeKubeAPI(token=TOKEN))
        for i, node in enumerate(NODE_CPU, start=1):
            shadow_api.add_node(node, f"10.0.0.{i}")
        shadow_kubeconfig = write_kubeconfig(workdir / "shadow-kubeconfig", shadow_api.url, TOKEN)
        shadow = stack.enter_context(
            running_service(
                shadow_policy(prom.url),
                workdir,
                {"KUBECONFIG": str(shadow_kubeconfig)},
                log_level="warning",
                mode="shadow",
            )
        )
        for each in (svc, shadow):
            wait_until(has_the_exporters_values(each), 30, "the service has the exporter's values")
        wait_until(watching(shadow), 30, "the shadow's watches")
        since = time.time()
        prom.scrape(
            {
                JOB: (f"{LOCALHOST}:{svc.port}", f"{RELEASE}-0"),
                SHADOW_JOB: (f"{LOCALHOST}:{shadow.port}", f"{SHADOW_RELEASE}-{RELEASE}-0"),
            }
        )
        prom.wait_for(f"up{{{JOB_SELECTOR}}} == 1", bool, timeout=30)
        prom.wait_for(f'up{{job="{SHADOW_JOB}"}} == 1', bool, timeout=30)
        # the first wave of placements another scheduler makes: the shadow's series appear
        shadow_wave(shadow_api, shadow, 1)

        # kube-scheduler's captured calls: node-2 and node-3 fail, the pod binds to node-4
        verdict = post(svc, "filter", fixture_body("filter-nodecache.json"))
        assert set(verdict["FailedAndUnresolvableNodes"]) == {"node-2", "node-3"}
        assert len(post(svc, "prioritize", fixture_body("prioritize-nodecache.json"))) == 5
        assert post(svc, "bind", captured) == {"Error": ""}
        # a pod whose only candidate is filtered stays turned away (node-2 stays busy) ...
        away = filter_args("turned-away", "00000000-0000-4000-8000-00000000000a", ["node-2"])
        assert post(svc, "filter", away)["NodeNames"] == []
        # ... and one is requeued (patched) once node-3's load drops
        requeued = filter_args("requeued", "00000000-0000-4000-8000-00000000000b", ["node-3"])
        assert post(svc, "filter", requeued)["NodeNames"] == []
        exporter.set("node-3", 0.4)
        wait_until(
            lambda: api.requests_to("PATCH", f"/api/v1/namespaces/{NS}/pods/requeued"),
            30,
            "the requeue patch of the recovered pod",
        )
        # a malformed call: a 400 answer
        assert svc.post("/filter", {"Pod": None})[0] == 400
        # the Event on the bound pod
        wait_until(lambda: api.events, 30, "the Event on the bound pod")
        # both watches cut: restarts counted, then up again
        api.break_watches()
        wait_until(
            lambda: (
                'reason="error"' in scraped(svc)
                and 'decice_watch_up{resource="pods"} 1.0' in scraped(svc)
                and 'decice_watch_up{resource="nodes"} 1.0' in scraped(svc)
            ),
            30,
            "the watches restarted",
        )
        # two bind errors (the API has no such pod), one scrape apart, so rate() sees them
        ghost = filter_args("ghost", "00000000-0000-4000-8000-00000000000c", ["node-1"])
        bind_error = f'decice_decisions_total{{{JOB_SELECTOR},verb="bind",outcome="error"}}'
        uid = ghost["Pod"]["metadata"]["uid"]
        ghost_bind = {**captured, "PodName": "ghost", "PodUID": uid, "Node": "node-1"}
        for count in (1, 2):
            post(svc, "filter", ghost)
            answer = post(svc, "bind", ghost_bind)
            assert "failed" in answer["Error"], answer
            prom.wait_for(bind_error, value_is(count))
        # the policy file rewritten invalid: the reload fails, the old policy stays in force
        svc.config.write_text(json.dumps({**service_policy(prom.url), "metrics": []}))
        wait_until(
            lambda: "decice_config_last_reload_successful 0.0" in scraped(svc),
            30,
            "the failed reload of the policy file",
        )
        status, ready = svc.get("/readyz")
        assert status == 200, ready  # a failed reload is not unready
        last = json.loads(ready)["policy"]["lastReload"]
        assert not last["successful"] and last["problems"], last

        # the second wave, once Prometheus holds the first: rate() sees it
        judged = f'sum(decice_shadow_assignments_total{{job="{SHADOW_JOB}"}})'
        prom.wait_for(judged, value_is(len(SHADOW_WAVE)))
        shadow_wave(shadow_api, shadow, 2)
        prom.wait_for(judged, value_is(2 * len(SHADOW_WAVE)))
        # node-2, over the threshold, is over at the refresh after each wave: exceeded
        exceeded = (
            f'sum(decice_shadow_exceedance_total{{job="{SHADOW_JOB}", verdict="rejected", '
            'outcome="exceeded"})'
        )
        prom.wait_for(exceeded, value_is(2))
        # ... at a step of the dashboard's range queries (since + k s), as the panels run them
        window = rate_interval(SCRAPE_SECONDS, SCRAPE_SECONDS)
        rate = f'sum(rate(decice_shadow_assignments_total{{job="{SHADOW_JOB}"}}[{window}]))'
        wait_until(
            lambda: any(
                float(v) > 0
                for s in prom.query_range(rate, since, time.time(), SCRAPE_SECONDS)
                for _, v in s["values"]
            ),
            30,
            "the second wave in a range query's rate",
        )

        # Prometheus holds every series the service and the shadow now export
        for job, each in ((JOB, svc), (SHADOW_JOB, shadow)):
            wanted = series_with_samples(scraped(each))
            prom.wait_for(
                f'count by (__name__) ({{job="{job}", __name__=~"decice_.+"}})',
                names_include(wanted),
            )
        prom.wait_for(f"decice_turned_away_pods{{{JOB_SELECTOR}}} == 1", bool)
        prom.wait_for(f"decice_overload_tainted_nodes{{{JOB_SELECTOR}}} == 1", bool)
        prom.wait_for(f"decice_config_last_reload_successful{{{JOB_SELECTOR}}} == 0", bool)
        yield Stack(prom, svc, api, exporter, since, shadow)


@pytest.fixture
def live(stack: Stack) -> Stack:
    """The stack, its service still running (the last test of the module stops it)."""
    assert stack.service.alive(), "the service was stopped by an earlier test"
    return stack


def grafana_variables(stack: Stack, job: str | None = None) -> dict[str, str]:
    """The dashboard's variables as Grafana resolves them on load (query variables: the
    label values API, the first value when none is chosen; `job` when one is, which must be
    among the values), plus its interval variables for a dashboard range since the first
    scrape at a 1 s data-source scrape interval."""
    prom = stack.prometheus
    values = {"__interval": f"{SCRAPE_SECONDS:g}s", "__range": f"{time.time() - stack.since:.0f}s"}
    values["__rate_interval"] = rate_interval(SCRAPE_SECONDS, SCRAPE_SECONDS)
    values["datasource"] = "prometheus"
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] != "query":
            continue
        definition = interpolate(variable["definition"], values)
        match = re.fullmatch(r"label_values\((?:(.+),\s*)?(\w+)\)", definition)
        assert match, definition
        found = sorted(prom.label_values(match.group(2), match.group(1), stack.since))
        assert found, f"variable {variable['name']}: {definition} has no values"
        chosen = job if variable["name"] == "job" and job is not None else found[0]
        assert chosen in found, f"variable {variable['name']}: {chosen} not in {found}"
        values[variable["name"]] = chosen
    return values


def panel_variables(stack: Stack) -> dict[str, dict[str, str]]:
    """The variables each panel is shown with (shown_for): the extender's job on load, the
    shadow's job chosen for the "Shadow mode" row."""
    return {"extender": grafana_variables(stack), "shadow": grafana_variables(stack, SHADOW_JOB)}


def test_dashboard_variables_resolve_to_the_scraped_service(live: Stack) -> None:
    values = grafana_variables(live)
    assert values["namespace"] == NAMESPACE and values["job"] == JOB
    assert values["__rate_interval"] == "4s"
    # The job variable lists the shadow's job as well (it exports no decice_requests_total).
    assert grafana_variables(live, SHADOW_JOB)["job"] == SHADOW_JOB


def test_every_dashboard_target_returns_series(live: Stack) -> None:
    """Each target as its panel runs it (range queries over the time since the first
    scrape, tables as instant queries), and every one also as an instant query now:
    each returns series, and some value is a number (not NaN: a quantile of no traffic)."""
    prom = live.prometheus
    variables = panel_variables(live)
    now = time.time()
    empty = []
    for panel in query_panels():
        if is_scheduler_panel(panel):
            continue  # no kube-scheduler here: tests/e2e/test_scheduler_metrics.py
        for target in panel["targets"]:
            where = f"{panel['title']}/{target['refId']}"
            expr = interpolate(target["expr"], variables[shown_for(panel)])
            instant = prom.query(expr)
            if not instant:
                empty.append(f"{where} (instant): {expr}")
                continue
            if target["range"]:
                series = prom.query_range(expr, live.since, now, SCRAPE_SECONDS)
                points = [float(v) for s in series for _, v in s["values"]]
            else:
                points = [float(s["value"][1]) for s in instant]
            if not any(not math.isnan(p) for p in points):
                empty.append(f"{where}: only NaN in {expr}")
    assert empty == []


def test_every_dashboard_series_is_one_prometheus_scraped(live: Stack) -> None:
    jobs = {"extender": JOB, "shadow": SHADOW_JOB}
    scraped_names = {
        whose: {
            s["metric"]["__name__"]
            for s in live.prometheus.query(f'count by (__name__) ({{job="{job}"}})')
        }
        for whose, job in jobs.items()
    }
    for panel in query_panels():
        for target in panel["targets"]:
            where = f"{panel['title']}/{target['refId']}"
            names = {n for n in metric_names(target["expr"]) if not n.startswith("scheduler_")}
            assert names <= scraped_names[shown_for(panel)], where


def test_the_shadow_row_is_empty_for_an_extender(live: Stack) -> None:
    """The extender judges no placement: with its job chosen the row shows nothing (its
    descriptions say so)."""
    prom = live.prometheus
    values = grafana_variables(live)
    for panel in query_panels():
        if shown_for(panel) == "shadow":
            for target in panel["targets"]:
                assert prom.query(interpolate(target["expr"], values)) == [], panel["title"]


def test_the_running_services_export_only_series_the_dashboard_test_knows(live: Stack) -> None:
    """exported_series() (what the dashboard is checked against) covers every decice_
    series the real extender and the real shadow expose."""
    known = set(exported_series())
    for svc in (live.service, live.shadow):
        exposed = {n for n in series_with_samples(scraped(svc)) if n.startswith("decice_")}
        assert exposed <= known, sorted(exposed - known)


def test_every_alert_expression_against_the_real_service(live: Stack) -> None:
    """The faults' alerts: the whole expression returns exactly the expected series.
    A healthy service's alerts: the expression without its final comparison (or absent())
    returns series, the whole one returns none."""
    prom = live.prometheus
    rules = alert_rules()
    assert set(rules) == set(INDUCED) | QUIET | ON_THE_SCHEDULER, "a new alert needs a check"
    for name, labels in INDUCED.items():
        result = prom.query(rules[name]["expr"])
        assert result, f"{name} does not fire: {rules[name]['expr']}"
        for item in result:
            assert labels.items() <= item["metric"].items(), (name, item)
            assert item["metric"]["job"] == JOB and item["metric"]["namespace"] == NAMESPACE
    for name in sorted(QUIET):
        expr = rules[name]["expr"]
        assert prom.query(expr) == [], f"{name} fires on a healthy service"
        inner = without_final_comparison(expr)
        assert prom.query(inner), f"{name}: {inner} returns no series"
    watches = samples(prom, without_final_comparison(rules["DeciceWatchDown"]["expr"]))
    assert sorted(json.loads(k)["resource"] for k in watches) == ["nodes", "pods"]
    assert set(watches.values()) == {1.0}


def test_prometheus_loads_the_rules_and_the_faults_alerts_go_pending(live: Stack) -> None:
    prom = live.prometheus
    groups = prom.get("/api/v1/rules", [])["groups"]
    loaded = {r["name"]: r for g in groups for r in g["rules"]}
    assert set(loaded) == set(alert_rules())
    prom.wait_for(
        'count by (alertname) (ALERTS{alertstate="pending"})',
        lambda r: {s["metric"]["alertname"] for s in r} >= set(INDUCED),
        timeout=15,
    )
    groups = prom.get("/api/v1/rules", [])["groups"]
    for rule in (r for g in groups for r in g["rules"]):
        assert rule["health"] == "ok", rule
        assert rule["state"] == ("pending" if rule["name"] in INDUCED else "inactive"), rule


def test_watch_down_and_extender_down_fire_when_induced(stack: Stack) -> None:
    """Last (it stops the service): watches that keep failing, then the service gone."""
    prom, rules = stack.prometheus, alert_rules()
    stack.api.fail_next(500, times=20, watch=True)
    stack.api.break_watches()
    down = prom.wait_for(rules["DeciceWatchDown"]["expr"], bool, timeout=20)
    assert {s["metric"]["resource"] for s in down} <= {"nodes", "pods"}
    stack.service.stop()
    [target] = prom.wait_for(rules["DeciceExtenderDown"]["expr"], bool, timeout=20)
    assert target["metric"]["job"] == JOB and target["metric"]["pod"] == f"{RELEASE}-0"
    assert prom.query(rules["DeciceExtenderAbsent"]["expr"]) == []  # a target, down
