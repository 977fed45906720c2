"""Tiny inline models and hardware for the sizing tests (a data change never breaks them)."""

from __future__ import annotations

import pytest

from infragen.architecture import ModelArchitecture
from infragen.catalog.records import Accelerator, CpuModel
from infragen.sizing.hardware import hardware_from_gpu
from infragen.sizing.types import Hardware
from infragen.spec import WorkloadSpec

# Shapes from the models' Hugging Face config.json files.
LLAMA3_8B = ModelArchitecture(
    id="llama-3-8b", hidden_size=4096, num_layers=32, num_attention_heads=32, num_kv_heads=8,
    intermediate_size=14336, vocab_size=128256, max_position_embeddings=8192,
)
LLAMA3_70B = ModelArchitecture(
    id="llama-3-70b", hidden_size=8192, num_layers=80, num_attention_heads=64, num_kv_heads=8,
    intermediate_size=28672, vocab_size=128256, max_position_embeddings=8192,
)
# DeepSeek-V2-Lite: MLA with kv_lora_rank 512, qk_rope_head_dim 64, 27 layers.
DEEPSEEK_V2_LITE = ModelArchitecture(
    id="deepseek-v2-lite", family="deepseek_v2", hidden_size=2048, num_layers=27, num_attention_heads=16,
    num_kv_heads=16, intermediate_size=10944, vocab_size=102400, max_position_embeddings=163840,
    kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
    num_experts=64, num_experts_per_token=6, moe_intermediate_size=1408, num_shared_experts=2, first_dense_layers=1,
)
MIXTRAL = ModelArchitecture(
    id="mixtral-8x7b", hidden_size=4096, num_layers=32, num_attention_heads=32, num_kv_heads=8,
    intermediate_size=14336, vocab_size=32000, max_position_embeddings=32768, num_experts=8, num_experts_per_token=2,
)
GEMMA2_LIKE = ModelArchitecture(
    id="swa-half", hidden_size=3584, num_layers=42, num_attention_heads=16, num_kv_heads=8, head_dim=256,
    intermediate_size=14336, vocab_size=256000, max_position_embeddings=8192, sliding_window=4096,
    sliding_window_layers=21,
)


def gpu(
    *, memory_gib: float = 80.0, bandwidth: float = 3350.0, tflops: float = 989.0, fp8: float | None = 1979.0,
    arch: str = "Hopper", link: str = "nvlink", cc: str | None = None,
) -> Accelerator:
    return Accelerator(
        id=f"test-gpu-{memory_gib:g}-{bandwidth:g}", display_name="Test GPU", vendor="nvidia", architecture=arch,
        memory_gib=memory_gib, memory_bandwidth_gb_per_s=bandwidth, fp16_tflops=tflops, bf16_tflops=tflops,
        fp8_tflops=fp8, interconnect=link, interconnect_gb_per_s=900.0 if link == "nvlink" else 64.0,
        source="inline test record", compute_capability=cc or _CC[arch],
    )


#: compute capability of the inline records' architectures (developer.nvidia.com/cuda-gpus)
_CC = {"Volta": "7.0", "Turing": "7.5", "Ampere": "8.0", "Ada": "8.9", "Hopper": "9.0"}


@pytest.fixture
def h100x8() -> Hardware:
    return hardware_from_gpu(gpu(), 8)


@pytest.fixture
def cpu_host() -> Hardware:
    cpu = CpuModel(
        id="test-cpu", display_name="Test CPU", vendor="intel", arch="x86_64", microarchitecture="test",
        simd=["avx512"], fp32_flops_per_cycle_per_core=64, sustained_clock_ghz=3.0, memory_channels=8,
        memory_bandwidth_gb_per_s=300.0, cores_per_socket=48, threads_per_core=2, source="inline test record",
    )
    return Hardware(
        name="test-cpu-host", accelerator=None, gpu_count=0, gpu_memory_gib=None, cpu=cpu, vcpus=32,
        memory_gib=64.0, network_gbps=10.0, rdma="none",
    )


def qwen3_235b_fp8_p4de_spec(**kw: object) -> WorkloadSpec:
    """The block-FP8 Qwen3-235B workload on 8 x A100 (p4de) where plain tp 8 is refused by the fp8-block-experts
    rule (tests/compat/test_tp_rules.py) and its expert-parallel twin is planned
    (tests/sizing/test_expert_parallel.py)."""
    data: dict[str, object] = {
        "model": "qwen3-235b-a22b", "precision": ["fp8"],
        "traffic": {"concurrent_users": 8, "prompt_tokens": 1024, "output_tokens": 256},
        "slo": {"tpot_ms": 200, "ttft_p99_ms": 20000}, "cloud": "aws", "regions": ["us-east-1"],
        "instance_families": {"allow": ["p4de"]}}
    data.update(kw)
    return WorkloadSpec.model_validate(data)


def llama_bench_rate(model: ModelArchitecture, hw: Hardware, precision: str, test: str) -> float:
    """What `estimate --hardware` says a llama-bench test (`tgN` / `ppN`) of one request runs at, tokens/s:
    tg = 1 / TPOT of a 1-token prompt, pp = the prompt's tokens / TTFT."""
    from infragen.sizing.estimate import estimate

    n = int(test[2:])
    if test.startswith("tg"):
        est = estimate(model, hw, precision=precision, engine="llama.cpp", input_len=1, output_len=n, concurrency=1)
        return 1e3 / est.tpot_ms
    est = estimate(model, hw, precision=precision, engine="llama.cpp", input_len=n, output_len=1, concurrency=1)
    return n / (est.ttft_ms / 1e3)
