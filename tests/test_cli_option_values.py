"""Every option and argument of every command, given a hostile value, keeps the bad-input promise: exit 2 with an
`Error:` paragraph (or, for a value that means something, 0 or 3), never an internal error, never a shell command.

The options are read from the click tree, so a new option is covered the day it lands; a new command must be
given a base invocation here (or a reason it is not run). Walking the options by hand on 2026-12-06 found six
values that were accepted or crashed: `estimate --pp 0` (division by zero, exit 70), `calibrate --tp 0`,
`estimate --max-num-seqs 0` / `--max-num-batched-tokens 0` (read as "the default"), `--max-model-len -1` or
shorter than the request (ignored) and `--gpu-memory-utilization nan`, `catalog --min-gpu-memory-gib nan` and
`catalog --gpu ''` (each exit 0).
"""

from __future__ import annotations

import math
from pathlib import Path

import click
import pytest

from infragen.cli import cli
from tests.spec.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = str(ROOT / "examples" / "light-api.yaml")
VLLM_RESULT = str(ROOT / "tests" / "fixtures" / "calibration" / "vllm-bench-serve-format.json")
_ESTIMATE = ["--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1", "--input-len",
             "100", "--output-len", "10"]

#: command path -> the arguments of a run that succeeds (the option under test replaces its own value there)
BASES: dict[tuple[str, ...], list[str]] = {
    ("plan",): [EXAMPLE],
    ("estimate",): [*_ESTIMATE, "--concurrency", "4"],
    ("catalog",): [],
    ("catalog", "gpus"): [],
    ("validate",): [EXAMPLE],
    ("schema",): [],
    ("models",): [],
    ("render",): ["{plan}"],
    ("diff",): ["{plan}", "{plan}"],
    ("calibrate",): [VLLM_RESULT, "--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus",
                     "1", "-o", "{tmp}/profile.yaml"],
    ("hardware", "probe"): ["--buffer-mib", "8", "--repeats", "1"],
}
#: options that only go with another: their base run
ALONGSIDE: dict[tuple[str, str], list[str]] = {
    ("estimate", "--max-num-seqs"): [*_ESTIMATE, "--rate", "2"],
    ("estimate", "--max-num-batched-tokens"): [*_ESTIMATE, "--rate", "2"],
    ("estimate", "--rate"): _ESTIMATE,
    ("estimate", "--concurrency"): _ESTIMATE,
}
#: commands not run here, and why
NOT_RUN = {
    ("catalog", "refresh"): "asks the clouds' price APIs (tests/catalog/test_refresh.py runs it against moto)",
    ("preflight",): "asks a cloud account (tests/provision/test_preflight*.py run it against moto)",
}

NUMERIC_REFUSED = ["nan", "inf", "-inf", "-1"]
ANY_VALUE = ["0", "99999999999999999999", "1e308", "", "\n", "x" * 5000, "$(touch {marker})", "a;touch {marker}"]


def _commands() -> list[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(cli)
    out: list[tuple[tuple[str, ...], click.Command]] = []

    def walk(cmd: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, (*path, name))
            if not cmd.invoke_without_command:
                return
        out.append((path, cmd))

    walk(cli, ())
    return out


def _cases() -> list[tuple[tuple[str, ...], str, str, bool]]:
    cases = []
    for path, cmd in _commands():
        if path in NOT_RUN:
            continue
        arguments = [p for p in cmd.params if isinstance(p, click.Argument)]
        cases += [(path, f"#{i}", v, False) for i, _ in enumerate(arguments) for v in ANY_VALUE]
        for param in cmd.params:
            if not isinstance(param, click.Option) or param.is_flag or param.name == "help":
                continue
            numeric = isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType))
            values = [*(NUMERIC_REFUSED if numeric else []), *ANY_VALUE]
            cases += [(path, param.opts[0], v, numeric and v in NUMERIC_REFUSED) for v in values]
    return cases


def test_every_command_has_a_base_run_or_a_reason() -> None:
    paths = {path for path, _ in _commands()}
    assert paths == set(BASES) | set(NOT_RUN), "give the new command a base run in BASES (or a reason in NOT_RUN)"


@pytest.mark.parametrize("path, option, value, refused", _cases(),
                         ids=lambda v: repr(v)[:40] if isinstance(v, str) else str(v))
def test_a_hostile_option_value_keeps_the_promise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  path: tuple[str, ...], option: str, value: str,
                                                  refused: bool) -> None:
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "injected"
    fills = {"tmp": str(tmp_path), "marker": str(marker)}
    if "{plan}" in BASES[path]:
        assert run_cli("plan", EXAMPLE, "--out", str(tmp_path / "plan.json")).code == 0
        fills["plan"] = str(tmp_path / "plan.json")
    base = [a.format(**fills) for a in ALONGSIDE.get((path[0], option), BASES[path])]
    if option.startswith("#"):  # a positional argument: the value replaces the base run's
        at = int(option[1:])
        argv = [*base[:at], value.format(**fills), *base[at + 1:]]
    else:
        if option in base:  # the option under test replaces the base run's value
            at = base.index(option)
            base = base[:at] + base[at + 2:]
        argv = [*base, option, value.format(**fills)]
    if path == ("render",) and option != "--out":
        argv += ["--out", str(tmp_path / "out")]
    r = run_cli(*path, *argv)
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err
    assert r.code in ((2,) if refused else (0, 2, 3)), (r.code, r.err[-500:])
    if r.code == 2:
        assert "Error:" in r.err, r.err
    assert not marker.exists()


def test_the_refused_values_are_not_numbers_a_user_means() -> None:
    # the premise of NUMERIC_REFUSED: no option takes a negative or non-finite count, size, rate or share
    assert all(not math.isfinite(float(v)) or float(v) < 0 for v in NUMERIC_REFUSED)
