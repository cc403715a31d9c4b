"""extender.errors.redaction: one rule keeps credentials out of logs, /readyz and Error answers."""

from __future__ import annotations

import pytest

from extender.errors.redaction import redact, safe_url


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


def test_redact_hides_the_userinfo_of_urls() -> None:
    assert redact("GET https://admin:pa55@prom:9090/api failed") == (
        "GET https://<redacted>@prom:9090/api failed"
    )
    assert redact("mail me at a@b.example") == "mail me at a@b.example"  # not a URL


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://prometheus:9090", "http://prometheus:9090"),
        ("https://user:pass@prom.example/sub/?token=abc#x", "https://prom.example/sub/"),
        ("http://[fd00::1]:9090/", "http://[fd00::1]:9090/"),
        ("http://prom:notaport/", "<unparseable URL>"),
    ],
)
def test_safe_url(url: str, expected: str) -> None:
    assert safe_url(url) == expected
