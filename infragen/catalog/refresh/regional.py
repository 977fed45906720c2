"""Write `regional_prices.csv` (the price of every region) from the stored source excerpts, reproducibly.

Run by a maintainer, never at runtime: `python -m infragen.catalog.refresh.regional [--check]`. Inputs are the
excerpts in `refresh/sources/` (rows copied from public price lists, values unchanged) and the YAML data files:
a region the YAML already prices for a type keeps the YAML price (the table only adds regions).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
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
#: Excerpts of AWS's own per-region on-demand price files (InstanceType,Price,Region), older than the lists above:
#: they only fill (type, region) pairs nothing newer prices, and never for a family they contradict (see
#: `superseded_families`).
AWS_ON_DEMAND_EXCERPTS: dict[str, str] = {"aws_pricing_json_20250404.csv": "aws-pricing-json-20250404"}


def _rows(path: Path) -> Iterator[dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        yield from csv.DictReader(line for line in fh if not line.startswith("#"))


def _yaml_docs(data_dir: Path) -> dict[str, dict[str, Any]]:
    return {cloud: yaml.safe_load((data_dir / f"{cloud}.yaml").read_text(encoding="utf-8"))
            for cloud in ("aws", "alicloud")}


def _yaml_priced(data_dir: Path) -> dict[tuple[str, str], set[str]]:
    """(cloud, type) -> regions the YAML files already price."""
    return {(cloud, inst["id"]): {p["region"] for p in inst.get("prices", [])}
            for cloud, doc in _yaml_docs(data_dir).items() for inst in doc["instances"]}


def _yaml_aws_on_demand(data_dir: Path) -> dict[tuple[str, str], float]:
    """(AWS type, region) -> the on-demand USD price aws.yaml states."""
    return {(inst["id"], p["region"]): float(p["on_demand_usd_per_hour"])
            for inst in _yaml_docs(data_dir)["aws"]["instances"] for p in inst.get("prices", [])
            if p.get("on_demand_usd_per_hour") is not None}


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


def _family(itype: str) -> str:
    return itype.split(".", 1)[0]


def _on_demand_excerpt(excerpt: Path) -> dict[tuple[str, str], float]:
    """(type, region) -> price of an AWS on-demand excerpt; a pair listed twice is an error."""
    out: dict[tuple[str, str], float] = {}
    for r in _rows(excerpt):
        pair = (r["InstanceType"], r["Region"])
        if pair in out:
            raise SystemExit(f"{excerpt.name}: {pair[0]} {pair[1]} listed twice")
        out[pair] = float(r["Price"])
    return out


def superseded_families(older: dict[tuple[str, str], float], newer: dict[tuple[str, str], float]) -> set[str]:
    """Families for which the older list states a different on-demand price than a newer one, anywhere both price
    the same type in the same region: there the older list is out of date (AWS's 2025-06 P4d/P4de/P5/P5en
    reduction), so none of its prices of that family is used, in any region. Families whose overlapping prices
    all agree keep the older list's prices where nothing newer has one."""
    return {_family(itype) for (itype, region), price in older.items()
            if (itype, region) in newer and abs(newer[(itype, region)] - price) > 1e-9}


def aws_on_demand_rows(excerpt: Path, key: str, newer: dict[tuple[str, str], float],
                       taken: set[tuple[str, str]]) -> tuple[list[list[str]], set[str]]:
    """Rows for the (type, region) pairs of an older on-demand list that no newer source prices (`taken`: pairs
    with any row already, on-demand or spot; `newer`: their on-demand prices), leaving out superseded families.
    Returns (rows, the families left out)."""
    older = _on_demand_excerpt(excerpt)
    stale = superseded_families(older, newer)
    rows = [["aws", itype, region, _fmt(price), "", "", "", key]
            for (itype, region), price in older.items()
            if (itype, region) not in taken and _family(itype) not in stale]
    return rows, stale


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


#: Columns of an excerpt of AWS's per-region on-demand price files.
AWS_PRICE_JSON_COLUMNS = ("InstanceType", "Price", "Region")
#: What a file must state in its manifest to be read: on-demand, shared tenancy, US dollars.
AWS_PRICE_JSON_SOURCE = "ec2-ondemand-without-sec-sel"


def aws_pricing_json_excerpt(files: dict[str, str], types: set[str], *, citation: str) -> tuple[str, str]:
    """An excerpt of AWS's per-region on-demand price files (the JSON behind its EC2 on-demand pricing page, source
    `ec2-ondemand-without-sec-sel`, one file per region, Linux; `files`: region code -> the file's text): every
    Linux, no-license row of `types`, as InstanceType,Price,Region with the price string unchanged. The date is
    read from the files' manifest (`hawkFilePublicationDate`), which must be one date for all files.

    Returns (excerpt text, as-of date). Written by a program so no price is copied by hand."""
    dates: set[str] = set()
    rows: dict[tuple[str, str], str] = {}
    for region in sorted(files):
        doc = json.loads(files[region])
        manifest = doc.get("manifest", {})
        if manifest.get("source") != AWS_PRICE_JSON_SOURCE or manifest.get("currencyCode") != "USD":
            raise SystemExit(f"{region}: not an {AWS_PRICE_JSON_SOURCE} USD price file (manifest {manifest})")
        dates.add(str(manifest["hawkFilePublicationDate"])[:10])
        for products in doc["regions"].values():
            for item in products.values():
                itype = item.get("Instance Type")
                if itype not in types or item.get("Operating System") != "Linux" or \
                        item.get("Pre Installed S/W") != "NA" or item.get("License Model") != "No License required":
                    continue
                if (itype, region) in rows and rows[(itype, region)] != item["price"]:
                    raise SystemExit(f"{region}: {itype} has two prices")
                rows[(itype, region)] = item["price"]
    if len(dates) != 1:
        raise SystemExit(f"the files were published on different dates: {sorted(dates)}")
    if not rows:
        raise SystemExit("the files list none of the catalog's AWS instance types")
    (as_of,) = dates
    out = io.StringIO()
    out.write(f"# Excerpt of {citation} (as of {as_of}: the files' hawkFilePublicationDate), written by python -m "
              "infragen.catalog.refresh.regional --aws-pricing-json.\n# Linux on-demand USD/h of the catalog's AWS "
              "instance types, price strings unchanged; one file per region.\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(AWS_PRICE_JSON_COLUMNS)
    for (itype, region), price in sorted(rows.items()):
        writer.writerow([itype, price, region])
    return out.getvalue(), as_of


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
    newer = _yaml_aws_on_demand(data_dir) | {(r[1], r[2]): float(r[3]) for r in rows if r[3]}
    taken = {(itype, region) for (cloud, itype), regions in priced.items() if cloud == "aws" for region in regions}
    taken |= {(r[1], r[2]) for r in rows}
    for name, key in AWS_ON_DEMAND_EXCERPTS.items():
        older, _ = aws_on_demand_rows(sources / name, key, newer, taken)
        rows += older
        taken |= {(r[1], r[2]) for r in older}
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
    parser.add_argument("--aws-pricing-json", type=Path, metavar="DIR",
                        help="write a new AWS on-demand excerpt from a folder of AWS's per-region on-demand price "
                             "files named <region>-ondemand.json (with --citation, --out), then stop")
    parser.add_argument("--citation", help="owner/repo@commit path of --skypilot-vms or --aws-pricing-json")
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
    if args.aws_pricing_json:
        if not (args.citation and args.out):
            parser.error("--aws-pricing-json needs --citation and --out")
        files = {f.name.removesuffix("-ondemand.json"): f.read_text(encoding="utf-8")
                 for f in sorted(args.aws_pricing_json.glob("*-ondemand.json"))
                 if re.fullmatch(r"[a-z]{2}-[a-z]+-\d", f.name.removesuffix("-ondemand.json"))}  # no Local Zones
        text, as_of = aws_pricing_json_excerpt(files, catalog_types("aws"), citation=args.citation)
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}: {text.count(chr(10)) - 3} rows from {len(files)} regions, as of {as_of}")
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
