"""End-to-end stories: the real kube-scheduler, through our service, on a real API server
(tests/harness/controlplane.py)."""
