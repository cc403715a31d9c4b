"""The Kubernetes calls the service makes: `client.KubeClient` (tests subclass it as
tests.harness.kubecalls.KubeCalls). A type alias only, so that importing this module does
not import the client and the `kubernetes` package (slow; loaded when a client is built).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from extender.cluster.client import KubeClient

KubeAPI: TypeAlias = "KubeClient"
