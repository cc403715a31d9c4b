"""extender.service.logs: one handler and format for ours and uvicorn's loggers, text or JSON lines,
the format flag, and the start-up line."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from extender import __version__
from extender.cli.main import main, parser
from extender.policy.fields import ConfigError
from extender.service import logs
from tests.harness.fixtures import make_settings

TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (\w+) ([\w.]+): (.*)$")


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """dictConfig replaces the root handlers and uvicorn's loggers: put them back (pytest
    adds its own capture handlers to the root again for each test phase)."""
    root = logging.getLogger()
    names = ["decice", *logs.UVICORN_LOGGERS]
    saved = {
        name: (lg.handlers[:], lg.level, lg.propagate, lg.disabled)
        for name in names
        for lg in [logging.getLogger(name)]
    }
    level = root.level
    yield
    for handler in root.handlers[:]:
        if isinstance(handler.formatter, logs.TextFormatter | logs.JsonFormatter):
            root.removeHandler(handler)
    root.setLevel(level)
    for name, (handlers, lg_level, propagate, disabled) in saved.items():
        lg = logging.getLogger(name)
        lg.handlers[:] = handlers
        lg.setLevel(lg_level)
        lg.propagate, lg.disabled = propagate, disabled


def emit_samples() -> None:
    logging.getLogger("decice.refresher").warning("metric %s:\nfailed", "cpu")
    logging.getLogger("decice.refresher").debug("not shown at info")
    # what uvicorn logs at start, with its coloured copy of the message as an extra
    logging.getLogger("uvicorn.error").info(
        "Uvicorn running on %s", "http://127.0.0.1:8888", extra={"color_message": "\x1b[1m.."}
    )


def test_text_is_one_line_per_record_for_ours_and_uvicorns() -> None:
    out = io.StringIO()
    logs.configure_logging("info", "text", out)
    emit_samples()
    lines = out.getvalue().splitlines()
    parsed = [TEXT_LINE.match(line) for line in lines]
    assert [m.groups() if m else line for m, line in zip(parsed, lines, strict=True)] == [
        ("WARNING", "decice.refresher", "metric cpu:\\nfailed"),
        ("INFO", "uvicorn.error", "Uvicorn running on http://127.0.0.1:8888"),
    ]


def test_json_lines_have_time_level_logger_message_and_extras() -> None:
    out = io.StringIO()
    logs.configure_logging("debug", "json", out)
    emit_samples()
    log = logging.getLogger("decice.test")
    log.info("with extras", extra={"metric": "cpu", "failures": 3, "odd": Path("/x")})
    try:
        raise ValueError("bad")
    except ValueError:
        log.exception("it broke")
    docs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(d["level"], d["logger"], d["message"]) for d in docs] == [
        ("WARNING", "decice.refresher", "metric cpu:\nfailed"),
        ("DEBUG", "decice.refresher", "not shown at info"),
        ("INFO", "uvicorn.error", "Uvicorn running on http://127.0.0.1:8888"),
        ("INFO", "decice.test", "with extras"),
        ("ERROR", "decice.test", "it broke"),
    ]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:]{8}\.\d{3}Z", d["time"]) for d in docs)
    assert list(docs[0]) == ["time", "level", "logger", "message"]  # no LogRecord noise
    assert "color_message" not in docs[2]
    assert (docs[3]["metric"], docs[3]["failures"], docs[3]["odd"]) == ("cpu", 3, "/x")
    assert (
        docs[4]["exception"].startswith("Traceback") and "ValueError: bad" in docs[4]["exception"]
    )


def test_rfc3339_is_utc_with_milliseconds() -> None:
    assert logs.rfc3339(0.0) == "1970-01-01T00:00:00.000Z"
    assert logs.rfc3339(1_800_000_000.25) == "2027-01-15T08:00:00.250Z"


def test_uvicorn_applies_the_same_config_and_again_changes_nothing() -> None:
    out = io.StringIO()
    config = logs.uvicorn_log_config("info", "json", out)
    logs.configure_logging("info", "json", out)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        pass

    # uvicorn.Config applies log_config (dictConfig) and sets its loggers' levels; twice,
    # as with two servers: still one handler, one line per record, in our format.
    for _ in range(2):
        uvicorn.Config(app, log_config=config, log_level="info", access_log=False)
    assert len(logging.getLogger().handlers) == 1
    assert logging.getLogger("decice").disabled is False  # existing loggers stay enabled
    logging.getLogger("uvicorn.error").info("Started server process [%d]", 42)
    logging.getLogger("decice.service").error("bind: enabled but no Kubernetes client")
    docs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(d["logger"], d["message"]) for d in docs] == [
        ("uvicorn.error", "Started server process [42]"),
        ("decice.service", "bind: enabled but no Kubernetes client"),
    ]


def test_log_format_from_the_flag_the_environment_or_text() -> None:
    assert logs.log_format(None, {}) == "text"
    assert logs.log_format(None, {"DECICE_LOG_FORMAT": " JSON "}) == "json"
    assert logs.log_format("text", {"DECICE_LOG_FORMAT": "json"}) == "text"
    with pytest.raises(ConfigError, match=r"(?s)DECICE_LOG_FORMAT.*expected one of text, json"):
        logs.log_format(None, {"DECICE_LOG_FORMAT": "xml"})


def test_serve_takes_log_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parser().parse_args(["serve", "--config", "p.yaml", "--log-format", "json"])
    assert args.log_format == "json"
    assert parser().parse_args(["serve", "--config", "p.yaml"]).log_format is None
    with pytest.raises(SystemExit):
        parser().parse_args(["serve", "--config", "p.yaml", "--log-format", "xml"])
    capsys.readouterr()
    monkeypatch.setenv("DECICE_LOG_FORMAT", "xml")
    assert main(["serve", "--config", str(tmp_path / "p.yaml")]) == 2  # before anything runs
    assert "DECICE_LOG_FORMAT" in capsys.readouterr().err


# --- the start-up line -----------------------------------------------------------------------

POLICY = b"provider: prometheus\n"


def test_startup_line_names_version_policy_provider_verbs_and_address() -> None:
    settings = make_settings(
        provider="prometheus",
        prometheus={"url": "https://admin:pa55@prom.example:9090/sub?token=t0k"},
        metrics=[
            {"name": "cpu", "query": "up", "filter": {"above": 0.9}},
            {"name": "mem", "query": "m"},
        ],
    )
    sha = hashlib.sha256(POLICY).hexdigest()[:12]
    line = logs.startup_line(
        logs.startup_fields(settings, "/etc/decice/policy.yaml", POLICY, "127.0.0.1", 9999)
    )
    assert line == (
        f"decice-extender {__version__} starting: policy /etc/decice/policy.yaml "
        f"(sha256 {sha}); provider prometheus at https://prom.example:9090/sub; "
        "metrics cpu, mem; verbs filter, prioritize, preempt, bind; "
        "listening on http://127.0.0.1:9999"
    )
    assert "pa55" not in line and "t0k" not in line


def test_startup_line_of_a_static_policy_that_filters_nothing_and_binds_nothing() -> None:
    settings = make_settings(bind={"enabled": False}, server={"urlPrefix": "/scheduler"})
    line = logs.startup_line(logs.startup_fields(settings, "p.yaml", b""))
    assert "provider static (1 nodes); metrics cpu; verbs prioritize under /scheduler/;" in line
    assert line.endswith("listening on http://127.0.0.1:8888")


def test_startup_line_names_the_metrics_listener() -> None:
    settings = make_settings(server={"host": "::1", "metricsPort": 9100})
    assert logs.listening(settings) == ["http://[::1]:8888", "http://0.0.0.0:9100"]
    assert logs.startup_line(logs.startup_fields(settings, "p.yaml", b"")).endswith(
        "listening on http://[::1]:8888 (verbs) and http://0.0.0.0:9100 "
        "(/metrics, /healthz, /readyz)"
    )


def test_log_startup_is_one_info_record_with_its_facts(caplog: pytest.LogCaptureFixture) -> None:
    settings = make_settings()
    with caplog.at_level(logging.INFO, logger="decice"):
        logs.log_startup(settings, "p.yaml", POLICY, None, 7000)
    (record,) = caplog.records
    assert record.levelno == logging.INFO and record.name == "decice"
    assert record.getMessage() == logs.startup_line(
        logs.startup_fields(settings, "p.yaml", POLICY, None, 7000)
    )
    facts = record.__dict__
    assert facts["policySha256"] == hashlib.sha256(POLICY).hexdigest()[:12]
    assert facts["verbs"] == ["prioritize", "bind"] and facts["listen"] == ["http://127.0.0.1:7000"]
