"""Check a workload's regions and instance-family filter against the catalog before any sizing.

Turns "nothing in scope" into the reason: an unknown region (did you mean), a known region the catalog prices
nothing in, a family name no cloud in scope has. Pure: reads the catalog it is given, raises InputError.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from infragen.catalog import Catalog, RegionPrice
from infragen.errors import InputError, UnknownNameError
from infragen.spec import PriceOverride, WorkloadSpec
from infragen.validation import load_yaml_file, validate_file_data

PRICE_FIX = ("give your own hourly price with `prices:` in the workload (instance_type, region, "
             "on_demand_usd_per_hour) or `infragen plan --prices FILE`, or set allow_unpriced: true")


def _family_names(family: str) -> set[str]:
    return {family, family.removeprefix("ecs."), f"ecs.{family}"}


def check_scope(spec: WorkloadSpec, catalog: Catalog, *, where: str = "workload") -> None:
    """Raise InputError (exit 2) when `regions` or `instance_families` name something the catalog cannot plan."""
    clouds = spec.clouds()
    known = {c: set(catalog.known_regions(c)) for c in clouds}
    for pos, region in enumerate(spec.regions):
        if not any(region in known[c] for c in clouds):
            every = sorted(set().union(*known.values()))
            err = UnknownNameError("region", region, every, where=f"{where}: regions[{pos}]")
            listing = "; ".join(f"{c}: {', '.join(sorted(known[c]))}" for c in clouds)
            raise InputError(err.message, fix=f"use a region of cloud {spec.cloud!r}", hint=f"known regions: {listing}")
    families = {f for c in clouds for i in catalog.instances_for(c) for f in _family_names(i.family)}
    for field in ("allow", "deny"):
        for pos, name in enumerate(getattr(spec.instance_families, field)):
            if name not in families:
                plain = sorted({f for f in families if not f.startswith("ecs.")})
                raise UnknownNameError("instance family", name, plain,
                                       where=f"{where}: instance_families.{field}[{pos}]")
    if spec.allow_unpriced or not spec.regions:
        return
    overridden = {(p.instance_type, p.region) for p in spec.prices}
    allow, deny = set(spec.instance_families.allow), set(spec.instance_families.deny)

    def in_filter(family: str) -> bool:
        names = _family_names(family)
        return (not allow or bool(names & allow)) and not names & deny

    for region in spec.regions:
        sold = [i for c in clouds for i in catalog.instances_for(c)
                if (i.price_in(region) is not None or (i.id, region) in overridden)]
        if not sold:
            priced = sorted({r for c in clouds for r in catalog.regions(c)})
            raise InputError(
                f"{where}: regions: {region!r} is a known region, but the catalog has no price for any instance "
                f"type there (priced regions: {', '.join(priced)})", fix=PRICE_FIX)
    wanted = [i for c in clouds for i in catalog.instances_for(c) if in_filter(i.family)]
    if allow and not any(i.price_in(r) is not None or (i.id, r) in overridden for i in wanted for r in spec.regions):
        where_sold = sorted({p.region for i in wanted for p in i.prices})
        raise InputError(
            f"{where}: instance_families.allow {sorted(allow)} has no priced instance type in "
            f"{', '.join(spec.regions)}; the catalog prices them in: {', '.join(where_sold) or 'no region'}",
            fix="add one of those regions, allow another family, or " + PRICE_FIX)


#: Every price a workload or --prices file supplies carries this in its source (the plan records it).
OVERRIDE_SOURCE = "your price"


class PriceFile(BaseModel):
    """A `--prices FILE`: the same entries as the workload's `prices:` field."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)

    prices: list[PriceOverride]
    """Hourly prices by instance type and region."""


def load_price_file(path: Path) -> list[PriceOverride]:
    """Read a `--prices` YAML file (`prices: [{instance_type, region, on_demand_usd_per_hour...}]`)."""
    return validate_file_data(path, load_yaml_file(path), PriceFile, what="price file").prices


def apply_price_overrides(catalog: Catalog, overrides: list[PriceOverride], *, where: str = "workload",
                          field: str = "prices") -> Catalog:
    """The catalog with the user's prices replacing or adding region prices (exit 2 on an unknown type/region)."""
    if not overrides:
        return catalog
    by_type: dict[str, dict[str, RegionPrice]] = {}
    for pos, o in enumerate(overrides):
        at = f"{where}: {field}[{pos}]"
        try:
            inst = catalog.instance(o.instance_type)
        except UnknownNameError as exc:
            raise UnknownNameError("instance type", o.instance_type, [i.id for i in catalog.instances],
                                   where=f"{at}.instance_type") from exc
        if o.region not in catalog.known_regions(inst.cloud):
            raise UnknownNameError(f"{inst.cloud} region", o.region, catalog.known_regions(inst.cloud),
                                   where=f"{at}.region")
        if inst.cloud == "aws" and o.on_demand_cny_per_hour is not None:
            raise InputError(f"{at}.on_demand_cny_per_hour: {inst.id} is an AWS type: give on_demand_usd_per_hour")
        usd = o.on_demand_usd_per_hour
        if o.on_demand_cny_per_hour is not None:
            usd = round(o.on_demand_cny_per_hour * catalog.usd_per_cny, 6)
        note = f": {o.note}" if o.note else ""
        by_type.setdefault(inst.id, {})[o.region] = RegionPrice.model_construct(
            region=o.region, on_demand_usd_per_hour=usd, on_demand_cny_per_hour=o.on_demand_cny_per_hour,
            spot_usd_per_hour=o.spot_usd_per_hour, source=f"{OVERRIDE_SOURCE} ({at}{note})", as_of="given",
            spot_source=None, zones=[])
    instances = tuple(inst if inst.id not in by_type else inst.with_prices(by_type[inst.id])
                      for inst in catalog.instances)
    return dataclasses.replace(catalog, instances=instances)
