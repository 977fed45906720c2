"""Relative error bands per regime, read from performance.yaml (derived there from calibration residuals).

A regime without its own band falls back to `default`; nothing here is computed at run time.
"""

from __future__ import annotations

from infragen.sizing.constants import load_constants


def relative_band(regime: str) -> float:
    """The +/- fraction an estimate in `regime` carries (median absolute error of its calibration rows)."""
    bands = load_constants().uncertainty
    band = bands.get(regime) or bands["default"]
    return band.relative
