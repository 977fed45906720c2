"""A MoE layer's router, small kernels and MLA bmms are priced from their H200 timing (engines.vllm.moe_layer_ops,
benchmarks/data/layer_ops_h200): per MoE layer the router GEMM plus a launch-bound floor per small kernel, the two
add-norms' bytes per token, and MLA's absorbed bmms per layer; dense models and engines without a timing keep
their step unchanged."""

from __future__ import annotations

import pytest

from benchmarks.moe_layer_ops_fit import derive
from infragen.catalog import load_catalog
from infragen.catalog.models import load_model_registry
from infragen.sizing.constants import load_constants
from infragen.sizing.performance import gpu_figures, gpu_setup, stage_step_s


def _ops():  # type: ignore[no-untyped-def]
    ops = load_constants().engines["vllm"].moe_layer_ops
    assert ops is not None
    return ops


def test_the_constants_are_the_medians_of_the_timing() -> None:
    d, ops = derive(), _ops()
    assert ops.router_us == pytest.approx(d["router_us"], abs=0.01)
    assert ops.kernel_us == pytest.approx(d["kernel_us"], abs=0.01)
    assert ops.norm_bandwidth_fraction == pytest.approx(d["norm_bandwidth_fraction"], abs=0.001)
    assert ops.mla_absorb_bmm_us == pytest.approx(d["mla_absorb_bmm_us"], abs=0.01)
    assert ops.kernels_per_layer == d["kernels_per_layer"]
    assert d["n_router"] >= 20 and d["n_kernel"] >= 12 and d["n_norm"] >= 4
    # launch-bound floors: a few microseconds each, not bytes
    assert 1.0 < ops.kernel_us < 4.0 and 4.0 < ops.router_us < 12.0


def test_only_the_measured_engine_prices_them() -> None:
    engines = load_constants().engines
    assert engines["vllm"].moe_layer_ops is not None
    assert engines["vllm-0.5"].moe_layer_ops is None and engines["tensorrt-llm"].moe_layer_ops is None


@pytest.mark.parametrize(("model", "precision", "gpu", "tp", "mla"), [
    ("deepseek-r1", "fp8", "h200-141gb", 8, True), ("qwen3-235b-a22b", "bf16", "H100", 8, False)])
def test_a_moe_step_adds_the_layer_ops(model: str, precision: str, gpu: str, tp: int, mla: bool) -> None:
    arch = load_model_registry()[model]
    s = gpu_setup(arch, gpu_figures(load_catalog().accelerator(gpu)), precision, 65536.0, "vllm", tp, 1, 1)
    bare = s.__class__(**{**s.__dict__, "moe_layer_ops_fixed_s": 0.0, "moe_layer_ops_s_per_token": 0.0})
    ops = _ops()
    # the router is one of the GEMMs engines.vllm.linear_kernel prices where it prices the linears (bf16 here);
    # block-fp8 DeepSeek-R1's linears keep the roofline and block floor, so its router is priced here
    assert s.linears_measured == (not mla)
    router = 0.0 if s.linears_measured else ops.router_us
    fixed = s.moe_layers_stage * (router + ops.kernels_per_layer * ops.kernel_us) * 1e-6
    if mla:
        fixed += s.num_layers * ops.mla_absorb_bmm_us * 1e-6
    per_token = s.moe_layers_stage * 16 * arch.hidden_size / (s.bandwidth_bytes_per_s * ops.norm_bandwidth_fraction)
    assert s.moe_layer_ops_fixed_s == pytest.approx(fixed)
    assert s.moe_layer_ops_s_per_token == pytest.approx(per_token)
    for tokens in (1.0, 8.0, 537.0, 3524.0):
        added = stage_step_s(s, tokens, 0.0, 0.0, 0.0) - stage_step_s(bare, tokens, 0.0, 0.0, 0.0)
        assert added == pytest.approx(fixed + tokens * per_token)
    # DeepSeek-R1 tp8 at EX0035's 8 tokens: ~30 us a layer (router 7, eight kernels 17 on 58 of 61 layers, bmms 7);
    # Qwen3-235B: the eight kernels, 16.6 us
    assert fixed / s.num_layers * 1e6 == pytest.approx(29.8 if mla else 16.6, abs=1.0)


def test_dense_models_and_unmeasured_engines_get_none() -> None:
    from tests.sizing.conftest import LLAMA3_8B

    h100 = gpu_figures(load_catalog().accelerator("H100"))
    dense = gpu_setup(LLAMA3_8B, h100, "bf16", 131072.0, "vllm", 1, 1, 1)
    assert dense.moe_layer_ops_fixed_s == 0.0 and dense.moe_layer_ops_s_per_token == 0.0
    moe = gpu_setup(load_model_registry()["qwen3-235b-a22b"], h100, "bf16", 65536.0, "vllm-0.5", 8, 1, 1)
    assert moe.moe_layer_ops_fixed_s == 0.0 and moe.moe_layer_ops_s_per_token == 0.0
