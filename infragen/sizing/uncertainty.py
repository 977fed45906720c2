"""Relative error bands and confidence factors per regime, read from performance.yaml (derived there from the
calibration residuals). A regime without its own figure falls back to `default`; nothing here is computed at run time.
"""

from __future__ import annotations

from infragen.sizing.constants import load_constants


def relative_band(regime: str) -> float:
    """The +/- fraction an estimate in `regime` carries (80th percentile absolute error of its calibration rows)."""
    bands = load_constants().uncertainty
    band = bands.get(regime) or bands["default"]
    return band.relative


def latency_factor(regime: str, confidence: str) -> float:
    """What predicted latencies in `regime` are multiplied by before the SLO check at `confidence`.

    p50: 1 (the estimate is taken as the median of what the deployment will show); p90: the 90th percentile of
    measured/predicted time over the regime's calibration rows (performance.yaml slo_confidence).
    """
    if confidence == "p50":
        return 1.0
    if confidence != "p90":
        raise ValueError(f"unknown confidence {confidence!r}")
    factors = load_constants().slo_confidence.p90
    return (factors.get(regime) or factors["default"]).factor
