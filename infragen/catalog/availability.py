"""Which region sells which instance type (`aws_availability.csv`), apart from the prices.

A price row already means "sold there"; this table says where a type is sold whether or not a price is known, so
"priced in N of the M regions that sell it" can be stated. It is read only by `infragen catalog` and the
coverage tool, never by a plan: the planner's availability stays the price rows, and loading a plan's catalog
does not grow with it. The citation of each source (and the regions it covers) is stated once in `regions.yaml`
`availability_sources`; a region a source does not cover is "not known", not "not sold".
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from infragen.catalog.regional import REGIONS_FILE, RegionsFile, parse_regions
from infragen.errors import DataError

AVAILABILITY_FILE = "aws_availability.csv"
AVAILABILITY_COLUMNS: tuple[str, ...] = ("cloud", "instance_type", "regions", "zones", "source")


@dataclass(frozen=True)
class Availability:
    """Where one instance type is sold, as one source says."""

    regions: tuple[str, ...]
    """Regions the source lists the type in, sorted."""
    zones: tuple[str, ...]
    """Availability-zone ids (e.g. use1-az1) the source lists the type in, sorted; empty when it has none."""
    covered: tuple[str, ...]
    """Regions the source has data for (a region outside it may sell the type too)."""
    source: str
    """Citation."""
    as_of: str
    """Date of the source (YYYY-MM-DD, or `unknown`)."""


def parse_availability(label: str, text: str, regions: RegionsFile) -> dict[tuple[str, str], Availability]:
    """`aws_availability.csv` text -> availability by (cloud, instance type), checked against regions.yaml."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or tuple(header) != AVAILABILITY_COLUMNS:
        raise DataError(f"{label}: line 1: the header must be {','.join(AVAILABILITY_COLUMNS)}")
    out: dict[tuple[str, str], Availability] = {}
    for line, row in enumerate(reader, start=2):
        if len(row) != len(AVAILABILITY_COLUMNS):
            raise DataError(f"{label}: line {line}: expected {len(AVAILABILITY_COLUMNS)} columns, found {len(row)}")
        cloud, itype, listed, zones, key = row
        source = regions.availability_sources.get(key)
        if source is None:
            raise DataError(f"{label}: line {line}: source: {key!r} is not a key of availability_sources in "
                            f"{REGIONS_FILE}")
        sold = tuple(sorted(listed.split()))
        stray = [r for r in sold if r not in source.regions]
        if stray:
            raise DataError(f"{label}: line {line}: regions: {', '.join(stray)} not among the regions source "
                            f"{key!r} covers")
        if (cloud, itype) in out:
            raise DataError(f"{label}: line {line}: {cloud} {itype} listed twice")
        out[(cloud, itype)] = Availability(regions=sold, zones=tuple(sorted(zones.split())),
                                           covered=tuple(source.regions), source=source.citation, as_of=source.as_of)
    return out


@cache
def load_availability() -> Mapping[tuple[str, str], Availability]:
    """The packaged table (read on first call; empty when the data directory has no such file)."""
    data = resources.files("infragen.catalog") / "data"
    table = data / AVAILABILITY_FILE
    if not table.is_file():
        return {}
    regions = parse_regions(REGIONS_FILE, (data / REGIONS_FILE).read_text(encoding="utf-8"))
    return parse_availability(AVAILABILITY_FILE, table.read_text(encoding="utf-8"), regions)
