"""resolve_model: registry ids, aliases, config.json paths, explicit architectures, unknown names."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from infragen.architecture import ModelArchitecture
from infragen.catalog.models import load_model_registry, registry_from_file, resolve_model
from infragen.errors import DataError, InputError, UnknownNameError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"
EXAMPLE_IDS = ["phi-3-mini-4k", "qwen2-7b", "llama-3.1-70b", "qwen2.5-72b", "tinyllama-1.1b", "llama-3.1-405b",
               "qwen2-72b", "gemma-2b"]


@pytest.mark.parametrize("name", EXAMPLE_IDS)
def test_example_ids_resolve(name: str, tmp_path: Path) -> None:
    assert resolve_model(name, base_dir=tmp_path, where="w.yaml: model").id == name


@pytest.mark.parametrize(
    ("alias", "model_id"),
    [("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"), ("Llama-3.1-8B", "llama-3.1-8b"),
     ("llama3.1-8b", "llama-3.1-8b"), ("LLAMA-3.1-8B", "llama-3.1-8b"), ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b"),
     ("microsoft/Phi-3-mini-4k-instruct", "phi-3-mini-4k"), ("deepseek-ai/DeepSeek-R1", "deepseek-r1")],
)
def test_aliases_case_insensitive(alias: str, model_id: str, tmp_path: Path) -> None:
    assert resolve_model(alias, base_dir=tmp_path, where="m").id == model_id


def test_unknown_model_did_you_mean(tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError) as exc:
        resolve_model("llama-3.1-7b", base_dir=tmp_path, where="w.yaml: model")
    msg = exc.value.message
    assert msg.startswith("w.yaml: model: unknown model 'llama-3.1-7b'")
    assert "did you mean" in msg and "'llama-3.1-8b'" in msg
    assert exc.value.exit_code == 2


def test_config_json_path_relative_to_base_dir(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    shutil.copy(FIXTURES / "qwen3-8b.json", tmp_path / "m" / "config.json")
    by_file = resolve_model("m/config.json", base_dir=tmp_path, where="m")
    by_dir = resolve_model("./m", base_dir=tmp_path, where="m")  # a folder holding config.json
    assert by_file.family == "qwen3" and by_file.id == "m"
    assert by_dir == by_file
    assert resolve_model(str(tmp_path / "m"), base_dir=Path("/"), where="m").family == "qwen3"


def test_missing_json_path_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        resolve_model("nowhere/config.json", base_dir=tmp_path, where="w.yaml: model")


def test_explicit_architecture_returned_as_is(tmp_path: Path) -> None:
    arch = ModelArchitecture(hidden_size=64, num_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=100)
    assert resolve_model(arch, base_dir=tmp_path, where="m") is arch


def test_registry_is_cached_and_read_only() -> None:
    assert load_model_registry() is load_model_registry()
    with pytest.raises(TypeError):
        load_model_registry()["x"] = None  # type: ignore[index]


def _entry(model_id: str, aliases: list[str]) -> dict[str, object]:
    return dict(id=model_id, aliases=aliases, hidden_size=8, num_layers=1, num_attention_heads=1,
                intermediate_size=8, vocab_size=8, source="test", published_params_b=1.0,
                published_params_source="test")


def test_duplicate_alias_rejected() -> None:
    data = {"schema_version": 1, "source": "t", "as_of": "2026-01-01",
            "models": [_entry("a-1", ["Same"]), _entry("b-1", ["same"])]}
    with pytest.raises(DataError, match="already belongs to 'a-1'"):
        registry_from_file("models.yaml", data)


def test_entry_without_published_count_rejected() -> None:
    entry = _entry("a-1", [])
    del entry["published_params_b"]
    with pytest.raises(DataError, match="published_params_b"):
        registry_from_file("models.yaml", {"schema_version": 1, "source": "t", "as_of": "x", "models": [entry]})


def test_registry_seam(tmp_path: Path) -> None:
    tiny = registry_from_file("t.yaml", {"schema_version": 1, "source": "t", "as_of": "x",
                                         "models": [_entry("tiny-1", ["Tiny"])]})
    assert resolve_model("TINY", base_dir=tmp_path, where="m", registry=tiny).id == "tiny-1"
    with pytest.raises(UnknownNameError, match="did you mean 'tiny-1'"):
        resolve_model("tiny-2", base_dir=tmp_path, where="m", registry=tiny)
