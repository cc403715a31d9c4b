"""Leader election on a Lease (elector), and `Leadership`, what the tainter, the
rebalancer and the service ask of it (importing this package imports no client)."""

from __future__ import annotations

from typing import Protocol


class Leadership(Protocol):
    """One replica's part in the election (elector.LeaderElector)."""

    @property
    def is_leader(self) -> bool: ...

    async def run(self) -> None:
        """Campaign, and hold the Lease while leading, until cancelled."""

    def detail(self) -> dict[str, object]:
        """/readyz's view of the election."""
        ...
