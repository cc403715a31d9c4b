"""extender.redaction: one rule keeps credentials out of logs, /readyz and Error answers."""

from __future__ import annotations

import pytest

from extender.redaction import redact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer <redacted>"),
        ("authorization: basic dXNlcjpwYXNz, then", "authorization: basic <redacted>, then"),
        ("(Bearer t0ken)", "(Bearer <redacted>)"),
        ('{"auth": "Bearer x"}', '{"auth": "Bearer <redacted>"}'),
        ("no credentials here", "no credentials here"),
        ("a bearer of news", "a bearer <redacted> news"),  # err on the side of hiding
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected
