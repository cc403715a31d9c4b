"""Leader election through a coordination.k8s.io Lease: one replica writes at a time."""
