"""The regions each cloud has and the compact per-region price table (`regions.yaml`, `regional_prices.csv`).

Prices of every region are many rows: they live in one CSV whose `source` column is a key into `regions.yaml`
(citation and date stated once), so a price row costs one line, not a YAML record. Parses text only; no I/O.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from infragen.catalog.records import RegionPrice
from infragen.errors import DataError
from infragen.validation import validation_message

REGIONS_FILE = "regions.yaml"
PRICES_FILE = "regional_prices.csv"
PRICE_COLUMNS: tuple[str, ...] = (
    "cloud", "instance_type", "region", "on_demand_usd_per_hour", "on_demand_cny_per_hour", "spot_usd_per_hour",
    "zones", "source",
)

_FastLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class PriceSource(_Model):
    """One price list, cited once; rows of regional_prices.csv name it by key."""

    citation: str
    """Where the prices were read (repository@commit path, or page and date)."""
    as_of: str
    """Date of the prices (YYYY-MM-DD; `unknown` when the source records none)."""


class AvailabilitySource(_Model):
    """One record of which region sells which type, cited once; rows of aws_availability.csv name it by key."""

    citation: str
    """Where the offerings were read."""
    as_of: str
    """Date of the data (YYYY-MM-DD; `unknown` when the source records none)."""
    regions: list[str]
    """The regions the source has data for: outside them it says nothing."""


class CloudRegions(_Model):
    """The regions one cloud has (whether or not the catalog prices anything there)."""

    source: str
    """Where the region list was read."""
    regions: list[str]
    """Region ids."""


class RegionsFile(_Model):
    """`regions.yaml`."""

    schema_version: Literal[1]
    """Version of this file's layout."""
    source: str
    """Where the file's lists come from."""
    as_of: str
    """Date of the newest list (YYYY-MM-DD)."""
    notes: str = ""
    """Caveats for reviewers."""
    clouds: dict[Literal["aws", "alicloud"], CloudRegions]
    """Regions by cloud."""
    price_sources: dict[str, PriceSource]
    """Price lists by the key regional_prices.csv uses in its `source` column."""
    availability_sources: dict[str, AvailabilitySource] = {}
    """Offering lists (which region sells which type) by the key aws_availability.csv uses."""


def parse_regions(label: str, text: str) -> RegionsFile:
    """`regions.yaml` text -> RegionsFile (DataError naming the field when it is wrong)."""
    try:
        data: Any = yaml.load(text, Loader=_FastLoader)
    except yaml.YAMLError as exc:
        raise DataError(f"{label}: malformed YAML: {exc}") from None
    try:
        return RegionsFile.model_validate(data)
    except ValidationError as exc:
        raise DataError(validation_message(label, exc, RegionsFile)) from None


def _number(label: str, line: int, column: str, text: str) -> float | None:
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{label}: line {line}: {column}: {text!r} is not a number") from None
    if not value > 0:
        raise DataError(f"{label}: line {line}: {column}: {text} must be greater than 0")
    return value


def parse_price_table(label: str, text: str, regions: RegionsFile) -> dict[tuple[str, str], list[RegionPrice]]:
    """`regional_prices.csv` text -> prices by (cloud, instance type), every row checked against regions.yaml.

    Rows are trusted after these checks and built without pydantic's per-field validation: the table has
    thousands of rows and loading must not grow with them (see docs/catalog.md).
    """
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or tuple(header) != PRICE_COLUMNS:
        raise DataError(f"{label}: line 1: the header must be {','.join(PRICE_COLUMNS)}")
    known = {cloud: set(entry.regions) for cloud, entry in regions.clouds.items()}
    out: dict[tuple[str, str], list[RegionPrice]] = {}
    for line, row in enumerate(reader, start=2):
        if len(row) != len(PRICE_COLUMNS):
            raise DataError(f"{label}: line {line}: expected {len(PRICE_COLUMNS)} columns, found {len(row)}")
        cloud, itype, region, usd, cny, spot, zones, key = row
        if cloud not in known:
            raise DataError(f"{label}: line {line}: cloud: {cloud!r} is not aws or alicloud")
        if region not in known[cloud]:
            raise DataError(f"{label}: line {line}: region: {region!r} is not a {cloud} region of {REGIONS_FILE}")
        source = regions.price_sources.get(key)
        if source is None:
            raise DataError(f"{label}: line {line}: source: {key!r} is not a key of price_sources in {REGIONS_FILE}")
        od_usd = _number(label, line, "on_demand_usd_per_hour", usd)
        od_cny = _number(label, line, "on_demand_cny_per_hour", cny)
        spot_usd = _number(label, line, "spot_usd_per_hour", spot)
        if od_usd is None and od_cny is None and spot_usd is None:
            raise DataError(f"{label}: line {line}: {itype} in {region}: no price at all")
        if cloud == "aws" and od_cny is not None:
            raise DataError(f"{label}: line {line}: on_demand_cny_per_hour: AWS prices are USD")
        if cloud == "alicloud" and od_usd is not None:
            raise DataError(f"{label}: line {line}: on_demand_usd_per_hour: Alibaba prices are kept in CNY")
        out.setdefault((cloud, itype), []).append(RegionPrice.model_construct(
            region=region, on_demand_usd_per_hour=od_usd, on_demand_cny_per_hour=od_cny,
            spot_usd_per_hour=spot_usd, source=source.citation, as_of=source.as_of, spot_source=None,
            zones=zones.split() if zones else []))
    return out


def region_lists(regions: RegionsFile | None) -> Mapping[str, tuple[str, ...]]:
    """Known regions by cloud (empty when the catalog has no regions.yaml)."""
    if regions is None:
        return {}
    return {cloud: tuple(entry.regions) for cloud, entry in regions.clouds.items()}
