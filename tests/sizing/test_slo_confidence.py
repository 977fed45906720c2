"""The p90 latency factors of performance.yaml are what the calibration rows say (so they cannot drift), and
`latency_factor` reads them."""

from __future__ import annotations

import pytest

from benchmarks import accuracy
from infragen.sizing.constants import load_constants
from infragen.sizing.uncertainty import latency_factor

#: Regimes `estimate` assigns (performance.py, estimate.py) that the planner checks SLOs in.
PLANNED_REGIMES = ("gpu-decode-compute-bound", "gpu-decode-memory-bound", "gpu-moe-many-experts", "cpu-generation",
                   "cpu-prompt")


@pytest.fixture(scope="module")
def derived() -> dict[str, tuple[float, int]]:
    return accuracy.confidence_factors(accuracy.evaluate_all()[0])


@pytest.mark.parametrize("regime", PLANNED_REGIMES)
def test_p90_factors_are_recomputed_from_the_calibration_rows(derived, regime: str) -> None:
    stored = load_constants().slo_confidence.p90[regime]
    factor, rows = derived[regime]
    assert (stored.factor, stored.rows) == pytest.approx((factor, rows), abs=0.0015), (
        f"{regime}: performance.yaml slo_confidence.p90 has x{stored.factor} over {stored.rows} rows, the rows give "
        f"x{factor} over {rows}: copy the figures `python benchmarks/accuracy.py` prints under 'slo_confidence'")


def test_latency_factor_reads_the_confidence() -> None:
    assert latency_factor("gpu-decode-compute-bound", "p50") == 1.0
    assert latency_factor("gpu-decode-compute-bound", "p90") == load_constants().slo_confidence.p90[
        "gpu-decode-compute-bound"].factor > 1.0
    assert latency_factor("no-such-regime", "p90") == load_constants().slo_confidence.p90["default"].factor
    with pytest.raises(ValueError):
        latency_factor("gpu-decode-compute-bound", "p99")


def test_ratio_direction() -> None:
    """A time measured longer than predicted, or a rate measured lower, both ask for a factor above 1."""
    slow = accuracy.Outcome("a", "g", "tpot_ms", measured=12.0, predicted=10.0, regime="r")
    low = accuracy.Outcome("b", "g", "output_tokens_per_s", measured=100.0, predicted=120.0, regime="r")
    assert accuracy.latency_ratio(slow) == pytest.approx(1.2) and accuracy.latency_ratio(low) == pytest.approx(1.2)
