"""Policy validation: defaults, every bad key named in one error, env overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from extender.policy.fields import ConfigError
from extender.policy.loading import load_settings, parse_settings
from extender.policy.policies import DEFAULT_CPU_QUERY
from tests.harness.fixtures import make_settings

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_configs_load() -> None:
    demo = load_settings(ROOT / "config" / "demo.yaml")
    assert demo.provider == "static" and demo.bind.enabled is False
    prod = load_settings(ROOT / "config" / "extender.yaml")
    assert prod.provider == "prometheus"
    assert prod.default.metrics[0].name == "cpu"
    assert "node_namespace_pod:kube_pod_info:" in prod.default.metrics[0].query
    assert prod.prometheus.node_label == "node"


def test_defaults_give_the_stock_cpu_query() -> None:
    s = parse_settings({})
    assert s.single_metrics is None and list(s.policy_map) == ["default"]
    assert [m.name for m in s.default.metrics] == ["cpu"]
    assert s.default.metrics[0].query == DEFAULT_CPU_QUERY
    assert s.scheduler_names == frozenset({"decice_sched"})
    assert s.server.host == "127.0.0.1" and s.server.port == 8888
    assert s.default.metrics[0].on_missing == "fail-open"


def test_environment_overrides_url_and_kubeconfig(tmp_path: Path) -> None:
    env = {"PROMETHEUS_URL": "http://prom.example:9090/", "KUBECONFIG": "/tmp/kc"}
    s = parse_settings({"prometheus": {"url": "http://ignored:9090"}}, env)
    assert s.prometheus.url == "http://prom.example:9090"
    assert s.kubernetes.kubeconfig == "/tmp/kc"


def test_every_problem_is_named_at_once() -> None:
    raw = {
        "sever": {},
        "server": {"port": "eighty", "urlPrefix": "nope"},
        "metrics": [
            {"name": "CPU", "weight": -1, "direction": "down", "min": 1, "max": 0},
            {"name": "mem", "query": "x", "onMissing": "maybe", "filter": {"abov": 1}},
            {"name": "disk", "query": "y", "min": 1, "max": 0},
        ],
        "bind": {"foreignPods": "sometimes"},
        "prioritize": {"maxHosts": 0},
    }
    with pytest.raises(ConfigError) as info:
        parse_settings(raw, source="policy.yaml")
    text = str(info.value)
    for needle in [
        "sever: unknown key (did you mean 'server'?)",
        "server.port: Input should be a valid integer (got 'eighty')",
        "server.urlPrefix: must be a path",
        "metrics[0].name: String should match pattern '^[a-z][a-z0-9_]*$' (got 'CPU')",
        "metrics[0].weight: Input should be greater than 0 (got -1)",
        "metrics[0].direction: Input should be 'lower' or 'higher' (got 'down')",
        "metrics[2]: max (0) must be greater than min (1)",
        "metrics[1].onMissing: Input should be 'fail-open' or 'fail-closed' (got 'maybe')",
        "metrics[1].filter.abov: unknown key (did you mean 'above'?)",
        "bind.foreignPods: Input should be 'refuse' or 'bind' (got 'sometimes')",
        "prioritize.maxHosts: Input should be greater than or equal to 1 (got 0)",
    ]:
        assert needle in text, needle
    assert text.startswith("policy.yaml: ")
    assert len(info.value.problems) >= 11


def test_every_cross_key_problem_is_named_at_once() -> None:
    # pydantic checks keys against each other only once every key is valid on its own, so
    # these come in a file of their own.
    raw = {
        "metrics": [{"name": "cpu"}, {"name": "mem", "query": "x"}, {"name": "disk", "query": ""}],
        "herdGuard": {"metric": "gpu"},
        "defaultPolicy": "fast",
    }
    with pytest.raises(ConfigError) as info:
        parse_settings(raw, source="policy.yaml")
    text = str(info.value)
    for needle in [
        "metrics[0](cpu).query: required when provider is prometheus",
        "metrics[2](disk).query: required when provider is prometheus",
        "herdGuard.metric: 'gpu' is not one of the metrics ['cpu', 'disk', 'mem']",
        "defaultPolicy: 'fast' names no policy",
    ]:
        assert needle in text, needle
    assert text.startswith("policy.yaml: ")
    assert len(info.value.problems) == 4


def test_duplicate_metric_names_and_herd_metric_checked() -> None:
    static = {"provider": "static", "static": {"nodes": {"a": {"x": 1}}}}
    with pytest.raises(ConfigError) as info:
        parse_settings({**static, "metrics": [{"name": "x"}, {"name": "x"}]})
    assert "metrics: duplicate metric name(s) 'x'" in str(info.value)
    with pytest.raises(ConfigError) as info:
        parse_settings({**static, "metrics": [{"name": "x"}], "herdGuard": {"metric": "cpu"}})
    assert "herdGuard.metric: 'cpu' is not one of the metrics ['x']" in str(info.value)


def test_herd_guard_off_when_default_metric_absent() -> None:
    s = parse_settings(
        {"provider": "static", "static": {"nodes": {"a": {"x": 1}}}, "metrics": [{"name": "x"}]}
    )
    assert s.default.herd_metric is None and not s.herd_guarded


def test_static_provider_needs_values_and_tls_needs_pairs() -> None:
    with pytest.raises(ConfigError) as info:
        parse_settings({"provider": "static", "metrics": [{"name": "cpu"}]})
    assert "static.nodes: provider is static" in str(info.value)
    with pytest.raises(ConfigError) as info:
        parse_settings({"server": {"tls": {"certFile": "c"}}})
    assert "server.tls: certFile and keyFile must be set together" in str(info.value)


def test_file_errors_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("metrics: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(ConfigError, match="the file is empty"):
        load_settings(empty)
    listy = tmp_path / "list.yaml"
    listy.write_text(yaml.safe_dump([1, 2]))
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_settings(listy)


def test_filters_anything() -> None:
    assert not parse_settings({}).filters_anything
    assert parse_settings(
        {"metrics": [{"name": "cpu", "query": "q", "filter": {"above": 0.9}}]}
    ).filters_anything
    assert parse_settings(
        {"metrics": [{"name": "cpu", "query": "q", "onMissing": "fail-closed"}]}
    ).filters_anything


def test_explain_node_metrics_switch() -> None:
    assert parse_settings({}).explain.node_metrics is True
    assert parse_settings({"explain": {"nodeMetrics": False}}).explain.node_metrics is False
    with pytest.raises(ConfigError) as caught:
        parse_settings({"explain": {"nodeMetrics": "no", "event": True}})
    assert "explain.nodeMetrics: Input should be a valid boolean (got 'no')" in str(caught.value)
    assert "explain.event: unknown key (did you mean 'events'?)" in str(caught.value)


def test_a_metrics_listener_of_its_own() -> None:
    server = make_settings(server={"metricsPort": 9090, "metricsHost": "10.0.0.7"}).server
    assert (server.metrics_port, server.metrics_host) == (9090, "10.0.0.7")
    assert make_settings().server.metrics_port is None  # one listener, as before
    with pytest.raises(
        ConfigError, match=r"server: metricsPort must be a port of its own, not 8888"
    ):
        make_settings(server={"port": 8888, "metricsPort": 8888})


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.7", "decice.example"])
def test_bind_is_never_exposed_beyond_the_pod_without_mutual_tls(host: str) -> None:
    with pytest.raises(ConfigError, match="would let anyone who reaches this pod bind pods"):
        make_settings(server={"host": host}, bind={"enabled": True})
    make_settings(server={"host": host}, bind={"enabled": False})  # no /bind: fine
    mtls = {"certFile": "/c.pem", "keyFile": "/k.pem", "clientCAFile": "/ca.pem"}
    make_settings(server={"host": host, "tls": mtls}, bind={"enabled": True})


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_hosts_keep_bind(host: str) -> None:
    assert make_settings(server={"host": host}, bind={"enabled": True}).server.host == host


def test_prometheus_url_without_a_scheme_is_named() -> None:
    from extender.policy.fields import ConfigError
    from extender.policy.loading import parse_text

    with pytest.raises(ConfigError, match=r"prometheus\.url.*must start with http:// or https://"):
        parse_text("prometheus:\n  url: prometheus:9090\n")
