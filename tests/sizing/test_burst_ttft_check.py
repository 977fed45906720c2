"""benchmarks/burst_ttft_check.py: a burst's median TTFT measured vs replayed, and the Mixtral runs' pause."""

from __future__ import annotations

import pytest

from benchmarks import burst_ttft_check as bt


def _run(row_id: str, moe: bool, measured_ms: float, replayed_ms: float) -> bt.BurstTtft:
    return bt.BurstTtft(row_id, row_id, moe, measured_ms, replayed_ms, 20.0, 60_000, 3_000.0, 4_000.0)


def test_a_pause_is_the_excess_beyond_the_usual_one() -> None:
    run = _run("m", True, 5_400.0, 400.0)
    assert run.excess_s == pytest.approx(5.0)
    assert run.without(4.0) == pytest.approx(60_000 / 16.0)


def test_every_stored_burst_is_compared_and_only_the_mixtral_runs_read_as_paused() -> None:
    runs = bt.burst_ttfts()
    assert len(runs) == 24  # Lambda's 0.6.0 files of 320 prompts (EX0089-EX0112)
    dense = [r for r in runs if not r.moe]
    moe = [r for r in runs if r.moe]
    assert {r.row_id for r in moe} == {"EX0103", "EX0104", "EX0105"}
    # the replay's first tokens come earlier than measured on every run, by under 1.5 s on the dense ones
    assert all(0.0 < r.excess_s < 1.5 for r in dense)
    assert all(r.excess_s > 4.0 for r in moe)  # Mixtral: 4 - 10 s
    text = "\n".join(bt.report())
    assert text.count("read as a") == 3 and "targets keep the measured values" in text
    assert "Mixtral-8x7B-Instruct-v0.1 on H100: median TTFT ms tp2" in text
