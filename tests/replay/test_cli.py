"""`decice-extender replay`'s arguments: each bad one gets its message and a non-zero exit
before anything is asked of a server."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest
import yaml

from extender.cli.main import main
from extender.cli.replay import duration, moment, size

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "extender.yaml"
NOWHERE = "http://127.0.0.1:9"
RANGE = ["--from", "2026-11-18T00:00Z", "--to", "2026-11-25T00:00Z"]


def replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["replay", *args])
    return code, capsys.readouterr().err


def test_times_durations_and_sizes() -> None:
    assert moment("2026-11-18T00:00Z") == 1_794_960_000
    assert moment("2026-11-18T01:00:00+01:00") == 1_794_960_000
    assert moment("2026-11-18T00:00") == 1_794_960_000  # no zone: UTC
    assert moment("1794960000") == 1_794_960_000
    assert moment("now-7d", lambda: 1_000_000.0) == 1_000_000 - 7 * 86400
    assert moment("now", lambda: 5.0) == 5.0
    assert (duration("30s"), duration("1m30s"), duration("2h"), duration("45")) == (
        30,
        90,
        7200,
        45,
    )
    assert (size("4GiB"), size("512MiB"), size("2G"), size("1000")) == (
        4 * 2**30,
        2**29,
        2 * 2**30,
        1000,
    )
    for parse, bad in ((moment, "yesterday"), (duration, "30x"), (size, "lots")):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(bad)


def test_a_range_backwards(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = replay(capsys, "--prometheus", NOWHERE, "--from", "now", "--to", "now-1d")
    assert code == 2 and err == "decice-extender replay: --from must be before --to\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--step", "1.5"], "--step must be a whole number of seconds, at least 1s"),
        (["--step", "0"], "--step must be a whole number of seconds, at least 1s"),
        (["--namespace", "Shop_1"], "not a namespace name: Shop_1"),
        (["--cpu-metric", "gpu"], "the policy has no metric 'gpu' (cpu): see --cpu-metric"),
        (["--rate-window", "30"], "rate_window must hold at least two scrapes"),
    ],
)
def test_bad_arguments(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, err = replay(capsys, "--prometheus", NOWHERE, *RANGE, *args)
    assert code == 2 and err == f"decice-extender replay: {message}\n"


def test_unparsable_times_are_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["replay", "--from", "last tuesday", "--to", "now"])
    assert caught.value.code == 2
    assert "'last tuesday' is not a time" in capsys.readouterr().err


def test_a_static_policy_needs_a_server(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = replay(capsys, "--config", str(ROOT / "config" / "demo.yaml"), *RANGE)
    assert code == 2 and "the policy's provider is static: pass --prometheus URL" in err


def test_an_unreadable_password_file_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    policy = yaml.safe_load(SHIPPED.read_text())
    missing = tmp_path / "nope"
    policy["prometheus"]["basicAuth"] = {"username": "u", "passwordFile": str(missing)}
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    code, err = replay(capsys, "--config", str(path), "--prometheus", NOWHERE, *RANGE)
    assert code == 1
    assert (
        f"cannot query {NOWHERE}: prometheus.basicAuth.passwordFile: cannot read {missing}" in err
    )


def test_plots_need_matplotlib(capsys: pytest.CaptureFixture[str]) -> None:
    if importlib.util.find_spec("matplotlib") is not None:
        pytest.skip("matplotlib is installed: the message cannot show")
    code, err = replay(capsys, "--prometheus", NOWHERE, *RANGE, "--plot", "out")
    assert code == 1 and "--plot needs matplotlib" in err


def test_an_invalid_policy_is_a_configuration_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("metrics: 7\n")
    code, err = replay(capsys, "--config", str(path), *RANGE)
    assert code == 2 and err.startswith("decice-extender: invalid configuration:")
