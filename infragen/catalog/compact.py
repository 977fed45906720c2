"""The packaged catalog pre-built (`data/catalog.json` and `data/catalog_prices.jsonl`), so loading does not grow
with price rows. `main` also writes `data/parsed.json`, the pre-parsed copies of the other YAML files the plan reads
(parsed.py).

The YAML/CSV data files stay the reviewed sources; these files are generated from them
(`python -m infragen.catalog.compact`) and a test checks that they still equal a catalog built from them.
catalog.json holds the accelerator, CPU and instance records (validated by pydantic on load) and, per instance, the
regions it is priced in; catalog_prices.jsonl holds the price rows, one line per cloud and region. The lines are
read as text and parsed only for the regions a plan or command asks about (PriceLines), each row validated when it
is first asked for: rows of other regions are never parsed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from infragen.catalog.loader import Catalog, load_catalog_dir
from infragen.catalog.parsed import data_dir
from infragen.catalog.records import Accelerator, CpuModel, InstanceType, RegionPrice
from infragen.errors import DataError

COMPACT_FILE = "catalog.json"
PRICES_FILE = "catalog_prices.jsonl"
COMPACT_VERSION = 2
#: Fields of a compact price row (the region is the line's); string fields are indexes into "strings".
PRICE_FIELDS = ("on_demand_usd_per_hour", "on_demand_cny_per_hour", "spot_usd_per_hour", "source", "as_of",
                "spot_source", "zones")
_STRING_FIELDS = frozenset({"source", "as_of", "spot_source"})


def _compact_parts(catalog: Catalog) -> tuple[dict[str, Any], dict[tuple[str, str], dict[str, list[Any]]]]:
    """(catalog.json's dict, price rows by (cloud, region) then instance type), strings stored once."""
    strings: dict[str, int] = {}

    def ref(text: str | None) -> int | None:
        return None if text is None else strings.setdefault(text, len(strings))

    instances = []
    lines: dict[tuple[str, str], dict[str, list[Any]]] = {}
    for inst in catalog.instances:
        record = inst.model_dump(exclude_defaults=True, exclude={"prices"})
        record["priced_in"] = " ".join(p.region for p in inst.prices)
        instances.append(record)
        for p in inst.prices:
            lines.setdefault((inst.cloud, p.region), {})[inst.id] = [
                ref(getattr(p, f)) if f in _STRING_FIELDS else getattr(p, f) for f in PRICE_FIELDS]
    data = {
        "compact_version": COMPACT_VERSION,
        "generated_by": "python -m infragen.catalog.compact (from the YAML/CSV files next to this one; do not edit)",
        "usd_per_cny": catalog.usd_per_cny,
        "fx_source": catalog.fx_source,
        "region_lists": {cloud: list(regions) for cloud, regions in catalog.region_lists.items()},
        "accelerators": [a.model_dump(exclude_defaults=True) for a in catalog.accelerators.values()],
        "cpus": [c.model_dump(exclude_defaults=True) for c in catalog.cpus.values()],
        "instances": instances,
        "strings": list(strings),
    }
    return data, dict(sorted(lines.items()))


def compact_dict(catalog: Catalog) -> dict[str, Any]:
    """A JSON-ready form of catalog.json for `catalog` (its prices are render_prices')."""
    return _compact_parts(catalog)[0]


def render_prices(catalog: Catalog) -> str:
    """The text of catalog_prices.jsonl: one line per cloud and region, `["aws","us-east-1",{type: row}]`."""
    _, lines = _compact_parts(catalog)
    return "".join(json.dumps([cloud, region, rows], separators=(",", ":"), ensure_ascii=False) + "\n"
                   for (cloud, region), rows in lines.items())


class PriceLines:
    """The price book of the packaged catalog (records.PriceBook): catalog_prices.jsonl kept as text; a region's
    line is parsed and its rows validated the first time a price there is asked for, and never otherwise."""

    def __init__(self, text: str, priced_in: Mapping[tuple[str, str], str], strings: list[str]) -> None:
        self._text = text
        self._priced_in = priced_in  # (cloud, type) -> its regions, space-separated, in order
        self._strings = strings
        self._spans: dict[tuple[str, str], tuple[int, int]] | None = None
        self._regions: dict[tuple[str, str], dict[str, RegionPrice]] = {}

    def regions_of(self, cloud: str, instance_type: str) -> list[str]:
        return self._priced_in.get((cloud, instance_type), "").split()

    def price(self, cloud: str, instance_type: str, region: str) -> RegionPrice | None:
        rows = self._regions.get((cloud, region))
        if rows is None:
            rows = self._read(cloud, region)
        return rows.get(instance_type)

    def prices_of(self, cloud: str, instance_type: str) -> list[RegionPrice]:
        regions = self.regions_of(cloud, instance_type)
        prices = [self.price(cloud, instance_type, r) for r in regions]
        missing = [r for r, p in zip(regions, prices, strict=True) if p is None]
        if missing:
            raise DataError(f"{PRICES_FILE}: no row for {cloud}/{instance_type} in {', '.join(missing)}, which "
                            f"{COMPACT_FILE} says price it: regenerate with python -m infragen.catalog.compact")
        return [p for p in prices if p is not None]

    def read_regions(self) -> set[tuple[str, str]]:
        """The (cloud, region) lines parsed so far (tests: a plan reads only the regions it asks about)."""
        return set(self._regions)

    def _read(self, cloud: str, region: str) -> dict[str, RegionPrice]:
        """Parse one region's line and validate its rows (one pydantic-core call per row, no Python wrapper)."""
        if self._spans is None:
            self._spans = self._index()
        span = self._spans.get((cloud, region))
        rows = {} if span is None else json.loads(self._text[span[0]:span[1]])[2]
        strings, validate = self._strings, RegionPrice.__pydantic_validator__.validate_python
        made = self._regions[(cloud, region)] = {
            itype: validate({"region": region, "on_demand_usd_per_hour": usd, "on_demand_cny_per_hour": cny,
                             "spot_usd_per_hour": spot, "source": strings[source], "as_of": strings[as_of],
                             "spot_source": None if spot_source is None else strings[spot_source], "zones": zones})
            for itype, (usd, cny, spot, source, as_of, spot_source, zones) in rows.items()}
        return made

    def _index(self) -> dict[tuple[str, str], tuple[int, int]]:
        """Where each line is, by its `["cloud","region",` prefix: found without copying or parsing the text."""
        text, spans, pos = self._text, {}, 0
        while pos < len(text):
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            cloud_end = text.find('"', pos + 2)
            region_end = text.find('"', cloud_end + 3)
            spans[(text[pos + 2:cloud_end], text[cloud_end + 3:region_end])] = (pos, end)
            pos = end + 1
        return spans


def catalog_from_compact(data: Mapping[str, Any], prices_text: str) -> Catalog:
    """The Catalog catalog.json's dict and catalog_prices.jsonl's text describe. Pydantic validates every
    accelerator, CPU and instance record now and each price row when it is first asked for; cross-record rules
    were checked when the files were generated and by their test."""
    if data.get("compact_version") != COMPACT_VERSION:
        raise DataError(f"{COMPACT_FILE}: compact_version {data.get('compact_version')!r}, expected "
                        f"{COMPACT_VERSION}: regenerate with python -m infragen.catalog.compact")
    records = [dict(r) for r in data["instances"]]
    priced_in = {(r["cloud"], r["id"]): r.pop("priced_in") for r in records}
    book = PriceLines(prices_text, priced_in, data["strings"])
    instances = [InstanceType.with_price_book(r, book) for r in records]
    accs = [Accelerator.model_validate(a) for a in data["accelerators"]]
    cpus = [CpuModel.model_validate(c) for c in data["cpus"]]
    return Catalog(
        accelerators=MappingProxyType({a.id: a for a in accs}),
        cpus=MappingProxyType({c.id: c for c in cpus}),
        instances=tuple(instances),
        usd_per_cny=data["usd_per_cny"],
        fx_source=data["fx_source"],
        region_lists=MappingProxyType({k: tuple(v) for k, v in data["region_lists"].items()}),
    )


def render_compact(catalog: Catalog) -> str:
    """The text of catalog.json (one record per line, so a data change shows as a readable diff)."""
    data = compact_dict(catalog)
    lines = ["{"]
    keys = list(data)
    for k, key in enumerate(keys):
        value = data[key]
        end = "," if k < len(keys) - 1 else ""
        if isinstance(value, list):
            items = [json.dumps(v, separators=(",", ":"), ensure_ascii=False) for v in value]
            body = ",\n".join(f"  {item}" for item in items)
            lines.append(f"{json.dumps(key)}: [\n{body}\n]{end}" if items else f"{json.dumps(key)}: []{end}")
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False, separators=(',', ':'))}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse  # only the refresh command needs it, not every plan that loads the catalog

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a generated file differs from its sources")
    args = parser.parse_args(argv)
    from infragen.catalog.parsed import PARSED_FILE, render_parsed

    built = load_catalog_dir(data_dir())
    outputs = {COMPACT_FILE: render_compact(built), PRICES_FILE: render_prices(built), PARSED_FILE: render_parsed()}
    stale = 0
    for name, text in outputs.items():
        target = data_dir() / name
        if args.check:
            same = target.is_file() and target.read_text(encoding="utf-8") == text
            stale += not same
            print(f"{target}: {'up to date' if same else 'stale: run python -m infragen.catalog.compact'}")
        else:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target} ({len(text.encode()):,} bytes)")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
