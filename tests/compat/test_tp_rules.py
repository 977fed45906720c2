"""compat.yaml tp_rules: tensor parallelism splits heads, KV heads, vocabulary and MLP/expert widths as vLLM 0.34
requires, and a block-quantized FP8 checkpoint only on block boundaries (vllm#17327), with the reason shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from infragen.architecture import ModelArchitecture
from infragen.catalog import load_catalog
from infragen.catalog.compat import load_compat, shard_widths, tp_check
from infragen.catalog.hf_config import load_hf_config
from infragen.catalog.models import load_model_registry
from infragen.sizing import estimate_memory, hardware_from_gpu
from infragen.sizing.search import search
from infragen.spec import WorkloadSpec
from tests.sizing.conftest import qwen3_235b_fp8_p4de_spec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"
REGISTRY = load_model_registry()


def _acc(gpu_id: str):  # type: ignore[no-untyped-def]
    return load_catalog().accelerator(gpu_id)


def _qwen3_235b_fp8() -> ModelArchitecture:
    """Qwen3-235B-A22B's shape as a block-FP8 checkpoint (its -FP8 repo: weight_block_size [128, 128])."""
    return REGISTRY["qwen3-235b-a22b"].model_copy(update={"weight_block_size": (128, 128), "id": "q235-fp8"})


def test_every_tp_rule_names_a_source_and_a_known_width() -> None:
    rules = load_compat().tp_rules
    widths = shard_widths(REGISTRY["deepseek-v3"])
    assert rules and all(r.source.strip() and r.width in widths for r in rules)
    assert len({r.id for r in rules}) == len(rules)


def test_block_fp8_is_read_from_the_config_and_recorded_in_the_registry() -> None:
    imported = load_hf_config(FIXTURES / "deepseek-v3.json")
    assert imported.weight_block_size == (128, 128) == REGISTRY["deepseek-v3"].weight_block_size
    assert REGISTRY["deepseek-r1"].weight_block_size == (128, 128)
    assert load_hf_config(FIXTURES / "qwen3-30b-a3b.json").weight_block_size is None  # a bf16 checkpoint


def test_expert_shard_of_192_refines_to_64_on_hopper_but_not_on_ampere() -> None:
    model = _qwen3_235b_fp8()  # moe_intermediate_size 1536: 384 at tp 4, 192 at tp 8
    assert tp_check(model, 4, weight_block_size=(128, 128), acc=_acc("a100-80gb")).problem is None
    hopper = tp_check(model, 8, weight_block_size=(128, 128), acc=_acc("h100-sxm-80gb"))
    assert hopper.problem is None
    assert any("refines the scales to 64x64" in n for n in hopper.notes)
    ampere = tp_check(model, 8, weight_block_size=(128, 128), acc=_acc("a100-80gb")).problem
    assert ampere is not None and ampere.startswith("fp8-block-experts: FP8 block 128x128 does not divide 192 at tp 8")
    assert "--enable-expert-parallel" in ampere and "smaller tp" in ampere  # what would serve it instead


def test_expert_shard_without_a_32_wide_common_block_is_refused_everywhere() -> None:
    # 1408 / 8 = 176; gcd(128, 176, 2048) = 16 < 32: no refinement, on any GPU
    model = ModelArchitecture(hidden_size=2048, num_layers=4, num_attention_heads=16, num_kv_heads=16,
                              intermediate_size=12288, vocab_size=102400, num_experts=64, num_experts_per_token=6,
                              moe_intermediate_size=1408, first_dense_layers=1, weight_block_size=(128, 128))
    problem = tp_check(model, 8, weight_block_size=(128, 128), acc=_acc("h100-sxm-80gb")).problem
    assert problem is not None and "gcd here is 16" in problem
    assert tp_check(model, 8, acc=_acc("h100-sxm-80gb")).problem is None  # the same shape in bf16 splits fine


def test_row_parallel_layers_need_whole_blocks() -> None:
    # a dense block-FP8 model whose MLP shard (11008 / 4 = 2752) is not a multiple of 128
    model = ModelArchitecture(hidden_size=4096, num_layers=4, num_attention_heads=32, intermediate_size=11008,
                              vocab_size=32000, weight_block_size=(128, 128))
    assert tp_check(model, 2, weight_block_size=(128, 128)).problem is None  # 5504 = 43 x 128
    problem = tp_check(model, 4, weight_block_size=(128, 128)).problem
    assert problem is not None and problem.startswith("fp8-block-mlp:") and "2752" in problem


@pytest.mark.parametrize(("heads", "kv", "tp", "rule"), [
    (28, 4, 8, "attention-heads"),  # Qwen2-7B's 28 heads do not split over 8 ranks
    (12, 3, 2, "kv-heads"),  # 3 KV heads: neither split over 2 nor replicated
    (12, 3, 4, "kv-heads"),
])
def test_head_rules(heads: int, kv: int, tp: int, rule: str) -> None:
    model = ModelArchitecture(hidden_size=heads * 64, num_layers=2, num_attention_heads=heads, num_kv_heads=kv,
                              intermediate_size=heads * 256, vocab_size=32000)
    problem = tp_check(model, tp).problem
    assert problem is not None and problem.startswith(f"{rule}:")


def test_kv_heads_are_replicated_when_tp_exceeds_them() -> None:
    assert tp_check(REGISTRY["qwen3-235b-a22b"], 8).problem is None  # 4 KV heads, tp 8: two replicas each


def test_estimate_memory_obeys_the_block_rule() -> None:
    model = _qwen3_235b_fp8()
    hw = hardware_from_gpu(_acc("a100-80gb"), 8)
    mem = estimate_memory(model, hw, precision="fp8", tp=8, max_model_len=4096)
    assert not mem.fits and "fp8-block-experts" in (mem.reason or "")


def _spec(**kw: object) -> WorkloadSpec:
    return qwen3_235b_fp8_p4de_spec(**kw)


def test_planner_never_returns_a_tp_the_block_rule_forbids() -> None:
    # 8 x A100-80GB (compute capability 8.0: no refined blocks): tp 8 is refused with the rule, tp 4 is legal
    # (the tp 8 expert-parallel twin is not bound by the rule: tests/sizing/test_expert_parallel.py)
    result = search(_spec(), _qwen3_235b_fp8(), load_catalog())
    by_tp = {c.sizing.layout.tp: c for c in result.candidates if not c.sizing.layout.expert_parallel}
    assert "fp8-block-experts: FP8 block 128x128 does not divide 192 at tp 8" in (by_tp[8].rejected or "")
    assert by_tp[4].rejected is None or "fp8-block" not in by_tp[4].rejected
    assert all(c.sizing.layout.tp != 8 for c in result.feasible if not c.sizing.layout.expert_parallel)


def test_block_fp8_reference_checkpoint_is_never_planned_as_bf16() -> None:
    result = search(_spec(model="deepseek-v3", precision=["bf16"], instance_families={"allow": ["p5"]}),
                    REGISTRY["deepseek-v3"], load_catalog())
    reasons = {c.sizing.layout.tp: c.rejected or "" for c in result.candidates}
    assert not result.feasible and {2, 4, 8} <= set(reasons)
    assert all("holds block-quantized FP8 weights" in reasons[tp] for tp in (2, 4, 8))
