"""The request path's state: the snapshot, the policies' tables, the herd guard and the
memory of pods, changed only on the event loop (no locks: the refresher builds tables in
a thread and installs them here). The engine decides the verbs from it. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import replace

from extender.decisions.guard import HerdGuard
from extender.decisions.headroom import Sizes
from extender.decisions.herd import Reservation
from extender.decisions.model import NodeInventory, NodeName, Snapshot
from extender.decisions.nodes import remap_nodes
from extender.decisions.pods import PodFacts, PodMemory, Preemptions
from extender.decisions.scoring import stale_metrics
from extender.decisions.table import PolicyTables, Table, build_table
from extender.decisions.turnedaway import TurnedAway, TurnedAwayPods
from extender.decisions.usage import UsageTable
from extender.policy.policies import Policy
from extender.policy.settings import Settings, policy_for

NOMINATED = "nominated"
"""The source of a reservation held for a nominated pod (decisions.held)."""
EXPECTED = "expected"
"""The source of a reservation held where our prioritize answer sends a pod, until our
bind or the pod watch says where it went (decisions.held)."""


class DecisionState:
    def __init__(
        self,
        settings: Settings,
        snapshot: Snapshot,
        now: float,
        turned_away: TurnedAwayPods | None = None,
    ) -> None:
        self.guard = HerdGuard(settings)
        self._herd = self.guard.ledger
        self.settings = settings
        self.pods = PodMemory(settings.explain.keep_pods)
        self.preemptions = Preemptions()
        self.turned_away = turned_away
        """Pods turned away from every node, when cluster.requeue acts on them."""
        self._sizes_watched = False
        self._tentative: dict[str, float] = {}
        """Nominations /preempt expects, not yet shown by the pod watch: uid -> until when."""
        self._expected: dict[str, float] = {}  # EXPECTED pods: uid -> until, earliest first
        self.nominations: Callable[[str, bool], None] = lambda uid, counted: None
        """Told of each pod counted (or no longer) on a nominated node, for the pod watch's
        filter (cluster.watch_filter)."""
        self._snapshot = snapshot
        sizes = self.sizes
        self._tables = PolicyTables(build_tables(settings, snapshot, {}, now, sizes), sizes)

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def settings(self) -> Settings:
        return self._settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        # Resolved once per install: Settings' derived policies are slow to read per request.
        self._settings = settings
        self.policies: Mapping[str, Policy] = settings.policy_map
        self._default: Policy = settings.default
        self.guard.configure(settings)

    def herd(self) -> dict[NodeName, float]:
        return dict(self._herd.load)

    def install(
        self,
        snapshot: Snapshot,
        tables: Mapping[str, Table] | None,
        now: float,
        settings: Settings | None = None,
    ) -> None:
        """Swap in a snapshot (its tables built off the loop) and, on a reload, `settings`, in
        one step, so a request is decided wholly on the old tables or wholly on the new."""
        if settings is not None:
            self.settings = settings
        if (self._snapshot.usage.fetched_at or -1.0) > (snapshot.usage.fetched_at or -1.0):
            # The measured use comes on its own interval: keep the newer one.
            snapshot = replace(snapshot, usage=self._snapshot.usage)
        self.guard.install(snapshot)
        self._snapshot = snapshot
        self._tables.replace(self.policies, snapshot, tables or {}, self.herd(), now)

    def install_usage(self, usage: UsageTable, now: float) -> None:
        """New measured use of pods: the herd guard charges its reservations anew and the
        nodes whose load moved are re-scored."""
        before = dict(self._herd.load)
        self._snapshot = replace(self._snapshot, usage=usage)
        self.guard.install(self._snapshot)
        self._patch_moved(before, now)

    def _patch_moved(self, before: Mapping[NodeName, float], now: float) -> None:
        after = self._herd.load
        for node in {n for n in before.keys() | after.keys() if before.get(n) != after.get(n)}:
            self._patch(node, now)

    def set_node_cores(self, cores: Mapping[NodeName, float]) -> None:
        if cores != self._herd.node_cores:
            self._herd.set_node_cores(cores)
            self._tables.resize(self.policies.values(), self.sizes)

    @property
    def sizes(self) -> Sizes:
        """The nodes' cores as the node watch told them (unknown for the others, once)."""
        default = None if self._sizes_watched else self.settings.herd_guard.default_node_cores
        return Sizes(self._herd.node_cores, default)

    def watch_sizes(self, now: float) -> None:
        """A node watch tells node sizes: until it has told a node's, no verb turns a pod
        away from it for its size (the scheduler's resource checks stand); without one,
        herdGuard.defaultNodeCores stands in."""
        if not self._sizes_watched:
            self._sizes_watched = True
            self._herd.watch_sizes()
            self._tables.resize(self.policies.values(), self.sizes)
            self._tables.replace(self.policies, self._snapshot, {}, self.herd(), now)

    def policy_of(self, pod: PodFacts) -> Policy | None:
        """The policy the pod asks for, else the default; None when it does not exist."""
        return policy_for(self.policies, self._default, pod.policy)

    def table(self, now: float, policy: Policy | None = None) -> Table:
        """The policy's current table (the default's when None), rebuilt when a metric of it
        crosses its maxAge."""
        return self._tables.current(policy or self._default, self._snapshot, self._herd.load, now)

    def answered_nodes(self, now: float) -> Callable[[PodFacts], frozenset[NodeName]]:
        """For wire.parse_extender_args: the nodes of the precomputed prioritize answer of
        the pod's policy (none for a pod not ours)."""

        def nodes(pod: PodFacts) -> frozenset[NodeName]:
            policy = self.policy_of(pod) if self.is_ours(pod) else None
            return self.table(now, policy).whole.nodes if policy is not None else frozenset()

        return nodes

    def reserve(
        self,
        uid: str,
        node: NodeName,
        cores: float | None,
        now: float,
        source: str = "bind",
        *,
        pod: PodFacts | None = None,
        assigned_at: float | None = None,
    ) -> bool:
        """Herd guard: count a placed pod on its node until the metric shows it, once per
        UID; its expected use from `pod`, else our filter call's, else `cores`. One held as
        nominated or expected (decisions.held) that our bind or the pod watch now shows
        placed counts as placed, from its bind, on the node it went to."""
        held = self._herd.reservations.get(uid)
        if held is not None and held.source != source and held.source in (NOMINATED, EXPECTED):
            self.release(uid, now)
            if held.source == NOMINATED:
                self.nominations(uid, False)
                self._tentative.pop(uid, None)
            self._expected.pop(uid, None)
        memo = self.pods.get(uid) if pod is None else None
        facts = pod or (memo.facts if memo is not None else PodFacts(uid, "", "", "", cores))
        expectation = self.guard.reserve(uid, node, facts, self._snapshot, now, source, assigned_at)
        if expectation is None:
            return False
        self.pods.expect(uid, str(expectation))
        self._patch(node, now)
        return True

    def release(self, uid: str, now: float, gone: PodFacts | None = None) -> bool:
        """The pod was deleted or finished: its reservation is free again, and with `gone`
        its node is credited what the metric still shows of it (herd.departure)."""
        node = self.guard.release(uid, gone, self._snapshot, now)
        if node is not None:
            self._patch(node, now)
        return node is not None

    def _patch(self, node: NodeName, now: float) -> None:
        self._tables.patch(self.policies.values(), node, self._snapshot, self._herd.load, now)

    def recovered(self, now: float) -> list[TurnedAway]:
        """Turned-away pods with a candidate node the default policy's table passes (they do
        not keep their policy; one that still fails is turned away again)."""
        if self.turned_away is None or not len(self.turned_away):
            return []
        table = self.table(now)
        headroom = table.headroom
        room, most = (headroom.for_node, headroom.most()) if headroom is not None else (None, 0.0)
        return self.turned_away.recovered(table.passes, table.ok, now, room, most)

    @property
    def reservations(self) -> Mapping[str, Reservation]:
        return self._herd.reservations

    def is_ours(self, pod: PodFacts) -> bool:
        return pod.scheduler_name in self.settings.scheduler_names

    def nodes_changed(
        self, inventory: NodeInventory, removed: Collection[NodeName], now: float
    ) -> None:
        """The node cache changed, told at once: node sizes, addresses (nodes.remap_nodes)
        and removed nodes, whose reservations and table rows go."""
        gone = frozenset(removed)
        for node in gone:
            self._herd.drop_node(node)
        before = dict(self._herd.load)
        self.set_node_cores(inventory.cpu_cores)
        snapshot = remap_nodes(self._snapshot, inventory, gone)
        if snapshot is not self._snapshot:
            self._snapshot = snapshot
            self._tables.replace(self.policies, snapshot, {}, self.herd(), now)
        else:
            self._patch_moved(before, now)


def build_tables(
    settings: Settings,
    snapshot: Snapshot,
    herd: Mapping[NodeName, float],
    now: float,
    sizes: Sizes | None = None,
) -> dict[str, Table]:
    """policy -> its table for `snapshot`: O(policies x nodes x metrics), off the request
    path (the refresher and a reload run it in a thread)."""
    return {
        name: build_table(policy, snapshot, stale_metrics(policy, snapshot, now), herd, now, sizes)
        for name, policy in settings.policy_map.items()
    }
