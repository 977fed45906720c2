"""The packaged catalog in one pre-built JSON (`data/catalog.json`), so loading does not grow with price rows.
`main` also writes `data/parsed.json`, the pre-parsed copies of the other YAML files the plan reads (parsed.py).

The YAML/CSV data files stay the reviewed sources; this file is generated from them
(`python -m infragen.catalog.compact`) and a test checks that it still equals a catalog built from them.
Repeated strings (price sources, dates) are stored once; records are validated by pydantic-core on load.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from infragen.catalog.loader import Catalog, load_catalog_dir
from infragen.catalog.parsed import data_dir
from infragen.catalog.records import Accelerator, CpuModel, InstanceType
from infragen.errors import DataError

COMPACT_FILE = "catalog.json"
COMPACT_VERSION = 1
#: Price fields in the order of a compact price row; string fields are indexes into "strings".
PRICE_FIELDS = ("region", "on_demand_usd_per_hour", "on_demand_cny_per_hour", "spot_usd_per_hour", "source",
                "as_of", "spot_source", "zones")
_STRING_FIELDS = frozenset({"source", "as_of", "spot_source"})


def compact_dict(catalog: Catalog) -> dict[str, Any]:
    """A JSON-ready form of `catalog`: price rows as lists, their strings stored once."""
    strings: dict[str, int] = {}

    def ref(text: str | None) -> int | None:
        return None if text is None else strings.setdefault(text, len(strings))

    instances = []
    for inst in catalog.instances:
        record = inst.model_dump(exclude_defaults=True, exclude={"prices"})
        record["prices"] = [[ref(getattr(p, f)) if f in _STRING_FIELDS else getattr(p, f) for f in PRICE_FIELDS]
                            for p in inst.prices]
        instances.append(record)
    return {
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


def catalog_from_compact(data: Mapping[str, Any]) -> Catalog:
    """The Catalog a compact dict describes (pydantic validates every record; cross-record rules were checked
    when the file was generated and by its test)."""
    if data.get("compact_version") != COMPACT_VERSION:
        raise DataError(f"{COMPACT_FILE}: compact_version {data.get('compact_version')!r}, expected "
                        f"{COMPACT_VERSION}: regenerate with python -m infragen.catalog.compact")
    strings: list[str] = data["strings"]
    instances = []
    for record in data["instances"]:
        # The bulk of the file: each row unpacked in PRICE_FIELDS' order (4x faster than a generic comprehension over
        # the fields; the round-trip test catches a mismatch).
        prices = [{"region": region, "on_demand_usd_per_hour": usd, "on_demand_cny_per_hour": cny,
                   "spot_usd_per_hour": spot, "source": None if source is None else strings[source],
                   "as_of": None if as_of is None else strings[as_of],
                   "spot_source": None if spot_source is None else strings[spot_source], "zones": zones}
                  for region, usd, cny, spot, source, as_of, spot_source, zones in record["prices"]]
        instances.append(InstanceType.model_validate({**record, "prices": prices}))
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
    parser.add_argument("--check", action="store_true", help="exit 1 if catalog.json differs from its sources")
    args = parser.parse_args(argv)
    from infragen.catalog.parsed import PARSED_FILE, render_parsed

    outputs = {COMPACT_FILE: render_compact(load_catalog_dir(data_dir())), PARSED_FILE: render_parsed()}
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
