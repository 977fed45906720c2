"""Parameter counts computed from the architecture against published figures (registry integrity)."""

from __future__ import annotations

import pytest

from infragen.architecture import ModelArchitecture
from infragen.catalog.models import load_model_registry

REGISTRY = load_model_registry()
TOLERANCE = 0.01  # issue 2: within 1 % of the published count

#: Entries whose published active count is known to sit outside 1 %, with the reason (see models.yaml notes).
ACTIVE_OUTSIDE_TOLERANCE: dict[str, str] = {
    "qwen3-30b-a3b": "card says 3.3B activated; the architecture gives 3.353B (card figure looks truncated)",
}


def test_registry_covers_issue_list() -> None:
    wanted = {
        "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
        "llama-3.3-70b", "qwen2-1.5b", "qwen2-7b", "qwen2-72b", "qwen2.5-1.5b", "qwen2.5-7b", "qwen2.5-14b",
        "qwen2.5-32b", "qwen2.5-72b", "qwen3-235b-a22b", "qwen3-30b-a3b", "mistral-7b", "mixtral-8x7b",
        "mixtral-8x22b", "phi-3-mini-4k", "phi-4", "gemma-2b", "gemma-7b", "tinyllama-1.1b", "deepseek-v3",
        "deepseek-r1",
    }
    assert wanted <= set(REGISTRY)


@pytest.mark.parametrize("model_id", sorted(REGISTRY))
def test_total_params_within_1pct_of_published(model_id: str) -> None:
    m = REGISTRY[model_id]
    assert m.published_params_b is not None and m.published_params_source
    computed_b = m.total_params() / 1e9
    assert computed_b == pytest.approx(m.published_params_b, rel=TOLERANCE), (computed_b, m.published_params_b)


@pytest.mark.parametrize("model_id", sorted(k for k, m in REGISTRY.items() if m.is_moe))
def test_active_params_within_1pct_of_published(model_id: str) -> None:
    m = REGISTRY[model_id]
    assert m.published_active_params_b is not None
    computed_b = m.active_params(include_embedding=m.published_active_includes_embedding) / 1e9
    if model_id in ACTIVE_OUTSIDE_TOLERANCE:
        # Pinned so a change in the data or the arithmetic is noticed; the 1 % miss is documented.
        assert computed_b == pytest.approx(3.353, abs=0.001)
        assert computed_b == pytest.approx(m.published_active_params_b, rel=0.02)
        return
    assert computed_b == pytest.approx(m.published_active_params_b, rel=TOLERANCE), (computed_b,)


@pytest.mark.parametrize("model_id", sorted(k for k, m in REGISTRY.items() if not m.is_moe))
def test_dense_active_equals_total(model_id: str) -> None:
    m = REGISTRY[model_id]
    assert m.active_params() == m.total_params()


def test_exact_gemma_counts_from_the_gemma_paper() -> None:
    # Gemma paper (arXiv:2403.08295) Table 2, non-embedding parameters.
    assert REGISTRY["gemma-2b"].total_params() - REGISTRY["gemma-2b"].embedding_params() == 1_981_884_416
    assert REGISTRY["gemma-7b"].total_params() - REGISTRY["gemma-7b"].embedding_params() == 7_751_248_896


def test_exact_llama_3_1_8b() -> None:
    # Sum of the safetensors shapes of Llama-3.1-8B: 2 x 128256 x 4096 + 32 layers x 218,112,000 + 4096.
    assert REGISTRY["llama-3.1-8b"].total_params() == 8_030_261_248


def test_deepseek_v3_mtp_excluded_and_documented() -> None:
    m = REGISTRY["deepseek-v3"]
    assert m.num_nextn_predict_layers == 1
    assert m.total_params() / 1e9 == pytest.approx(671.0, rel=0.001)
    # DeepSeek README_WEIGHTS: the MTP module has 11.5B unique parameters; checkpoint = main + MTP ~ 685B.
    assert m.mtp_params() / 1e9 == pytest.approx(11.5, rel=0.01)
    assert (m.total_params() + m.mtp_params() + m.embedding_params() + m.lm_head_params()) / 1e9 == pytest.approx(
        685, rel=0.01
    )


def test_mla_attention_is_mla_and_gqa_kinds() -> None:
    assert REGISTRY["deepseek-v3"].attention_kind == "mla"
    assert REGISTRY["gemma-2b"].attention_kind == "mqa"
    assert REGISTRY["llama-2-7b"].attention_kind == "mha"
    assert REGISTRY["llama-3.1-70b"].attention_kind == "gqa"


def _tiny(**kw: object) -> ModelArchitecture:
    base: dict[str, object] = dict(
        hidden_size=8, num_layers=2, num_attention_heads=2, num_kv_heads=1, intermediate_size=16, vocab_size=10
    )
    base.update(kw)
    return ModelArchitecture.model_validate(base)


def test_tiny_dense_count_by_hand() -> None:
    # embed 80 + head 80 + 2 x (q 64 + o 64 + k 32 + v 32 + mlp 3*8*16=384 + norms 16) + final norm 8
    assert _tiny().total_params() == 80 + 80 + 2 * (64 + 64 + 32 + 32 + 384 + 16) + 8
    assert _tiny(tie_word_embeddings=True).total_params() == _tiny().total_params() - 80
    # q/k/v biases: 8 + 4 + 4 per layer
    assert _tiny(attention_bias=True).total_params() == _tiny().total_params() + 2 * 16
    assert _tiny(mlp_gated=False).total_params() == _tiny().total_params() - 2 * 128


def test_tiny_moe_active_counts_top_k_and_shared() -> None:
    moe = _tiny(num_experts=4, num_experts_per_token=1, moe_intermediate_size=4, num_shared_experts=1)
    expert = 3 * 8 * 4
    router = 8 * 4
    dense = _tiny()
    mlp = 3 * 8 * 16
    assert moe.total_params() == dense.total_params() - 2 * mlp + 2 * (5 * expert + router)
    assert moe.active_params() == dense.total_params() - 2 * mlp + 2 * (2 * expert + router)
    assert moe.active_params(include_embedding=False) == moe.active_params() - 80


def test_first_dense_layers_use_the_dense_mlp() -> None:
    a = _tiny(num_experts=4, num_experts_per_token=1, moe_intermediate_size=4)
    b = _tiny(num_experts=4, num_experts_per_token=1, moe_intermediate_size=4, first_dense_layers=1)
    assert b.total_params() - a.total_params() == 3 * 8 * 16 - (4 * 3 * 8 * 4 + 8 * 4)
