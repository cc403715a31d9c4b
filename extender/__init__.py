"""decice-extender: a metrics-aware kube-scheduler extender."""

__version__ = "0.1.0"
