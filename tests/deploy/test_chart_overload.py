"""The chart with overload taints (`policy.overload.enabled`): off by default (the
extender's ClusterRole reads nodes, never patches them); when on, `patch` on nodes and a
Role on the overload Lease only, in the Lease's namespace. Checked against the requests a
real service with the rendered policy makes to the fake API server while it elects itself
and taints a hot node."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from extender.cluster.client import KubeClient
from extender.cluster.leader.elector import LeaderElector
from extender.decisions.overload import TAINT_KEY
from extender.metrics.providers import StaticProvider
from extender.policy.loading import load_settings
from extender.service.compose import build_service
from tests.deploy.chart import grants, rbac_of, render_mod, schema_problems
from tests.harness.asgi import lifespan
from tests.harness.kubeapi import FakeKubeAPI, client_for
from tests.harness.loopback import wait_until_async

RELEASE = "decice-extender"
NAMESPACE = "decice-system"
EXTENDER_ROLE = f"{RELEASE}-extender"
LEASE_ROLE = f"{RELEASE}-overload-lease"
ON: dict[str, Any] = {"policy": {"overload": {"enabled": True}}}


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    docs = render_mod.render_chart(values, name=RELEASE, namespace=NAMESPACE)
    return [yaml.safe_load(doc) for doc in render_mod.documents(docs)]


def named(objs: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]


def node_verbs(objs: list[dict[str, Any]]) -> set[str]:
    [role] = named(objs, "ClusterRole", EXTENDER_ROLE)
    return {verb for _, res, verb, _ in grants(role) if res == "nodes"}


def test_off_by_default_nodes_are_read_only_and_no_lease_role() -> None:
    objs = render({})
    assert node_verbs(objs) == {"get", "list", "watch"}
    assert not named(objs, "Role", LEASE_ROLE) and not named(objs, "RoleBinding", LEASE_ROLE)


def test_on_nodes_patch_and_a_role_on_the_overload_lease_only() -> None:
    objs = render(ON)
    assert schema_problems(objs) == []
    assert node_verbs(objs) == {"get", "list", "watch", "patch"}
    [role] = named(objs, "Role", LEASE_ROLE)
    assert role["metadata"]["namespace"] == NAMESPACE
    lease = "coordination.k8s.io"
    assert grants(role) == {
        (lease, "leases", "create", ()),
        (lease, "leases", "get", ("decice-overload",)),
        (lease, "leases", "update", ("decice-overload",)),
    }
    [binding] = named(objs, "RoleBinding", LEASE_ROLE)
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": LEASE_ROLE}  # fmt: skip
    [deployment] = named(objs, "Deployment", RELEASE)
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    ]


def test_the_lease_role_follows_lease_name_and_namespace() -> None:
    objs = render({"policy": {"overload": {"enabled": True, "leaseName": "hot",
                                           "leaseNamespace": "ops"}}})  # fmt: skip
    [role] = named(objs, "Role", LEASE_ROLE)
    [binding] = named(objs, "RoleBinding", LEASE_ROLE)
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "ops"
    assert {names for *_, names in grants(role) if names} == {("hot",)}
    assert binding["subjects"][0]["namespace"] == NAMESPACE  # the account stays home


def test_shadow_mode_gets_no_overload_rights() -> None:
    objs = render({"mode": "shadow", **ON})
    assert not named(objs, "Role", LEASE_ROLE)
    assert not [o for o in objs if o["kind"] == "ClusterRole" and "patch" in str(o["rules"])]


def allowed(objs: list[dict[str, Any]], request: tuple[str, str, str], namespace: str) -> bool:
    """Whether the extender's ClusterRole, or a Role of that namespace, grants it (any
    resourceNames: the test checks the names above)."""
    roles = named(objs, "ClusterRole", EXTENDER_ROLE) + [
        o for o in objs if o["kind"] == "Role" and o["metadata"]["namespace"] == namespace
    ]
    return any(request == grant[:3] for role in roles for grant in grants(role))


async def test_the_rules_are_what_a_tainting_service_calls(tmp_path: Path) -> None:
    """The rendered policy (forSeconds 1, a refresh a second) run by a real service, its
    real elector on the fake API server: it takes the Lease, taints the hot node and posts
    its Event; every request it made is granted."""
    objs = render(
        {"policy": {"overload": {"enabled": True, "forSeconds": 1}, "prometheus": {"interval": 1}}}
    )
    [policy] = named(objs, "ConfigMap", f"{RELEASE}-policy")
    path = tmp_path / "extender.yaml"
    path.write_text(policy["data"]["extender.yaml"])
    settings = load_settings(path, environ={})
    assert settings.overload.enabled and settings.overload.lease_namespace is None
    with FakeKubeAPI() as api:
        for i, node in enumerate(("node-a", "node-b", "node-c", "node-d"), start=1):
            api.add_node(node, f"10.0.0.{i}", cpu="4")
        elector_client = client_for(api)
        elector = LeaderElector(
            elector_client, name=settings.overload.lease_name, namespace=NAMESPACE,
            identity="decice-extender-0",
        )  # fmt: skip
        kube = KubeClient(client_for(api), timeout=2, retries=0)
        hot = {"cpu": 0.99, "memory": 0.5}
        cool = {"cpu": 0.1, "memory": 0.1}
        values = {"node-a": hot, "node-b": cool, "node-c": cool, "node-d": cool}
        provider = StaticProvider(values)
        service = build_service(settings, provider=provider, kube=kube, overload_leader=elector)

        def tainted() -> bool:
            doc = api.node("node-a")
            return doc is not None and any(
                t["key"] == TAINT_KEY for t in doc["spec"].get("taints") or []
            )

        transport = httpx.ASGITransport(app=service.app)
        async with (
            lifespan(service.app),
            httpx.AsyncClient(transport=transport, base_url="http://t") as client,
        ):
            await wait_until_async(tainted, 30, "node-a tainted")
            # /readyz lists the taints as the node watch shows them: a moment after the
            # patch's answer, so wait for its event too.
            overload: dict[str, object] = {}

            async def listed() -> bool:
                overload.update((await client.get("/readyz")).json()["overload"])
                return overload["tainted"] == ["node-a"]

            for _ in range(300):  # bounded: 30 s of 0.1 s polls
                if await listed():
                    break
                await asyncio.sleep(0.1)
            assert overload["tainted"] == ["node-a"], overload
        await kube.close()
        closer: Callable[[], None] = elector_client.close  # unannotated in `kubernetes`
        closer()
        requests = list(api.requests)
    needed = {(rbac_of(r), namespace_of(r.path)) for r in requests}
    assert (("", "nodes", "patch"), None) in needed
    assert (("coordination.k8s.io", "leases", "update"), NAMESPACE) in needed or (
        ("coordination.k8s.io", "leases", "create"),
        NAMESPACE,
    ) in needed
    refused = [(grant, ns) for grant, ns in needed if not allowed(objs, grant, ns or "")]
    assert refused == []


def namespace_of(path: str) -> str | None:
    parts = path.split("/")
    return parts[parts.index("namespaces") + 1] if "namespaces" in parts else None


@pytest.mark.parametrize("effect", ["NoSchedule", "PreferNoSchedule"])
def test_the_rendered_policy_keeps_the_overload_settings(effect: str, tmp_path: Path) -> None:
    objs = render({"policy": {"overload": {"enabled": True, "effect": effect}}})
    [policy] = named(objs, "ConfigMap", f"{RELEASE}-policy")
    path = tmp_path / "extender.yaml"
    path.write_text(policy["data"]["extender.yaml"])
    assert load_settings(path, environ={}).overload.effect == effect
