"""What the commands that read a policy file share."""

from __future__ import annotations

import os
from pathlib import Path

from extender.policy.loading import load_settings
from extender.policy.settings import Settings


def load(path: str) -> Settings:
    """The policy file, with the environment's overrides (PROMETHEUS_URL, KUBECONFIG)."""
    return load_settings(Path(path), os.environ)
