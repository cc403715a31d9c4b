"""`decice-extender scheduler-config`: the scheduler's extenders entry that fits a policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.cli.main import main
from extender.policy.scheduler_config import DEFAULT_WEIGHT

NODES = {"nodes": {"node-1": {"cpu": 0.2}}}


def write_policy(tmp_path: Path, **policy: Any) -> str:
    raw: dict[str, Any] = {"provider": "static", "static": NODES, "bind": {"enabled": False}}
    raw.update(policy)
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main(["scheduler-config", *argv]) == 0
    return yaml.safe_load(capsys.readouterr().out)


def entry(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    doc = run(capsys, *argv)
    assert list(doc) == ["extenders"]
    assert len(doc["extenders"]) == 1
    out: dict[str, Any] = doc["extenders"][0]
    return out


def test_a_filtering_policy_asks_for_filter_and_prioritize(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_policy(tmp_path, metrics=[{"name": "cpu", "filter": {"above": 0.9}}])
    e = entry(capsys, "--config", config)
    assert e["urlPrefix"] == "http://127.0.0.1:8888"
    assert e["filterVerb"] == "filter"
    assert e["prioritizeVerb"] == "prioritize"
    assert e["nodeCacheCapable"] is True
    assert e["weight"] == DEFAULT_WEIGHT == 2
    assert e["httpTimeout"] == "5s"
    assert e["ignorable"] is False
    assert e["enableHTTPS"] is False
    assert "bindVerb" not in e


def test_fail_closed_without_threshold_still_filters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_policy(tmp_path, metrics=[{"name": "cpu", "onMissing": "fail-closed"}])
    assert entry(capsys, "--config", config)["filterVerb"] == "filter"


def test_no_filter_verb_when_the_policy_filters_nothing_and_fails_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_policy(tmp_path, metrics=[{"name": "cpu"}, {"name": "memory"}])
    e = entry(capsys, "--config", config)
    assert "filterVerb" not in e
    assert e["prioritizeVerb"] == "prioritize"
    assert e["nodeCacheCapable"] is True


def test_bind_verb_only_when_binding_is_enabled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_policy(tmp_path, metrics=[{"name": "cpu"}], bind={"enabled": True})
    assert entry(capsys, "--config", config)["bindVerb"] == "bind"
    config = write_policy(tmp_path, metrics=[{"name": "cpu"}], bind={"enabled": False})
    assert "bindVerb" not in entry(capsys, "--config", config)


def test_weight_timeout_and_host_from_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_policy(
        tmp_path,
        metrics=[{"name": "cpu"}],
        server={"host": "0.0.0.0", "port": 9443, "urlPrefix": "/decice"},
    )
    argv = ["--config", config, "--weight", "5", "--http-timeout", "2s"]
    e = entry(capsys, *argv, "--host", "decice.kube-system.svc")
    assert e["weight"] == 5
    assert e["httpTimeout"] == "2s"
    assert e["urlPrefix"] == "http://decice.kube-system.svc:9443/decice"
    # Without --host, a wildcard listen address becomes loopback.
    assert entry(capsys, *argv)["urlPrefix"] == "http://127.0.0.1:9443/decice"


def test_full_configuration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_policy(
        tmp_path,
        schedulerNames=["decice_sched", "other"],
        metrics=[{"name": "cpu", "filter": {"above": 0.9}}],
        bind={"enabled": True},
    )
    doc = run(capsys, "--config", config, "--full", "--weight", "3")
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert doc["kind"] == "KubeSchedulerConfiguration"
    assert [p["schedulerName"] for p in doc["profiles"]] == ["decice_sched", "other"]
    [e] = doc["extenders"]
    assert e["weight"] == 3
    assert e["filterVerb"] == "filter"
    assert e["bindVerb"] == "bind"
    assert e["nodeCacheCapable"] is True


def test_invalid_policy_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("metrics: []\nprovider: static\n")
    assert main(["scheduler-config", "--config", str(path)]) == 2
    assert "invalid configuration" in capsys.readouterr().err


# --- flag checks: weight, httpTimeout, host ------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The argparse error of `scheduler-config ARGV`: exit 2, the message on stderr."""
    with pytest.raises(SystemExit) as exc:
        main(["scheduler-config", *argv])
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


@pytest.fixture
def policy(tmp_path: Path) -> str:
    return write_policy(tmp_path, metrics=[{"name": "cpu"}])


@pytest.mark.parametrize("weight", ["1", "7", "100"])
def test_a_weight_from_1_to_100_is_printed_as_an_integer(
    policy: str, capsys: pytest.CaptureFixture[str], weight: str
) -> None:
    assert entry(capsys, "--config", policy, "--weight", weight)["weight"] == int(weight)


@pytest.mark.parametrize(
    ("weight", "why"),
    [
        ("-3", "-3 is not positive"),
        ("0", "0 is not positive"),
        ("101", "101 is above 100"),
        ("1.5", "'1.5' is not an integer"),
        ("heavy", "'heavy' is not an integer"),
    ],
)
def test_a_weight_kube_scheduler_would_refuse_or_that_is_suspicious_is_refused(
    policy: str, capsys: pytest.CaptureFixture[str], weight: str, why: str
) -> None:
    err = refused(capsys, "--config", policy, f"--weight={weight}")
    assert f"argument --weight: {why}" in err


@pytest.mark.parametrize(
    "timeout", ["5s", "500ms", "1m", "1m30s", "2.5s", "1h", "300us", "750\u00b5s", "90s"]
)
def test_a_go_duration_is_printed_as_the_string_given(
    policy: str, capsys: pytest.CaptureFixture[str], timeout: str
) -> None:
    e = entry(capsys, "--config", policy, "--http-timeout", timeout)
    assert e["httpTimeout"] == timeout
    assert isinstance(e["httpTimeout"], str)


@pytest.mark.parametrize(
    ("timeout", "why"),
    [
        ("5", "'5' has no unit"),
        ("2.5", "'2.5' has no unit"),
        ("-1s", "'-1s' is negative"),
        ("0s", "'0s' is zero"),
        ("0.0ms", "'0.0ms' is zero"),
        ("0.1ns", "'0.1ns' is zero"),  # Go truncates it to 0, then the scheduler uses 5s
        ("5 s", "'5 s' is not a Go duration"),
        ("5sec", "'5sec' is not a Go duration"),
        ("1d", "'1d' is not a Go duration"),
        ("s", "'s' is not a Go duration"),
        ("", "'' is not a Go duration"),
        ("soon", "'soon' is not a Go duration"),
        ("99999999999h", "'99999999999h' is too long for a Go duration"),
    ],
)
def test_a_timeout_that_is_not_a_positive_go_duration_is_refused(
    policy: str, capsys: pytest.CaptureFixture[str], timeout: str, why: str
) -> None:
    err = refused(capsys, "--config", policy, f"--http-timeout={timeout}")
    assert f"argument --http-timeout: {why}" in err


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8888"),
        ("localhost", "http://localhost:8888"),
        ("decice-extender.kube-system.svc", "http://decice-extender.kube-system.svc:8888"),
        ("decice-extender", "http://decice-extender:8888"),
        ("10.244.1.7", "http://10.244.1.7:8888"),
        ("::1", "http://[::1]:8888"),
        ("[::1]", "http://[::1]:8888"),
        ("2001:DB8:0:0::5", "http://[2001:db8::5]:8888"),
        ("[fd00::7]", "http://[fd00::7]:8888"),
    ],
)
def test_a_host_the_scheduler_can_dial_goes_into_the_url_ipv6_bracketed(
    policy: str, capsys: pytest.CaptureFixture[str], host: str, url: str
) -> None:
    assert entry(capsys, "--config", policy, "--host", host)["urlPrefix"] == url


@pytest.mark.parametrize(
    ("host", "why"),
    [
        ("0.0.0.0", "wildcard listen address"),
        ("::", "wildcard listen address"),
        ("[::]", "wildcard listen address"),
        ("", "empty"),
        ("  ", "empty"),
        ("10.0.0.1:8888", "leave out the port"),
        ("decice.svc:8888", "leave out the port"),
        ("http://decice.svc", "not a host"),
        ("decice.svc/filter", "not a host"),
        ("999.1.1.1", "neither an IP address nor a DNS name"),
        ("under_score.svc", "neither an IP address nor a DNS name"),
        ("-bad.svc", "neither an IP address nor a DNS name"),
        ("[decice.svc]", "brackets hold an IPv6 address"),
        ("224.0.0.1", "multicast or broadcast"),
        ("255.255.255.255", "multicast or broadcast"),
        ("ff02::1", "multicast or broadcast"),
        ("fe80::1%eth0", "zone index"),
    ],
)
def test_a_host_the_scheduler_cannot_dial_is_refused_with_what_to_use(
    policy: str, capsys: pytest.CaptureFixture[str], host: str, why: str
) -> None:
    err = refused(capsys, "--config", policy, f"--host={host}")
    assert "argument --host: " in err and why in err
    if why in {"wildcard listen address", "empty"}:
        assert "use 127.0.0.1" in err and "decice-extender.decice-system.svc" in err


@pytest.mark.parametrize(
    ("listen", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8888"),
        ("::1", "http://[::1]:8888"),
        ("0.0.0.0", "http://127.0.0.1:8888"),
        ("::", "http://127.0.0.1:8888"),
        ("localhost", "http://localhost:8888"),
    ],
)
def test_without_host_the_policy_listen_address_is_used_ipv6_bracketed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listen: str, url: str
) -> None:
    config = write_policy(tmp_path, metrics=[{"name": "cpu"}], server={"host": listen})
    assert entry(capsys, "--config", config)["urlPrefix"] == url


# --- --full: leader election on a lease of our own ------------------------------------------


def full(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, dict[str, Any]]:
    assert main(["scheduler-config", "--full", *argv]) == 0
    out = capsys.readouterr().out
    doc: dict[str, Any] = yaml.safe_load(out)
    return out, doc


def test_full_takes_the_decice_scheduler_lease_in_decice_system_by_default(
    policy: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out, doc = full(capsys, "--config", policy)
    assert doc["leaderElection"] == {
        "leaderElect": True,
        "resourceLock": "leases",
        "resourceName": "decice-scheduler",
        "resourceNamespace": "decice-system",
    }
    # The RBAC it needs, as a comment above the document.
    header = [line for line in out.splitlines() if line.startswith("#")]
    text = "\n".join(header)
    assert "Lease decice-system/decice-scheduler" in text
    assert "system:kube-scheduler" in text
    assert "#   decice-extender scheduler-config --rbac [--service-account" in text
    assert out.index("apiVersion:") > out.index(header[-1])


def test_full_with_lease_flags(policy: str, capsys: pytest.CaptureFixture[str]) -> None:
    out, doc = full(
        capsys, "--config", policy, "--lease-name", "gpu-sched", "--lease-namespace", "sched"
    )
    le = doc["leaderElection"]
    assert (le["resourceNamespace"], le["resourceName"]) == ("sched", "gpu-sched")
    assert "Lease sched/gpu-sched" in out
    assert "--rbac --lease-namespace sched --lease-name gpu-sched" in out


@pytest.mark.parametrize(
    ("flag", "value", "why"),
    [
        ("--lease-name", "kube-scheduler", "the default scheduler's lease"),
        ("--lease-name", "Decice_Scheduler", "not a Lease name"),
        ("--lease-name", "-x", "not a Lease name"),
        ("--lease-name", "x" * 238, "at most 237 characters"),
        ("--lease-namespace", "Kube_System", "not a namespace name"),
        ("--lease-namespace", "a.b", "not a namespace name"),
        ("--lease-namespace", "n" * 64, "at most 63 characters"),
    ],
)
def test_bad_lease_names_are_refused(
    policy: str, capsys: pytest.CaptureFixture[str], flag: str, value: str, why: str
) -> None:
    err = refused(capsys, "--config", policy, "--full", f"{flag}={value}")
    assert f"argument {flag}: " in err and why in err


def test_the_shipped_scheduler_config_is_what_full_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, doc = full(capsys, "--config", str(ROOT / "config" / "extender.yaml"))
    shipped = yaml.safe_load((ROOT / "config" / "scheduler-config.yaml").read_text())
    assert shipped == doc


@pytest.mark.parametrize(
    "name",
    [
        "scheduler-config.yaml",
        "scheduler-config-tls.yaml",
        "scheduler-config-second-scheduler.yaml",
    ],
)
def test_every_shipped_scheduler_config_names_its_lease_namespace(
    capsys: pytest.CaptureFixture[str], policy: str, name: str
) -> None:
    text = (ROOT / "config" / name).read_text()
    le = yaml.safe_load(text)["leaderElection"]
    _, doc = full(capsys, "--config", policy)
    assert {k: le[k] for k in doc["leaderElection"]} == doc["leaderElection"]
    assert "--rbac" in text  # a pointer to the RBAC the lease needs


# --- --rbac: the Role + RoleBinding of the lease -----------------------------------------


def rbac(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    import kubernetes_validate

    assert main(["scheduler-config", "--rbac", *argv]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# kube-scheduler leader election on the Lease ")
    docs = [d for d in yaml.safe_load_all(out) if d]
    for obj in docs:
        kubernetes_validate.validate(obj, "1.35.4", strict=True)
    return docs


def test_rbac_grants_create_and_get_update_on_the_lease_name_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    role, binding = rbac(capsys)
    assert role["kind"] == "Role"
    assert role["metadata"]["name"] == "decice-scheduler-leader-election"
    assert role["metadata"]["namespace"] == "decice-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["decice-scheduler"],
            "verbs": ["get", "update"],
        },
    ]
    assert binding["kind"] == "RoleBinding"
    assert binding["metadata"]["namespace"] == "decice-system"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "decice-scheduler-leader-election",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "decice-extender", "namespace": "decice-system"}
    ]


def test_rbac_follows_the_lease_and_the_scheduler_identity(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lease = ["--lease-namespace", "sched", "--lease-name", "gpu-sched"]
    role, binding = rbac(capsys, *lease, "--service-account", "ops/kube-sched")
    assert role["metadata"] == binding["metadata"]
    assert role["metadata"]["namespace"] == "sched"
    assert role["rules"][1]["resourceNames"] == ["gpu-sched"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kube-sched", "namespace": "ops"}
    ]
    _, binding = rbac(capsys, *lease, "--service-account", "kube-sched")
    assert binding["subjects"][0]["namespace"] == "sched"
    _, binding = rbac(capsys, "--user", "system:kube-scheduler")
    assert binding["subjects"] == [
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "system:kube-scheduler"}
    ]


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["--rbac", "--full"], "argument --full: not allowed with argument --rbac"),
        (["--rbac", "--config", "x.yaml"], "--config: not with --rbac"),
        (["--rbac", "--weight", "2", "--host", "h"], "--weight, --host: not with --rbac"),
        (["--rbac", "--service-account", "a", "--user", "b"], "not allowed with argument"),
        (["--rbac", "--service-account", "Bad/x"], "not a namespace name"),
        (["--rbac", "--service-account", "ns/"], "not [NAMESPACE/]NAME"),
        (["--rbac", "--user", " "], "give the user name"),
        (["--weight", "2"], "required: --config (unless --rbac)"),
        (["--config", "x.yaml", "--lease-name", "l"], "--lease-name: only with --full or --rbac"),
        (["--config", "x.yaml", "--full", "--user", "u"], "--user: only with --rbac"),
    ],
)
def test_flags_that_do_not_go_together_are_refused(
    capsys: pytest.CaptureFixture[str], argv: list[str], why: str
) -> None:
    assert why in refused(capsys, *argv)
