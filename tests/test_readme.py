"""The README's quickstart shows what `infragen plan examples/team-chatbot.yaml` prints now: every line of its
abridged output block starts a line of the real output (the digest moves with every data file, so a stale block is
caught here, not by a reader)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infragen.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _readme_block() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"What the first command prints.*?```\n(infragen plan team-chatbot.*?)\n```", text, flags=re.S)
    assert m, "README: the quickstart's printed plan block is missing"
    return [line.rstrip() for line in m[1].splitlines() if line.strip()]


def test_the_readme_shows_the_plan_as_printed(capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    main(["plan", "examples/team-chatbot.yaml"])
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    for line in _readme_block():
        assert any(p.startswith(line) for p in printed), f"README shows a line the plan no longer prints: {line!r}"
