"""The pre-built catalog.json and catalog_prices.jsonl equal the catalog built from the reviewed YAML/CSV files,
and loading them parses no price row: only the regions a plan or command asks about are read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infragen.catalog import load_catalog, load_catalog_dir
from infragen.catalog.compact import (
    COMPACT_FILE,
    PRICES_FILE,
    catalog_from_compact,
    compact_dict,
    data_dir,
    render_compact,
    render_prices,
)
from infragen.catalog.loader import Catalog
from infragen.errors import DataError


def _fresh() -> Catalog:
    """The packaged catalog loaded anew (load_catalog() is cached per process and other tests read its prices)."""
    return catalog_from_compact(json.loads((data_dir() / COMPACT_FILE).read_text(encoding="utf-8")),
                                (data_dir() / PRICES_FILE).read_text(encoding="utf-8"))


def _book(catalog: Catalog) -> Any:
    return catalog.instances[0]._unread_book()


def test_catalog_json_is_generated_from_the_data_files() -> None:
    built = load_catalog_dir(data_dir())
    text = (data_dir() / COMPACT_FILE).read_text(encoding="utf-8")
    assert text == render_compact(built), "stale: run python -m infragen.catalog.compact and commit catalog.json"
    prices = (data_dir() / PRICES_FILE).read_text(encoding="utf-8")
    assert prices == render_prices(built), f"stale: run python -m infragen.catalog.compact and commit {PRICES_FILE}"


def test_compact_catalog_equals_the_yaml_built_one() -> None:
    built = load_catalog_dir(data_dir())
    packaged = load_catalog()
    assert [i.model_dump() for i in packaged.instances] == [i.model_dump() for i in built.instances]
    assert {k: a.model_dump() for k, a in packaged.accelerators.items()} == {
        k: a.model_dump() for k, a in built.accelerators.items()}
    assert {k: c.model_dump() for k, c in packaged.cpus.items()} == {k: c.model_dump() for k, c in built.cpus.items()}
    assert (packaged.usd_per_cny, packaged.fx_source) == (built.usd_per_cny, built.fx_source)
    assert dict(packaged.region_lists) == dict(built.region_lists)


def test_round_trip_and_version_check() -> None:
    data = json.loads(json.dumps(compact_dict(load_catalog())))
    again = catalog_from_compact(data, render_prices(load_catalog()))
    assert [i.model_dump() for i in again.instances] == [i.model_dump() for i in load_catalog().instances]
    assert list(again.instances) == list(load_catalog_dir(data_dir()).instances)
    with pytest.raises(DataError, match="compact_version"):
        catalog_from_compact({**data, "compact_version": 99}, "")


def test_loading_reads_no_price_row() -> None:
    catalog = _fresh()
    book = _book(catalog)
    assert book is not None and book.read_regions() == set()
    assert all(i._unread_book() is book for i in catalog.instances)
    # What a plan's scope check asks first (regions, families) still reads no price line.
    assert "eu-west-1" in catalog.known_regions("aws") and "cn-shanghai" in catalog.regions("alicloud")
    assert len(catalog.instances_for("aws")) > 50
    assert book.read_regions() == set()


def test_a_price_asked_reads_only_its_region_and_equals_the_built_one() -> None:
    built = {i.id: i for i in load_catalog_dir(data_dir()).instances}
    catalog = _fresh()
    book = _book(catalog)
    g6e = catalog.instance("g6e.xlarge")
    assert g6e.price_in("eu-central-1") == built["g6e.xlarge"].price_in("eu-central-1")
    assert g6e.price_in("eu-central-1") is not None and book.read_regions() == {("aws", "eu-central-1")}
    assert g6e.priced_regions == built["g6e.xlarge"].priced_regions and book.read_regions() == {("aws", "eu-central-1")}
    assert catalog.instance("ecs.gn7i-c8g1.2xlarge").price_in("eu-central-1") == built[
        "ecs.gn7i-c8g1.2xlarge"].price_in("eu-central-1")
    assert book.read_regions() == {("aws", "eu-central-1"), ("alicloud", "eu-central-1")}
    assert g6e.price_in("mars-1") is None
    for inst in catalog.instances:  # every price of every type, region by region and as a list
        assert [inst.price_in(r) for r in built[inst.id].priced_regions] == built[inst.id].prices
    assert all(i.prices == built[i.id].prices for i in catalog.instances)


def test_a_pinned_plan_reads_only_its_regions() -> None:
    from infragen.catalog.models import resolve_model
    from infragen.sizing import plan_workload
    from infragen.spec import load_spec

    example = data_dir().parents[2] / "examples" / "team-chatbot.yaml"
    spec = load_spec(example)
    assert spec.regions == ["us-east-1"]
    catalog = _fresh()
    plan_workload(spec, catalog=catalog, model=resolve_model(spec.model, base_dir=example.parent, where="model"),
                  workload_name="t")
    assert _book(catalog).read_regions() == {("aws", "us-east-1")}
    spec = spec.model_copy(update={"regions": ["eu-west-1", "ap-northeast-1"]})
    catalog = _fresh()
    plan_workload(spec, catalog=catalog, model=resolve_model(spec.model, base_dir=example.parent, where="model"),
                  workload_name="t")
    assert _book(catalog).read_regions() == {("aws", "eu-west-1"), ("aws", "ap-northeast-1")}


def test_your_prices_keep_the_book_lazy_and_give_the_same_prices() -> None:
    from infragen.sizing.scope import apply_price_overrides
    from infragen.spec import PriceOverride

    overrides = [PriceOverride(instance_type="g6e.xlarge", region="us-east-1", on_demand_usd_per_hour=1.0),
                 PriceOverride(instance_type="g6e.xlarge", region="ca-west-1", on_demand_usd_per_hour=2.0)]
    catalog = apply_price_overrides(_fresh(), overrides)
    eager = apply_price_overrides(load_catalog_dir(data_dir()), overrides)
    g6e, book = catalog.instance("g6e.xlarge"), _book(catalog)
    assert g6e.price_in("us-east-1") == eager.instance("g6e.xlarge").price_in("us-east-1")
    assert g6e.price_in("us-east-1").on_demand_usd_per_hour == 1.0
    assert g6e.price_in("eu-central-1") == eager.instance("g6e.xlarge").price_in("eu-central-1")
    assert g6e.priced_regions == eager.instance("g6e.xlarge").priced_regions
    assert g6e.priced_regions[-2:] == ["us-east-1", "ca-west-1"] and "ca-west-1" in catalog.regions("aws")
    assert book.read_regions() == {("aws", "eu-central-1")}  # the override itself read no line
    assert g6e.prices == eager.instance("g6e.xlarge").prices
    assert catalog.instance("g6e.2xlarge").prices == eager.instance("g6e.2xlarge").prices


def test_a_row_missing_from_the_price_lines_is_a_data_error() -> None:
    data = json.loads((data_dir() / COMPACT_FILE).read_text(encoding="utf-8"))
    text = "".join(line + "\n" for line in (data_dir() / PRICES_FILE).read_text(encoding="utf-8").splitlines()
                   if not line.startswith('["aws","us-east-1",'))
    catalog = catalog_from_compact(data, text)
    assert catalog.instance("g6e.xlarge").price_in("us-east-1") is None
    with pytest.raises(DataError, match=r"no row for aws/g6e\.xlarge in us-east-1"):
        _ = catalog.instance("g6e.xlarge").prices


def test_parsed_copies_are_current_and_equal_their_yaml() -> None:
    import yaml

    from infragen.catalog.parsed import PARSED_FILE, PREPARSED, load_yaml_text, render_parsed, stale

    assert stale() == [], "stale: run python -m infragen.catalog.compact and commit parsed.json"
    assert (data_dir() / PARSED_FILE).read_text(encoding="utf-8") == render_parsed()
    for name in PREPARSED:
        text = (data_dir() / name).read_text(encoding="utf-8")
        assert load_yaml_text(text) == yaml.safe_load(text), name


def test_an_edited_file_is_read_as_yaml_and_unrepresentable_files_are_left_out(tmp_path) -> None:
    from infragen.catalog import parsed

    text = (data_dir() / "services.yaml").read_text(encoding="utf-8")
    edited = text.replace("schema_version: 1", "schema_version: 1\nextra_key_for_the_test: 7", 1)
    assert edited != text and parsed.load_yaml_text(edited)["extra_key_for_the_test"] == 7
    (tmp_path / "engines.yaml").write_text("as_of: 2026-01-01\n", encoding="utf-8")  # a date: not JSON
    (tmp_path / "compat.yaml").write_text("a: [1, 2.5, true, null]\n", encoding="utf-8")
    text = parsed.render_parsed(tmp_path)
    assert '"compat.yaml"' in text and '"engines.yaml"' not in text
    (tmp_path / parsed.PARSED_FILE).write_text(text, encoding="utf-8")
    assert parsed.stale(tmp_path) == ["engines.yaml"]


def test_the_generated_files_ship_in_wheels() -> None:
    import fnmatch
    import tomllib

    config = tomllib.loads((data_dir().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["infragen"]
    for name in (COMPACT_FILE, PRICES_FILE, "parsed.json"):
        assert (data_dir() / name).is_file()
        assert any(fnmatch.fnmatch(f"catalog/data/{name}", p) for p in patterns), name
