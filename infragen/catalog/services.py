"""Prices of what surrounds the instances (services.yaml): load balancer, NAT gateway, volumes, data transfer.

Data only: each row carries its regions, unit, source and date; a region without a row has no price (never 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

from infragen.catalog.parsed import data_dir, load_yaml_text
from infragen.errors import DataError

ServiceItem = Literal[
    "alb-hour", "alb-lcu-hour", "nlb-hour", "nlb-lcu-hour", "nat-hour", "nat-gb", "volume-gb-month",
    "volume-iops-month", "volume-mb-per-s-month", "cross-zone-gb", "egress-gb", "s3-gateway-gb",
]
ITEMS: frozenset[str] = frozenset(ServiceItem.__args__)  # type: ignore[attr-defined]
#: Items whose cited price is zero (a free path the stack builds), so a $0 there is a fact, not a missing price.
FREE_ITEMS: frozenset[str] = frozenset({"s3-gateway-gb"})


@dataclass(frozen=True)
class ServicePrice:
    """One cited unit price."""

    cloud: str
    item: str
    regions: frozenset[str]
    usd: float
    unit: str
    source: str
    as_of: str

    def cite(self) -> str:
        return f"${self.usd:g} per {self.unit}: {self.source} (as of {self.as_of})"


@dataclass(frozen=True)
class CapacityUnit:
    """What one load-balancer capacity unit (LCU) covers; an hour is billed on the largest dimension."""

    new_connections_per_s: float
    active_connections: float
    gb_per_hour: float
    source: str


@dataclass(frozen=True)
class ServicePrices:
    rows: tuple[ServicePrice, ...]
    capacity_units: dict[tuple[str, str], CapacityUnit]

    def capacity_unit(self, cloud: str, load_balancer: str) -> CapacityUnit | None:
        return self.capacity_units.get((cloud, load_balancer))

    def price(self, cloud: str, region: str, item: str) -> ServicePrice | None:
        """The cited price of `item` in `region`, or None when services.yaml has none there."""
        if item not in ITEMS:
            raise DataError(f"services.yaml: unknown item {item!r}")
        for row in self.rows:
            if row.cloud == cloud and row.item == item and (region in row.regions or "*" in row.regions):
                return row
        return None


@cache
def load_service_prices() -> ServicePrices:
    """services.yaml, checked: known items, positive prices (zero only for FREE_ITEMS), a source and date."""
    text = (data_dir() / "services.yaml").read_text(encoding="utf-8")
    data = load_yaml_text(text)
    rows = []
    for i, row in enumerate(data["prices"]):
        usd = row.get("usd", -1)
        priced = usd > 0 or (usd == 0 and row.get("item") in FREE_ITEMS)
        if row.get("item") not in ITEMS or not row.get("source") or not row.get("as_of") or not priced:
            raise DataError(f"services.yaml: prices[{i}] needs a known item, a positive usd (0 only for "
                            f"{', '.join(sorted(FREE_ITEMS))}), a source and an as_of")
        rows.append(ServicePrice(row["cloud"], row["item"], frozenset(row["regions"]), float(row["usd"]),
                                 row["unit"], row["source"], str(row["as_of"])))
    units = {(u["cloud"], u["load_balancer"]): CapacityUnit(float(u["new_connections_per_s"]),
                                                            float(u["active_connections"]), float(u["gb_per_hour"]),
                                                            u["source"])
             for u in data.get("capacity_units", [])}
    return ServicePrices(tuple(rows), units)
