"""The committed schema and workload reference are current, every field is documented, examples validate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from infragen.architecture import ModelArchitecture
from infragen.cli.spec_cmd import REGENERATE, render_workload_reference
from infragen.fielddocs import document
from infragen.spec import FamilyFilter, LimitsSpec, SloSpec, SpotSpec, TrafficSpec, WorkloadSpec, workload_json_schema
from tests.spec.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def test_schema_file_is_current() -> None:
    committed = json.loads((ROOT / "docs" / "workload.schema.json").read_text())
    assert committed == workload_json_schema(), "regenerate: infragen schema > docs/workload.schema.json"


def test_schema_command_prints_the_schema() -> None:
    r = run_cli("schema")
    assert r.code == 0 and json.loads(r.out) == workload_json_schema()


def test_workload_reference_is_current() -> None:
    committed = (ROOT / "docs" / "workload.md").read_text()
    assert committed == render_workload_reference(), f"regenerate: {REGENERATE}"


@pytest.mark.parametrize("model", [WorkloadSpec, TrafficSpec, SloSpec, FamilyFilter, LimitsSpec, SpotSpec,
                                   ModelArchitecture])
def test_every_field_has_a_docstring(model: type[BaseModel]) -> None:
    document(model)  # descriptions are attached on demand (infragen.fielddocs), not at import
    undocumented = [name for name, info in model.model_fields.items() if not (info.description or "").strip()]
    assert undocumented == []


def test_reference_lists_every_field_and_model() -> None:
    text = render_workload_reference()
    for name in WorkloadSpec.model_fields:
        assert f"| `{name}` |" in text
    for name in TrafficSpec.model_fields:
        assert f"| `traffic.{name}` |" in text
    assert "| `deepseek-v3` |" in text and "yaml-language-server: $schema=" in text


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_validate(path: Path) -> None:
    first = path.read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=../docs/workload.schema.json"
    r = run_cli("validate", str(path))
    assert r.code == 0, r.err


def test_models_command_lists_the_registry() -> None:
    r = run_cli("models", "--format", "json")
    rows = json.loads(r.out)
    by_id = {row["id"]: row for row in rows}
    assert r.code == 0 and len(rows) >= 27
    assert by_id["deepseek-v3"]["attention"] == "mla" and by_id["deepseek-v3"]["params_b"] == pytest.approx(671, 0.001)
    table = run_cli("models")
    assert table.code == 0 and "qwen2.5-72b" in table.out and table.out.startswith("id ")
