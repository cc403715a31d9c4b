"""Label selectors as Kubernetes reads them (metav1.LabelSelector). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LabelSelector = Mapping[str, Any]


def selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Kubernetes' label selector semantics: every matchLabels pair and every expression
    (In, NotIn, Exists, DoesNotExist) must hold; an empty selector selects everything."""
    if selector is None:
        return False
    match = selector.get("matchLabels") or {}
    if any(labels.get(k) != v for k, v in match.items()):
        return False
    for expression in selector.get("matchExpressions") or ():
        key = expression.get("key")
        present = key in labels
        listed = present and labels[key] in (expression.get("values") or ())
        holds = {"In": listed, "NotIn": not listed, "Exists": present, "DoesNotExist": not present}
        # An operator the API rejects: the selector selects nothing we can judge.
        if not holds.get(expression.get("operator"), False):
            return False
    return True
