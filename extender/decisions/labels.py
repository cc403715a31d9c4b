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
        operator = expression.get("operator")
        values = expression.get("values") or ()
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False  # the API rejects such a selector: it selects nothing we can judge
    return True
