"""The Kubernetes calls the service makes: `client.KubeClient`, as a type alias only, so
that importing this module imports neither the client nor the slow `kubernetes` package."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from extender.cluster.client import KubeClient

KubeAPI: TypeAlias = "KubeClient"
