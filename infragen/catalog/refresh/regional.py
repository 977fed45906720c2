"""Write `regional_prices.csv` (the price of every region) from the stored source excerpts, reproducibly.

Run by a maintainer, never at runtime: `python -m infragen.catalog.refresh.regional [--check]`. Inputs are the
excerpts in `refresh/sources/` (rows copied from public price lists, values unchanged) and the YAML data files:
a region the YAML already prices for a type keeps the YAML price (the table only adds regions).
"""

from __future__ import annotations

import argparse
import csv
import io
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from infragen.catalog.regional import PRICE_COLUMNS, PRICES_FILE

SOURCES = Path(str(resources.files("infragen.catalog.refresh") / "sources"))
DATA = Path(str(resources.files("infragen.catalog") / "data"))

#: excerpt file -> (cloud, price_sources key in regions.yaml)
ALICLOUD_EXCERPTS: dict[str, str] = {"alicloud_jxs1211_5d2e077.csv": "ali-jxs1211-5d2e077"}
#: SkyPilot AWS excerpts: InstanceType,Price,SpotPrice,Region,AvailabilityZone rows as in the source file
AWS_EXCERPTS: dict[str, str] = {"aws_skypilot_v9_2c3d7ea7.csv": "aws-skypilot-v9-2c3d7ea7"}


def _rows(path: Path) -> Iterator[dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        yield from csv.DictReader(line for line in fh if not line.startswith("#"))


def _yaml_priced(data_dir: Path) -> dict[tuple[str, str], set[str]]:
    """(cloud, type) -> regions the YAML files already price."""
    out: dict[tuple[str, str], set[str]] = {}
    for cloud in ("aws", "alicloud"):
        doc: dict[str, Any] = yaml.safe_load((data_dir / f"{cloud}.yaml").read_text(encoding="utf-8"))
        for inst in doc["instances"]:
            out[(cloud, inst["id"])] = {p["region"] for p in inst.get("prices", [])}
    return out


def _fmt(value: float | None) -> str:
    return "" if value is None else repr(value)


def aws_rows(excerpt: Path, key: str, priced: dict[tuple[str, str], set[str]]) -> list[list[str]]:
    """One row per (type, region): on-demand = the region's `Price`, spot = the lowest regular-zone `SpotPrice`.

    Local Zones and Wavelength zones (zone ids with a third dash-separated part, `usw2-lax1-az1`) are left out:
    they are priced apart and rarely sell GPUs.
    """
    by_region: dict[tuple[str, str], list[dict[str, str]]] = {}
    for r in _rows(excerpt):
        if len(r["AvailabilityZone"].split("-")) != 2 or ("aws", r["InstanceType"]) not in priced:
            continue
        by_region.setdefault((r["InstanceType"], r["Region"]), []).append(r)
    out: list[list[str]] = []
    for (itype, region), rows in by_region.items():
        if region in priced[("aws", itype)]:
            continue
        prices = {float(r["Price"]) for r in rows if r["Price"]}
        if len(prices) > 1:
            raise SystemExit(f"{excerpt.name}: {itype} {region}: zones disagree on the on-demand price {prices}")
        spots = [float(r["SpotPrice"]) for r in rows if r["SpotPrice"]]
        if not prices and not spots:
            continue  # listed without any price: nothing to plan with
        zones = " ".join(sorted(r["AvailabilityZone"] for r in rows))
        out.append(["aws", itype, region, _fmt(prices.pop() if prices else None), "",
                    _fmt(min(spots) if spots else None), zones, key])
    return out


def alicloud_rows(excerpt: Path, key: str, priced: dict[tuple[str, str], set[str]]) -> list[list[str]]:
    """One row per (type, region) the excerpt prices; a 0 in the source (the list's "not sold") is no price."""
    out: list[list[str]] = []
    for r in _rows(excerpt):
        itype, region = r["instance_type"], r["region"]
        if float(r["cny_per_hour"]) <= 0:
            continue
        if ("alicloud", itype) in priced and region not in priced[("alicloud", itype)]:
            out.append(["alicloud", itype, region, "", _fmt(float(r["cny_per_hour"])), "", "", key])
    return out


#: The columns an AWS excerpt keeps from SkyPilot's vms.csv (values copied unchanged).
SKYPILOT_COLUMNS = ("InstanceType", "Price", "SpotPrice", "Region", "AvailabilityZone")


def skypilot_excerpt(vms_csv: str, types: set[str], *, citation: str, as_of: str) -> str:
    """An excerpt of a whole SkyPilot AWS `vms.csv` (its text, e.g. `git --git-dir=SNAPSHOT show HEAD:catalogs/v9/
    aws/vms.csv`): every row of `types`, the five SKYPILOT_COLUMNS unchanged, under a header naming the snapshot
    (`citation`) and its date (`as_of`, the snapshot's commit date: the file itself records none).

    Written by a program so no price is copied by hand; rows keep the source's order."""
    reader = csv.DictReader(io.StringIO(vms_csv))
    missing = [c for c in SKYPILOT_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise SystemExit(f"not a SkyPilot AWS vms.csv: no column {', '.join(missing)}")
    out = io.StringIO()
    out.write(f"# Excerpt of {citation} (as of {as_of}), written by python -m infragen.catalog.refresh.regional "
              "--skypilot-vms.\n# Columns copied unchanged; every row of the catalog's AWS instance types.\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(SKYPILOT_COLUMNS)
    found: set[str] = set()
    for row in reader:
        if row["InstanceType"] in types:
            found.add(row["InstanceType"])
            writer.writerow([row[c] for c in SKYPILOT_COLUMNS])
    if not found:
        raise SystemExit("the file lists none of the catalog's AWS instance types")
    return out.getvalue()


def catalog_types(cloud: str, data_dir: Path = DATA) -> set[str]:
    """Instance type ids the YAML file of `cloud` holds."""
    return {itype for (c, itype) in _yaml_priced(data_dir) if c == cloud}


def build(data_dir: Path = DATA, sources: Path = SOURCES) -> str:
    """The text of regional_prices.csv: rows sorted by cloud, instance type, region."""
    priced = _yaml_priced(data_dir)
    rows: list[list[str]] = []
    for name, key in AWS_EXCERPTS.items():
        if (sources / name).is_file():
            rows += aws_rows(sources / name, key, priced)
    for name, key in ALICLOUD_EXCERPTS.items():
        rows += alicloud_rows(sources / name, key, priced)
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(PRICE_COLUMNS)
    writer.writerows(rows)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the packaged table differs (no write)")
    parser.add_argument("--skypilot-vms", type=Path, metavar="VMS_CSV",
                        help="write a new AWS excerpt from this whole SkyPilot vms.csv (with --citation, --as-of, "
                             "--out), then stop: register the file in AWS_EXCERPTS and regions.yaml, and rerun")
    parser.add_argument("--citation", help="owner/repo@commit path of --skypilot-vms")
    parser.add_argument("--as-of", help="the snapshot's commit date, YYYY-MM-DD")
    parser.add_argument("--out", type=Path, help="where the excerpt goes (refresh/sources/aws_skypilot_<...>.csv)")
    args = parser.parse_args(argv)
    if args.skypilot_vms:
        if not (args.citation and args.as_of and args.out):
            parser.error("--skypilot-vms needs --citation, --as-of and --out")
        text = skypilot_excerpt(args.skypilot_vms.read_text(encoding="utf-8"), catalog_types("aws"),
                                citation=args.citation, as_of=args.as_of)
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}: {text.count(chr(10)) - 3} rows")
        return 0
    text = build()
    target = DATA / PRICES_FILE
    if args.check:
        same = target.is_file() and target.read_text(encoding="utf-8") == text
        print(f"{target}: {'up to date' if same else 'differs from its sources'}")
        return 0 if same else 1
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}: {text.count(chr(10)) - 1} rows")
    from infragen.catalog import compact

    return compact.main([])  # the pre-built catalog.json follows its sources


if __name__ == "__main__":
    raise SystemExit(main())
