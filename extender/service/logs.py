"""Logging setup: one handler and one format (`--log-format text|json`, or
DECICE_LOG_FORMAT) for our loggers and uvicorn's (the same dictConfig), and the start-up
line. Text is one line per record; JSON one object per line with the `extra` fields.
Requests are not logged one by one (hot path).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import logging.config
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import IO, Any, Literal

from extender import __version__
from extender.errors.redaction import safe_url
from extender.policy.fields import ConfigError
from extender.policy.settings import Settings

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
FORMAT_ENV = "DECICE_LOG_FORMAT"
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")

# LogRecord attributes that are not `extra` fields (plus what formatters and uvicorn add).
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "color_message",  # uvicorn: the same message with ANSI colours
    "taskName",
}


def rfc3339(created: float) -> str:
    """A record time as RFC 3339 UTC with milliseconds: 2026-05-01T12:00:00.123Z."""
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


class TextFormatter(logging.Formatter):
    """`<time> <LEVEL> <logger>: <message>`."""

    def __init__(self, use_colors: bool | None = None) -> None:  # uvicorn may pass use_colors
        super().__init__()

    def tails(self, record: logging.LogRecord) -> dict[str, str]:
        """The record's `exception` and `stack` text, when it has them."""
        out = {}
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return out

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage().replace("\r", "\\r").replace("\n", "\\n")
        line = f"{rfc3339(record.created)} {record.levelname} {record.name}: {message}"
        return "\n".join([line, *self.tails(record).values()])


class JsonFormatter(TextFormatter):
    """time, level, logger, message, then `extra` fields, `exception` and `stack`."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": rfc3339(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        extra = {k: v for k, v in record.__dict__.items() if k not in _STANDARD and k not in doc}
        return json.dumps({**doc, **extra, **self.tails(record)}, ensure_ascii=False, default=str)


def uvicorn_log_config(
    level: str = "info", fmt: LogFormat = "text", stream: IO[str] | None = None
) -> dict[str, Any]:
    """The dictConfig for the whole process: one handler on the root logger (stderr
    unless `stream`), to which uvicorn's loggers propagate."""
    factory = JsonFormatter if fmt == "json" else TextFormatter
    return {
        "version": 1,
        "disable_existing_loggers": False,
        # uvicorn sets formatters.default/access.use_colors when told to: both exist.
        "formatters": {"default": {"()": factory}, "access": {"()": factory}},
        "handlers": {
            "default": {
                "class": "logging.StreamHandler",
                "formatter": "default",
                "stream": stream if stream is not None else "ext://sys.stderr",
            }
        },
        "root": {"level": level.upper(), "handlers": ["default"]},
        "loggers": {
            **{name: {"handlers": [], "propagate": True} for name in UVICORN_LOGGERS},
            # watchfiles logs every batch of changes at INFO ("1 change detected"):
            # reload.py logs what a change did instead.
            "watchfiles": {"level": "WARNING"},
        },
    }


def configure_logging(
    level: str = "info", fmt: LogFormat = "text", stream: IO[str] | None = None
) -> None:
    logging.config.dictConfig(uvicorn_log_config(level, fmt, stream))


@contextlib.contextmanager
def quieted(name: str, level: int = logging.ERROR) -> Iterator[None]:
    """Logger `name` shows only `level` and above inside the block (a CLI that reports
    those errors itself)."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def log_format(flag: str | None, environ: Mapping[str, str]) -> LogFormat:
    """The format from --log-format, else $DECICE_LOG_FORMAT, else text."""
    if flag is not None:
        value, where = flag, "--log-format"
    else:
        value, where = environ.get(FORMAT_ENV, "").strip().lower() or "text", FORMAT_ENV
    if value in LOG_FORMATS:
        return value
    raise ConfigError([f"expected one of {', '.join(LOG_FORMATS)}, got {value!r}"], where)


def listening(settings: Settings, host: str | None = None, port: int | None = None) -> list[str]:
    """Where the verbs listen (as overridden on the command line), then the metrics
    listener when server.metricsPort is set."""
    server = settings.server
    verbs = _url(host or server.host, server.port if port is None else port, server.tls.enabled)
    if server.metrics_port is None:
        return [verbs]
    return [verbs, _url(server.metrics_host, server.metrics_port, False)]


def startup_fields(
    settings: Settings,
    policy_path: str,
    policy_bytes: bytes,
    host: str | None = None,
    port: int | None = None,
) -> dict[str, Any]:
    prometheus = settings.provider == "prometheus"
    # The verbs the policy has the scheduler call (as `scheduler-config` writes them).
    verbs = ["filter", "prioritize", "preempt"] if settings.filters_anything else ["prioritize"]
    return {
        "version": __version__,
        "policy": policy_path,
        "policySha256": hashlib.sha256(policy_bytes).hexdigest()[:12],
        "provider": settings.provider,
        **(
            {"prometheusUrl": safe_url(settings.prometheus.url)}
            if prometheus
            else {"staticNodes": len(settings.static_nodes)}
        ),
        "policies": {n: [m.name for m in p.metrics] for n, p in settings.policy_map.items()},
        "defaultPolicy": settings.default.name,
        "verbs": [*verbs, "bind"] if settings.bind.enabled else verbs,
        "urlPrefix": settings.server.url_prefix,
        "listen": listening(settings, host, port),
    }


def startup_line(f: Mapping[str, Any]) -> str:
    """decice-extender 0.1.0 starting: policy p.yaml (sha256 3f2a9c1b7e4d); provider
    prometheus at http://prometheus:9090; metrics cpu, mem; verbs filter, prioritize,
    preempt, bind; listening on http://0.0.0.0:8888 (from `startup_fields`)"""
    if "prometheusUrl" in f:
        provider = f"provider prometheus at {f['prometheusUrl']}"
    else:
        provider = f"provider {f['provider']} ({f['staticNodes']} nodes)"
    policies: Mapping[str, list[str]] = f["policies"]
    if len(policies) == 1:
        metrics = f"metrics {', '.join(next(iter(policies.values())))}"
    else:  # policies cpu (default): cpu; gpu: gpu_util
        metrics = "policies " + "; ".join(
            f"{name}{' (default)' if name == f['defaultPolicy'] else ''}: {', '.join(names)}"
            for name, names in policies.items()
        )
    prefix = f" under {f['urlPrefix']}/" if f["urlPrefix"] else ""
    listen = f["listen"][0]
    if len(f["listen"]) > 1:
        listen += f" (verbs) and {f['listen'][1]} (/metrics, /healthz, /readyz)"
    return (
        f"decice-extender {f['version']} starting: policy {f['policy']} "
        f"(sha256 {f['policySha256']}); {provider}; {metrics}; "
        f"verbs {', '.join(f['verbs'])}{prefix}; listening on {listen}"
    )


def log_startup(
    settings: Settings,
    policy_path: str,
    policy_bytes: bytes,
    host: str | None = None,
    port: int | None = None,
) -> None:
    """The start-up line at INFO on the `decice` logger, its facts as extra fields."""
    fields = startup_fields(settings, policy_path, policy_bytes, host, port)
    logging.getLogger("decice").info("%s", startup_line(fields), extra=fields)


def _url(host: str, port: int, tls: bool) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}"
