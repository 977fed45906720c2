"""Run the real CLI entry point (the error boundary) in-process and capture what the user sees."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

import pytest

from infragen.cli import main


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


def run_cli(*argv: str) -> Result:
    """`infragen ARGV...` through `infragen.cli.main`, as the console script runs it."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return Result(code, out.getvalue(), err.getvalue())


@pytest.fixture
def cli() -> object:
    return run_cli
