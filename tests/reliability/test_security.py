"""Security: TLS and mutual TLS on the real server, the bind guard, method / content-type
/ size limits, no secrets in logs, loopback defaults."""

from __future__ import annotations

import json
import logging
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
import trustme
import yaml
from starlette.testclient import TestClient

from extender.policy.loading import parse_settings
from extender.policy.sections import ServerSettings
from extender.service.compose import Service, build_service
from tests.harness.fakeprom import FakePrometheus
from tests.harness.fixtures import fixture_bytes, make_snapshot
from tests.harness.kubeapi import FakeKubeAPI, KubeRequest, write_kubeconfig
from tests.harness.loopback import LOCALHOST, wait_until
from tests.harness.service import running_service
from tests.harness.stack import (
    NODES,
    NS,
    binding_args,
    extender_args,
    kube_client,
    policy,
    post,
)

REPO = Path(__file__).resolve().parents[2]
TLS_SCHEDULER_CONFIG = REPO / "config" / "scheduler-config-tls.yaml"
UID = "5b1f0e57-1111-4a4e-9d35-1f0f2e6d0aaa"
BINDING = f"/api/v1/namespaces/{NS}/pods/p1/binding"


# --- TLS / mTLS on the real server -------------------------------------------------------


def extender_entry() -> dict[str, Any]:
    doc = yaml.safe_load(TLS_SCHEDULER_CONFIG.read_text())
    entry: dict[str, Any] = doc["extenders"][0]
    return entry


def raw_request(
    port: int,
    context: ssl.SSLContext | None,
    server_name: str,
    method: str,
    path: str,
    body: bytes = b"",
) -> tuple[int, bytes]:
    """One HTTP/1.1 request over a fresh (TLS) connection; verifies `server_name` the way
    kube-scheduler does with tlsConfig.serverName while connecting to 127.0.0.1."""
    with socket.create_connection((LOCALHOST, port), timeout=5) as plain:
        sock: socket.socket = (
            context.wrap_socket(plain, server_hostname=server_name) if context else plain
        )
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {server_name}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    if not data:  # TLS 1.3: a rejected client certificate shows as a silent close
        raise ConnectionResetError("the server closed the connection without an answer")
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A server CA and certificate for serverName + 127.0.0.1, a client CA, a client
    certificate (the scheduler's) and a certificate from an unrelated CA."""
    d = tmp_path_factory.mktemp("pki")
    server_name = extender_entry()["tlsConfig"]["serverName"]
    server_ca, client_ca, rogue_ca = trustme.CA(), trustme.CA(), trustme.CA()
    server = server_ca.issue_cert(server_name, "127.0.0.1")
    server.cert_chain_pems[0].write_to_path(str(d / "tls.crt"))
    for pem in server.cert_chain_pems[1:]:
        pem.write_to_path(str(d / "tls.crt"), append=True)
    server.private_key_pem.write_to_path(str(d / "tls.key"))
    client_ca.cert_pem.write_to_path(str(d / "client-ca.crt"))
    return {
        "dir": d,
        "server_name": server_name,
        "server_ca": server_ca,
        "client": client_ca.issue_cert("kube-scheduler.local", common_name="system:kube-scheduler"),
        "rogue": rogue_ca.issue_cert("kube-scheduler.local", common_name="system:kube-scheduler"),
    }


def tls_policy(pki: dict[str, Any], mutual: bool) -> dict[str, Any]:
    d: Path = pki["dir"]
    tls = {"certFile": str(d / "tls.crt"), "keyFile": str(d / "tls.key")}
    if mutual:
        tls["clientCAFile"] = str(d / "client-ca.crt")
    return policy(server={"tls": tls, "gracePeriod": 2}, bind={"enabled": False})


def client_context(pki: dict[str, Any], cert: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    pki["server_ca"].configure_trust(context)
    if cert is not None:
        pki[cert].configure_cert(context)
    return context


def test_tls_serves_https_only(pki: dict[str, Any], tmp_path: Path) -> None:
    with running_service(
        tls_policy(pki, mutual=False),
        tmp_path,
        scheme="https",
        client_ssl=client_context(pki, None),
    ) as svc:
        status, body = raw_request(
            svc.port,
            client_context(pki, None),
            pki["server_name"],
            "POST",
            "/filter",
            fixture_bytes("filter-nodecache.json"),
        )
        assert status == 200 and orjson.loads(body)["Error"] == ""
        # a client that does not trust the server's CA refuses it
        with pytest.raises(ssl.SSLCertVerificationError):
            raw_request(
                svc.port, ssl.create_default_context(), pki["server_name"], "GET", "/healthz"
            )
        # plain HTTP to the TLS port gets no HTTP answer from the application
        try:
            status, _ = raw_request(svc.port, None, LOCALHOST, "GET", "/healthz")
        except (OSError, IndexError, ValueError):
            status = 0
        assert status != 200


def test_mutual_tls_requires_a_client_certificate_from_the_ca(
    pki: dict[str, Any], tmp_path: Path
) -> None:
    good = client_context(pki, "client")
    with running_service(
        tls_policy(pki, mutual=True), tmp_path, scheme="https", client_ssl=good
    ) as svc:
        status, body = raw_request(
            svc.port,
            good,
            pki["server_name"],
            "POST",
            "/prioritize",
            fixture_bytes("prioritize-nodecache.json"),
        )
        assert status == 200 and isinstance(orjson.loads(body), list)
        for cert in (None, "rogue"):
            with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
                raw_request(
                    svc.port, client_context(pki, cert), pki["server_name"], "GET", "/healthz"
                )
        assert svc.alive()


def test_the_tls_scheduler_config_matches_the_server() -> None:
    entry = extender_entry()
    assert entry["urlPrefix"].startswith("https://")
    assert entry["enableHTTPS"] is True
    tls = entry["tlsConfig"]
    assert tls["insecure"] is False
    assert {"serverName", "caFile", "certFile", "keyFile"} <= set(tls)
    assert entry["ignorable"] is False and entry["httpTimeout"] == "5s" and entry["weight"] == 2


# --- bind guard ---------------------------------------------------------------------------


def refused(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "decice.bind" and r.levelno == logging.WARNING and "refused" in r.getMessage()
    ]


@pytest.mark.parametrize("filtered", [True, False])
def test_guard_refuses_a_foreign_pod(
    kube_api: FakeKubeAPI, client: TestClient, caplog: pytest.LogCaptureFixture, filtered: bool
) -> None:
    caplog.set_level(logging.INFO)
    kube_api.add_pod(NS, "p1", UID, scheduler_name="default-scheduler")
    if filtered:
        post(client, "filter", extender_args(UID, "p1", ["node-1"], scheduler="default-scheduler"))
    _, answer = post(client, "bind", binding_args(UID, "p1", "node-1"))
    assert "schedulerName 'default-scheduler'" in answer["Error"]
    assert "bind.foreignPods" in answer["Error"]
    assert kube_api.requests_to("POST", BINDING) == []
    [line] = refused(caplog)
    assert "p1" in line and "schedulerName 'default-scheduler'" in line


def test_guard_binds_a_foreign_pod_when_told_to(kube_api: FakeKubeAPI) -> None:
    settings = parse_settings(policy(bind={"enabled": True, "foreignPods": "bind"}))
    kube_api.add_pod(NS, "p1", UID, scheduler_name="default-scheduler")
    with TestClient(build_service(settings, kube=kube_client(kube_api, settings)).app) as c:
        _, answer = post(c, "bind", binding_args(UID, "p1", "node-1"))
    assert answer["Error"] == ""
    assert kube_api.bind_count(NS, "p1") == 1


def test_guard_refuses_a_uid_that_does_not_match(
    kube_api: FakeKubeAPI, client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    kube_api.add_pod(NS, "p1", "another-uid")
    _, answer = post(client, "bind", binding_args(UID, "p1", "node-1"))
    assert "deleted and re-created" in answer["Error"]
    assert kube_api.requests_to("POST", BINDING) == []
    [line] = refused(caplog)
    assert UID in line and "another-uid" in line


def test_guard_refuses_a_node_the_filter_rejected(
    kube_api: FakeKubeAPI, client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    kube_api.add_pod(NS, "p1", UID)
    _, verdict = post(client, "filter", extender_args(UID, "p1", list(NODES)))
    assert set(verdict["FailedAndUnresolvableNodes"]) == {"node-5"}
    _, answer = post(client, "bind", binding_args(UID, "p1", "node-5"))
    assert "rejected by this extender's filter" in answer["Error"]
    assert kube_api.requests_to("POST", BINDING) == []
    [line] = refused(caplog)
    assert "node-5" in line and "rejected" in line


def test_guard_uses_the_latest_filter_call(
    kube_api: FakeKubeAPI, stack: Service, client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    """node-1 passed the first filter call; fresh data then pushes it over the threshold,
    the scheduler filters again, and a bind to node-1 is refused."""
    kube_api.add_pod(NS, "p1", UID)
    _, first = post(client, "filter", extender_args(UID, "p1", ["node-1", "node-3"]))
    assert first["FailedAndUnresolvableNodes"] == {}
    hot = dict(NODES, **{"node-1": 0.99})
    stack.engine.install(
        make_snapshot({"cpu": hot}, fetched_at=stack.engine.snapshot.taken_at),
        None,
        stack.engine.snapshot.taken_at,
    )
    _, second = post(client, "filter", extender_args(UID, "p1", ["node-1", "node-3"]))
    assert set(second["FailedAndUnresolvableNodes"]) == {"node-1"}
    _, answer = post(client, "bind", binding_args(UID, "p1", "node-1"))
    assert "rejected by this extender's filter" in answer["Error"]
    _, ok = post(client, "bind", binding_args(UID, "p1", "node-3"))
    assert ok["Error"] == ""
    assert kube_api.bind_count(NS, "p1") == 1
    assert len(refused(caplog)) == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("PodNamespace", "../kube-system"),
        ("PodNamespace", "Decice"),
        ("PodName", "p1/binding"),
        ("PodName", "p1\nFAKE LOG LINE bind bound: everything"),
        ("Node", "node-1?dryRun=All"),
        ("Node", "x" * 300),
    ],
)
def test_guard_refuses_names_kubernetes_would_never_have(
    kube_api: FakeKubeAPI,
    client: TestClient,
    caplog: pytest.LogCaptureFixture,
    field: str,
    value: str,
) -> None:
    args = binding_args(UID, "p1", "node-1")
    args[field] = value

    def calls() -> list[KubeRequest]:  # the watches reconnect in the background
        return [r for r in kube_api.requests if "watch" not in r.query]

    before = calls()  # the start-up lists
    status, answer = post(client, "bind", args)
    assert (
        status == 200
        and f"{field} " in answer["Error"]
        and "not a valid Kubernetes name" in answer["Error"]
    )
    assert calls() == before  # refused before any API call
    [line] = refused(caplog)
    assert "\n" not in line  # a newline in a name cannot forge a log line


# --- limits on the real server, secrets, defaults ----------------------------------------------


def test_limits_and_secrets_on_the_real_server(tmp_path: Path) -> None:
    """405 / 415 / 413 through uvicorn; the kubeconfig token and the Prometheus bearer
    token are used but never logged, even at debug level and when answers echo them."""
    kube_token = "kube-bearer-Zm9vYmFyMTIzNDU2Nzg5"
    prom_token = "prom-bearer-cXV4cXV4cXV4MTIzNDU2"
    token_file = tmp_path / "prom-token"
    token_file.write_text(prom_token + "\n")
    with FakeKubeAPI(token=kube_token) as api, FakePrometheus() as prom:
        api.add_pod(NS, "p1", UID)
        # a misbehaving proxy that echoes the request's credentials in its error answer
        prom.raw(401, b"unauthorized: Authorization: Bearer " + prom_token.encode())
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, kube_token)
        raw = policy(
            provider="prometheus",
            prometheus={
                "url": prom.url,
                "interval": 0.2,
                "maxBackoff": 0.4,
                "bearerTokenFile": str(token_file),
            },
            metrics=[{"name": "cpu", "query": "decice_node_cpu", "filter": {"above": 0.9}}],
            server={"maxBodyBytes": 4096, "gracePeriod": 2},
        )
        with running_service(
            raw, tmp_path, {"KUBECONFIG": str(kubeconfig)}, log_level="debug"
        ) as svc:
            assert svc.request("GET", "/filter", None)[0] == 405
            assert svc.request("PUT", "/bind", b"{}")[0] == 405
            status, body = svc.request("POST", "/filter", b"x" * 5000)
            assert status == 413 and b"maxBodyBytes" in body
            status, _ = svc.request(
                "POST", "/filter", b'{"NodeNames": [' + b'"n",' * 2000 + b'"n"]}'
            )
            assert status == 413
            # wrong content type through the real server
            req = urllib.request.Request(svc.url + "/filter", data=b"{}", method="POST")
            req.add_header("Content-Type", "text/plain")
            try:
                urllib.request.urlopen(req, timeout=5)
                raise AssertionError("expected 415")
            except urllib.error.HTTPError as exc:
                assert exc.code == 415
            # a bind that works, one that fails (401 from the API), after the filter
            svc.post("/filter", extender_args(UID, "p1", ["node-1"]))
            assert (
                json.loads(svc.post("/bind", binding_args(UID, "p1", "node-1"))[1])["Error"] == ""
            )
            api.fail_next(401)
            api.add_pod(NS, "p2", "uid-p2")
            error = json.loads(svc.post("/bind", binding_args("uid-p2", "p2", "node-1"))[1])[
                "Error"
            ]
            assert "401" in error and kube_token not in error
            # a few refreshes against the echoing Prometheus, and their failure logged
            wait_until(
                lambda: len(prom.headers) >= 3 and "metric cpu: refresh failed" in svc.stderr(),
                30,
                "three refreshes against the echoing Prometheus, their failure logged",
            )
        log = svc.stderr()
    assert any(h.get("authorization") == f"Bearer {prom_token}" for h in prom.headers)
    assert any(r.headers.get("authorization") == f"Bearer {kube_token}" for r in api.requests)
    assert "metric cpu: refresh failed" in log
    assert prom_token not in log, log[-3000:]
    assert kube_token not in log, log[-3000:]
    assert "Bearer <redacted>" in log


def test_defaults_listen_on_loopback_only(tmp_path: Path) -> None:
    assert ServerSettings().host == "127.0.0.1"
    assert (
        parse_settings(
            {
                "provider": "static",
                "static": {"nodes": {"n": {"cpu": 0.1}}},
                "metrics": [{"name": "cpu"}],
            }
        ).server.host
        == "127.0.0.1"
    )
    for path in sorted((REPO / "config").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if isinstance(doc, dict) and isinstance(doc.get("server"), dict):
            assert doc["server"].get("host", "127.0.0.1") == "127.0.0.1", path
    raw = policy(bind={"enabled": False})
    raw["server"] = {"gracePeriod": 1}  # no host: the default
    with running_service(raw, tmp_path) as svc:
        port_hex = f"{svc.port:04X}"
        listening = [
            line.split()[1]
            for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
            if line.split()[1].endswith(f":{port_hex}") and line.split()[3] == "0A"
        ]
        v6 = (
            [
                line.split()[1]
                for line in Path("/proc/net/tcp6").read_text().splitlines()[1:]
                if line.split()[1].endswith(f":{port_hex}") and line.split()[3] == "0A"
            ]
            if Path("/proc/net/tcp6").exists()
            else []
        )
    assert listening == [f"0100007F:{port_hex}"], listening
    assert v6 == []


def test_guard_refuses_a_node_the_filter_never_saw(
    kube_api: FakeKubeAPI, client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The API accepts a Binding to a node that does not exist: we do not send one."""
    kube_api.add_pod(NS, "p1", UID)
    post(client, "filter", extender_args(UID, "p1", ["node-1", "node-3"]))
    _, answer = post(client, "bind", binding_args(UID, "p1", "node-does-not-exist"))
    assert "was not among the nodes sent to this extender's filter" in answer["Error"]
    assert kube_api.requests_to("POST", BINDING) == []
    [line] = refused(caplog)
    assert "node-does-not-exist" in line
