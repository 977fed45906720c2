"""Unit constants and converters. Every numeric name elsewhere carries its unit (`_gib`, `_gb_per_s`...)."""

from __future__ import annotations

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4
KB = 1000
MB = 1000**2
GB = 1000**3
TB = 1000**4

TERA = 1e12
GIGA = 1e9

#: Hours in the billing month used for every monthly figure (AWS and Alibaba both quote 730 h).
HOURS_PER_MONTH = 730.0

#: Bytes per KV/activation element by dtype name.
DTYPE_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}


def bytes_to_gib(n_bytes: float) -> float:
    return n_bytes / GIB


def gib_to_bytes(gib: float) -> float:
    return gib * GIB


def gb_to_gib(gb: float) -> float:
    return gb * GB / GIB


def mib_to_gib(mib: float) -> float:
    return mib / KIB


def gbps_to_gb_per_s(gbps: float) -> float:
    """Network bits per second to bytes per second (both decimal giga)."""
    return gbps / 8.0


def per_hour_to_per_month(usd_per_hour: float) -> float:
    return usd_per_hour * HOURS_PER_MONTH
