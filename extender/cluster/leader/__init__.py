"""Leader election on a coordination.k8s.io/v1 Lease (elector), and `Leadership`: what
the overload tainter, the rebalancer and the service ask of it. Importing this package
imports no Kubernetes client."""

from __future__ import annotations

from typing import Protocol


class Leadership(Protocol):
    """One replica's part in a Lease election (elector.LeaderElector): work only one
    replica may do runs while `is_leader`."""

    @property
    def is_leader(self) -> bool: ...

    async def run(self) -> None:
        """Campaign, and hold the Lease while leading, until cancelled."""

    def detail(self) -> dict[str, object]:
        """/readyz's view of the election."""
        ...
