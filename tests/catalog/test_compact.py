"""The pre-built catalog.json equals the catalog built from the reviewed YAML/CSV files, and loads fast."""

from __future__ import annotations

import json

import pytest

from infragen.catalog import load_catalog, load_catalog_dir
from infragen.catalog.compact import COMPACT_FILE, catalog_from_compact, compact_dict, data_dir, render_compact
from infragen.errors import DataError


def test_catalog_json_is_generated_from_the_data_files() -> None:
    built = load_catalog_dir(data_dir())
    text = (data_dir() / COMPACT_FILE).read_text(encoding="utf-8")
    assert text == render_compact(built), "stale: run python -m infragen.catalog.compact and commit catalog.json"


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
    again = catalog_from_compact(data)
    assert [i.model_dump() for i in again.instances] == [i.model_dump() for i in load_catalog().instances]
    with pytest.raises(DataError, match="compact_version"):
        catalog_from_compact({**data, "compact_version": 99})


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
