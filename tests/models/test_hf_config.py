"""HF config.json import: one real config per supported model_type, compared with the registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infragen.architecture import ModelArchitecture
from infragen.catalog.hf_config import SUPPORTED_MODEL_TYPES, architecture_from_hf_config, load_hf_config
from infragen.catalog.models import load_model_registry
from infragen.errors import InputError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"
REGISTRY = load_model_registry()

#: fixture -> registry id
SAME_MODEL = {
    "llama-3.1-8b-instruct.json": "llama-3.1-8b",
    "qwen2-7b-instruct.json": "qwen2-7b",
    "qwen3-30b-a3b.json": "qwen3-30b-a3b",
    "mistral-7b-instruct-v0.3.json": "mistral-7b",
    "mixtral-8x7b-instruct-v0.1.json": "mixtral-8x7b",
    "gemma-2b-it.json": "gemma-2b",
    "phi-3-mini-4k-instruct.json": "phi-3-mini-4k",
    "deepseek-v3.json": "deepseek-v3",
}
#: Fields that describe provenance or naming, not the shape.
NOT_SHAPE = {
    "id", "display_name", "hf_repo", "source", "published_params_b", "published_active_params_b",
    "published_params_source", "published_active_includes_embedding", "aliases", "notes",
    "max_position_embeddings", "original_max_position_embeddings", "yarn_factor", "rope_theta",
}


def _shape(m: ModelArchitecture) -> dict[str, object]:
    return {k: v for k, v in m.model_dump().items() if k not in NOT_SHAPE}


def test_one_fixture_per_supported_model_type() -> None:
    types = {json.loads(p.read_text())["model_type"] for p in FIXTURES.glob("*.json")}
    assert types == set(SUPPORTED_MODEL_TYPES)


@pytest.mark.parametrize(("fixture", "model_id"), sorted(SAME_MODEL.items()))
def test_import_equals_registry_entry(fixture: str, model_id: str) -> None:
    imported = load_hf_config(FIXTURES / fixture)
    entry = REGISTRY[model_id]
    assert _shape(imported) == _shape(entry)
    assert imported.total_params() == entry.total_params()
    assert imported.active_params() == entry.active_params()
    # The registry may extend the context with YaRN (Qwen2); the config holds the native one.
    assert imported.max_position_embeddings == (entry.original_max_position_embeddings or entry.max_position_embeddings)


def test_qwen3_dense_matches_its_model_card() -> None:
    m = load_hf_config(FIXTURES / "qwen3-8b.json")
    assert m.family == "qwen3" and m.qk_norm and m.head_dim == 128
    assert m.total_params() / 1e9 == pytest.approx(8.2, rel=0.01)  # Qwen3-8B card: "8.2B"


def test_gemma2_exact_non_embedding_count_and_alternating_window() -> None:
    m = load_hf_config(FIXTURES / "gemma-2-9b-it.json")
    # Gemma 2 paper (arXiv:2408.00118), Table 2: 9B model, 8,324,201,984 non-embedding parameters.
    assert m.total_params() - m.embedding_params() == 8_324_201_984
    assert m.sliding_window == 4096 and m.sliding_window_layers == 21
    assert m.tie_word_embeddings


def test_deepseek_import_keeps_mla_and_mtp() -> None:
    m = load_hf_config(FIXTURES / "deepseek-v3.json")
    assert m.kv_lora_rank == 512 and m.qk_rope_head_dim == 64 and m.num_nextn_predict_layers == 1
    assert m.router_score_bias


def test_qwen_sliding_window_only_when_enabled() -> None:
    data = json.loads((FIXTURES / "qwen2-7b-instruct.json").read_text())
    assert architecture_from_hf_config(data).sliding_window is None
    data["use_sliding_window"] = True
    assert architecture_from_hf_config(data).sliding_window == 131072


def test_name_from_name_or_path_or_file() -> None:
    assert load_hf_config(FIXTURES / "phi-3-mini-4k-instruct.json").display_name == "Phi-3-mini-4k-instruct"
    assert load_hf_config(FIXTURES / "qwen3-8b.json").id == "qwen3-8b"


def test_unsupported_model_type_names_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gpt2", "n_embd": 768}))
    with pytest.raises(InputError) as exc:
        load_hf_config(path)
    assert str(path) in exc.value.message and "model_type" in exc.value.message and "'gpt2'" in exc.value.message
    assert "llama" in exc.value.message


def test_missing_key_names_file_and_key(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "llama-3.1-8b-instruct.json").read_text())
    del data["intermediate_size"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"config\.json: intermediate_size: missing"):
        load_hf_config(path)


def test_wrong_type_and_bad_json(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "mistral-7b-instruct-v0.3.json").read_text())
    data["hidden_size"] = "4096"
    with pytest.raises(InputError, match="hidden_size: expected a non-negative integer"):
        architecture_from_hf_config(data)
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama",,}')
    with pytest.raises(InputError, match="malformed JSON at line 1, column"):
        load_hf_config(bad)


def test_unsupported_layouts_are_refused() -> None:
    data = json.loads((FIXTURES / "qwen3-30b-a3b.json").read_text())
    data["mlp_only_layers"] = [0]
    with pytest.raises(InputError, match="mlp_only_layers"):
        architecture_from_hf_config(data)
    data = json.loads((FIXTURES / "llama-3.1-8b-instruct.json").read_text())
    data["mlp_bias"] = True
    with pytest.raises(InputError, match="mlp_bias"):
        architecture_from_hf_config(data)


def test_yarn_rope_scaling_in_the_config_extends_the_context() -> None:
    data = json.loads((FIXTURES / "qwen2-7b-instruct.json").read_text())
    # What the Qwen2/2.5 model cards tell users to add for 128K.
    data["rope_scaling"] = {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}
    m = architecture_from_hf_config(data)
    assert m.max_position_embeddings == 131072 and m.yarn_factor is None
    # DeepSeek-V3 ships YaRN already folded into max_position_embeddings (4096 x 40).
    assert load_hf_config(FIXTURES / "deepseek-v3.json").max_position_embeddings == 163840
    # Llama 3.1's llama3 rope type is not YaRN: the config's 131072 stands.
    assert load_hf_config(FIXTURES / "llama-3.1-8b-instruct.json").max_position_embeddings == 131072
