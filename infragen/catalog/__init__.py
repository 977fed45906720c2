"""The hardware and price catalogs: typed records, the cached loader and its query API.

Importing this package reads no file; `load_catalog()` does, once. Never imports the model registry (models.py).
"""

from __future__ import annotations

from infragen.catalog.loader import (
    Catalog,
    catalog_from_records,
    load_catalog,
    load_catalog_dir,
)
from infragen.catalog.records import Accelerator, CpuArch, CpuModel, InstanceType, RegionPrice

__all__ = [
    "Accelerator",
    "Catalog",
    "CpuArch",
    "CpuModel",
    "InstanceType",
    "RegionPrice",
    "catalog_from_records",
    "load_catalog",
    "load_catalog_dir",
]
