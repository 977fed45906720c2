"""Which region sells which AWS type (aws_availability.csv): regenerated from its source, consistent with the
price rows, shown by `infragen catalog --format json`, and the done-when types' coverage cannot silently shrink."""

from __future__ import annotations

import json

import pytest

from infragen.catalog import load_catalog
from infragen.catalog.availability import AVAILABILITY_COLUMNS, load_availability, parse_availability
from infragen.catalog.refresh import availability as refresh
from infragen.catalog.refresh import packaged_data_dir
from infragen.catalog.regional import parse_regions
from infragen.cli import main
from infragen.errors import DataError

REGIONS = """
schema_version: 1
source: test
as_of: "2026-01-01"
clouds:
  aws: {source: test, regions: [us-east-1, eu-west-1, sa-east-1]}
  alicloud: {source: test, regions: [cn-shanghai]}
price_sources: {}
availability_sources:
  o: {citation: an offerings list, as_of: unknown, regions: [us-east-1, eu-west-1]}
"""
HEADER = ",".join(AVAILABILITY_COLUMNS)


def _recorded_key() -> str:
    (key,) = parse_regions("regions.yaml", (packaged_data_dir() / "regions.yaml").read_text()).availability_sources
    return key


def test_packaged_file_is_what_the_refresh_script_writes_from_moto() -> None:
    version, _, covered = refresh.moto_offerings()
    if refresh.source_key(version) != _recorded_key():
        pytest.skip(f"installed moto {version} is not the version the file was written from ({_recorded_key()})")
    text = (packaged_data_dir() / "aws_availability.csv").read_text(encoding="utf-8")
    assert refresh.build() == text, "run python -m infragen.catalog.refresh.availability and review the diff"
    regions = parse_regions("regions.yaml", (packaged_data_dir() / "regions.yaml").read_text())
    assert regions.availability_sources[_recorded_key()].regions == covered


def test_no_aws_type_is_priced_where_its_offerings_say_it_is_not_sold() -> None:
    """Regions and the zone ids SkyPilot's rows carry must both be offered (p3 has no offerings row: skipped)."""
    sold_in = load_availability()
    regions = zones = 0
    for inst in load_catalog().instances_for("aws"):
        sold = sold_in.get(("aws", inst.id))
        if sold is None:
            continue
        for p in inst.prices:
            if p.region in sold.covered:
                assert p.region in sold.regions, (inst.id, p.region)
                assert set(p.zones) <= set(sold.zones), (inst.id, p.region, sorted(set(p.zones) - set(sold.zones)))
                regions += 1
                zones += len(p.zones)
    assert regions > 500 and zones > 700


def test_done_when_types_priced_in_nearly_every_region_that_sells_them() -> None:
    """g6e.xlarge is sold in 12 regions of the snapshot, p5.48xlarge in 13; the catalog prices 10 and 12 of them.
    No stored list prices g6e in ap-south-1 or ap-south-2 (AWS's 2025-04-04 files do not list g6e there), and the
    only sa-east-1 p5.48xlarge price found (AWS's files of 2025-04-04) predates AWS's 2025-06 P5 reduction, so it
    is left out (see test_regional). Fails if a count drops or a stale price slips in."""
    cat, sold_in = load_catalog(), load_availability()
    for itype, sold_n, priced_n in (("g6e.xlarge", 12, 10), ("p5.48xlarge", 13, 12)):
        sold = sold_in[("aws", itype)]
        priced = {p.region for p in cat.instance(itype).prices}
        assert len(sold.regions) == sold_n, itype
        assert len(priced) >= priced_n and priced <= set(sold.regions), itype
    assert "sa-east-1" in sold_in[("aws", "p5.48xlarge")].regions
    assert cat.instance("p5.48xlarge").price_in("sa-east-1") is None
    assert {"ap-south-1", "ap-south-2"} <= set(sold_in[("aws", "g6e.xlarge")].regions)


def test_more_done_when_types_priced_in_every_region_that_sells_them() -> None:
    """With AWS's own 2025-04-04 files, g4dn.xlarge is priced in all 21 regions that sell it and g5.xlarge in 17
    of 19 (eu-south-2 and eu-west-3: in none of the stored lists); fails if either drops."""
    cat, sold_in = load_catalog(), load_availability()
    for itype, priced_n in (("g4dn.xlarge", 21), ("g5.xlarge", 17)):
        priced = {p.region for p in cat.instance(itype).prices}
        assert len(priced) >= priced_n and priced <= set(sold_in[("aws", itype)].regions), itype
    assert len(cat.regions("aws")) >= 29


def test_table_rows_are_checked() -> None:
    regions = parse_regions("regions.yaml", REGIONS)
    ok = parse_availability("a.csv", f"{HEADER}\naws,g5.xlarge,us-east-1 eu-west-1,use1-az2 euw1-az1,o\n", regions)
    assert ok[("aws", "g5.xlarge")].regions == ("eu-west-1", "us-east-1")
    assert ok[("aws", "g5.xlarge")].zones == ("euw1-az1", "use1-az2")
    assert ok[("aws", "g5.xlarge")].covered == ("us-east-1", "eu-west-1")
    bad = {
        "aws,g5.xlarge,us-east-1,,nope": "'nope' is not a key of availability_sources",
        "aws,g5.xlarge,sa-east-1,,o": "sa-east-1 not among the regions source 'o' covers",
        "aws,g5.xlarge,us-east-1,,o\naws,g5.xlarge,eu-west-1,,o": "aws g5.xlarge listed twice",
        "aws,g5.xlarge,o": "expected 5 columns",
    }
    for rows, message in bad.items():
        with pytest.raises(DataError, match=message):
            parse_availability("a.csv", f"{HEADER}\n{rows}\n", regions)
    with pytest.raises(DataError, match="the header must be"):
        parse_availability("a.csv", "cloud,instance_type\n", regions)


def test_catalog_json_shows_where_a_type_is_sold(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        main(["catalog", "--format", "json"])
    except SystemExit as exc:
        assert not exc.code
    rows = json.loads(capsys.readouterr().out)
    g6e = [r for r in rows if r["instance_type"] == "g6e.xlarge"]
    assert all(len(r["sold_in"]) == 12 and "ap-south-2" in r["sold_in"] for r in g6e)
    assert "moto 5.2.5" in g6e[0]["sold_in_source"] and "aps2-az1" in g6e[0]["sold_in_zones"]
    assert {r["region"] for r in g6e} < set(g6e[0]["sold_in"])
    ali = next(r for r in rows if r["cloud"] == "alicloud")
    assert ali["sold_in"] is None and ali["sold_in_zones"] is None and ali["sold_in_source"] is None
