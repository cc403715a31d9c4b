"""The image on the real control plane: kube-scheduler (v1.35) binds pods through the
extender running from the built image (scripts/image) as its non-root user (65532), with
the chart's extender RBAC, its kubeconfig and policy mounted read-only at /etc/decice, as
the chart mounts them. Marked `image` too: run by .ci/run's image step, after the suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.harness.controlplane import EXTENDER_USER, ControlPlane, fake_nodes, pod_manifest
from tests.harness.controlplane import static_policy as make_policy
from tests.harness.image import MOUNT, ImageService, uids_of

pytestmark = [pytest.mark.e2e, pytest.mark.image]

#: node-3 is the coolest; node-5 is above the 0.9 threshold.
VALUES = {"node-1": 0.60, "node-2": 0.70, "node-3": 0.10, "node-4": 0.50, "node-5": 0.95}


def mounted_kubeconfig(control_plane: ControlPlane) -> str:
    """The extender user's kubeconfig, its CA named where the mount puts it."""
    config = yaml.safe_load(control_plane.kubeconfig(EXTENDER_USER).read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["certificate-authority"] = f"{MOUNT}/ca.crt"
    return yaml.safe_dump(config)


def test_the_scheduler_binds_through_the_extender_in_the_image(
    control_plane: ControlPlane, namespace: str, image: str, tmp_path: Path
) -> None:
    kube = control_plane.kube
    kube.ensure_nodes(fake_nodes(5))
    files: dict[str, Path | str] = {
        "kubeconfig": mounted_kubeconfig(control_plane),
        "ca.crt": control_plane.ca_file,
    }
    service = ImageService(
        image, make_policy(VALUES), tmp_path, {"KUBECONFIG": f"{MOUNT}/kubeconfig"}, files=files
    )
    try:
        service.start()
        control_plane.wait_extender_synced(service)
        control_plane.start_scheduler_for(service)
        control_plane.wait_scheduler_nodes(5)

        kube.create_pods(namespace, [pod_manifest(f"web-{i}") for i in range(3)])

        nodes = {kube.wait_bound(namespace, f"web-{i}", 60) for i in range(3)}
        assert "node-5" not in nodes  # filtered by the image's extender
        placed = kube.wait_event(namespace, "web-0", "Placed", 60)
        assert placed.reporter == "decice.io/extender", placed
        assert uids_of(service.port) == {65532}
        status, body = service.get("/metrics")
        assert status == 200
        bound = [
            line
            for line in body.decode().splitlines()
            if line.startswith('decice_decisions_total{outcome="bound",verb="bind"}')
        ]
        assert bound == ['decice_decisions_total{outcome="bound",verb="bind"} 3.0'], bound
    finally:
        control_plane.stop_scheduler()
        service.remove()
