"""Shared test helpers: the captured fixtures and small builders for settings and engines."""

from __future__ import annotations

import os
import secrets
import shlex
from collections.abc import Callable, Generator
from typing import NoReturn

import hypothesis
import pytest

from extender.policy.settings import Settings
from tests.harness.fixtures import make_settings

# The real-Prometheus fixtures (exporter, prometheus), for any test directory.
pytest_plugins = ["tests.harness.prometheus_fixtures"]

# --- hypothesis profiles --------------------------------------------------------------------
# ci (CI=true): derandomized, no example database, failing examples printed as a blob:
#   every run generates the same examples. dev (otherwise): random exploration, with one
#   seed per run, printed in the header and, after a failure, in the summary with the
#   option that replays the run. Neither measures time (no deadline, no too_slow check).
# The profile is loaded here, at import time: a `settings(...)` inherits from the profile
# loaded when it is created, and test modules create theirs when they are imported
# (test_fuzz's FUZZ), after this root conftest. Both profiles derive from hypothesis'
# "default" profile, not from the one loaded at import: hypothesis loads its own "ci"
# profile whenever CI is set at all (CI=false too), which would leak into "dev".
HYPOTHESIS_PROFILE = "ci" if os.environ.get("CI", "").strip().lower() == "true" else "dev"
_HYPOTHESIS_BASE = hypothesis.settings(
    hypothesis.settings.get_profile("default"),
    deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow],
)
hypothesis.settings.register_profile(
    "ci", _HYPOTHESIS_BASE, derandomize=True, database=None, print_blob=True
)
hypothesis.settings.register_profile("dev", _HYPOTHESIS_BASE)
hypothesis.settings.load_profile(HYPOTHESIS_PROFILE)


def _hypothesis_seed(config: pytest.Config) -> str | None:
    """The seed of this run: --hypothesis-seed, or the one pytest_configure chose."""
    seed = getattr(config.option, "hypothesis_seed", None)  # the hypothesis plugin's option
    return None if seed is None else str(seed)


@pytest.hookimpl(tryfirst=True)  # before the hypothesis plugin reads --hypothesis-seed
def pytest_configure(config: pytest.Config) -> None:
    """dev: give the run a seed of its own unless --hypothesis-seed named one."""
    option = config.option
    if HYPOTHESIS_PROFILE == "dev" and getattr(option, "hypothesis_seed", "") is None:
        option.hypothesis_seed = str(secrets.randbelow(2**32))


def pytest_report_header(config: pytest.Config) -> list[str]:
    if HYPOTHESIS_PROFILE == "ci":
        return ["hypothesis profile 'ci' (CI=true): derandomized, the same examples every run"]
    seed = _hypothesis_seed(config)
    return [f"hypothesis profile 'dev': random examples, seed {seed} (--hypothesis-seed={seed})"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    seed = _hypothesis_seed(terminalreporter.config)
    if HYPOTHESIS_PROFILE != "dev" or seed is None:
        return
    failed = list(
        dict.fromkeys(
            report.nodeid
            for key in ("failed", "error")
            for report in terminalreporter.stats.get(key, [])
            if getattr(report, "nodeid", "")
        )
    )
    if not failed:
        return
    terminalreporter.section("hypothesis seed")
    terminalreporter.write_line(
        f"this run drew its hypothesis examples from seed {seed}; draw the same ones with:"
    )
    again = failed if len(failed) <= 10 else list(terminalreporter.config.invocation_params.args)
    terminalreporter.write_line(f"  python -m pytest --hypothesis-seed={seed} {shlex.join(again)}")


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def settings_factory() -> Callable[..., Settings]:
    return make_settings


# --- the image (tests marked `image`: .ci/run's step after the suite) ------------------------
# Building the image takes a minute or more, so the default run (scripts/test) leaves these
# tests out; `pytest --image -m image` runs them. DECICE_IMAGE names an image already built
# (.ci/run builds it with scripts/image first); otherwise the session builds one.
IMAGE_TAG = "localhost/decice-extender:test"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--image",
        action="store_true",
        help="run the tests marked image: build the image (scripts/image) and run it",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--image"):
        return
    left_out = [item for item in items if item.get_closest_marker("image")]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not item.get_closest_marker("image")]


def _skip_image(reason: str) -> NoReturn:
    pytest.skip(reason)


#: Where every image skip is reported, so `-ra` folds them into one line.
_IMAGE_SKIP_AT = (__file__, _skip_image.__code__.co_firstlineno + 1)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Every "image tests: ... not installed" skip reported at one place: one line with -ra."""
    report = yield
    if (
        report.skipped
        and isinstance(report.longrepr, tuple)
        and "image tests: " in report.longrepr[2]
    ):
        report.longrepr = (*_IMAGE_SKIP_AT, report.longrepr[2])
    return report


@pytest.fixture(scope="session")
def image() -> str:
    """The image's tag: DECICE_IMAGE, else built now with scripts/image. Where it cannot be
    built (no buildah/mmdebstrap, docker or podman), skipped with one line; under CI=true
    that, and a failed build, fail."""
    from tests.harness.image import build_image, image_unavailable_reason

    named = os.environ.get("DECICE_IMAGE", "")
    if named:
        return named
    reason = image_unavailable_reason()
    if reason is not None:
        if HYPOTHESIS_PROFILE == "ci":
            pytest.fail(f"{reason} (CI=true: the image must be built)")
        _skip_image(reason)
    return build_image(IMAGE_TAG)
