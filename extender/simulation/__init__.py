"""A seeded simulation of placements: kube-scheduler, with our extender, and the peers.

Every scenario is a pure function of a seed; every scheduler sees the same nodes, load and
pods; ours runs the real engine over the wire format. Pure: extender.cli.simulate does I/O.
"""
