"""Calibration spot checks against published measurements (row ids of benchmarks/data/*.csv, with tolerances).

These use the packaged constants (performance.yaml) and inline hardware figures as printed in the catalog's
sources; the full table is `python benchmarks/accuracy.py`.
"""

from __future__ import annotations

import math

import pytest

from infragen.architecture import ModelArchitecture
from infragen.catalog.records import CpuModel
from infragen.sizing.cpu_performance import cpu_setup, generation_step_s
from infragen.sizing.memory import gguf_weight_bytes, param_groups, vllm_memory, weight_bytes_per_gpu
from infragen.sizing.performance import gpu_figures, gpu_setup, simulate_drain, steady_state
from infragen.units import GIB
from tests.sizing.conftest import gpu

LLAMA31_8B = ModelArchitecture(
    id="llama-3.1-8b", hidden_size=4096, num_layers=32, num_attention_heads=32, num_kv_heads=8,
    intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072,
)
LLAMA31_70B = LLAMA31_8B.model_copy(update=dict(id="llama-3.1-70b", hidden_size=8192, num_layers=80,
                                                num_attention_heads=64, intermediate_size=28672))
LLAMA31_405B = LLAMA31_8B.model_copy(update=dict(id="llama-3.1-405b", hidden_size=16384, num_layers=126,
                                                 num_attention_heads=128, intermediate_size=53248))
# H100 SXM 80GB figures as in the catalog (stas00/ml-engineering table: 3350 GB/s, 989/1979 dense TFLOPS).
H100 = gpu(memory_gib=80.0, bandwidth=3350.0, tflops=989.0, fp8=1979.0)


def test_ho0728_405b_fp8_tp8_weights_per_gpu() -> None:
    # vLLM issue #6746: 'Loading model weights took 57.7520 GB' per TP8 worker (Meta FP8: MLP weights only). 5 %.
    gib = weight_bytes_per_gpu(LLAMA31_405B, "fp8", 8, 1, "mlp") / GIB
    assert gib == pytest.approx(57.752, rel=0.05)


def test_ex0001_70b_int8_weights() -> None:
    # vLLM PR #12569 log: 'Loading model weights took 67.7229 GB' for the 70B w8a8 checkpoint at TP1. 1 %.
    assert weight_bytes_per_gpu(LLAMA31_70B, "int8", 1, 1) / GIB == pytest.approx(67.7229, rel=0.01)


def test_ex0002_70b_int8_kv_blocks() -> None:
    # Same log: '# GPU blocks: 1381' at gpu_memory_utilization 0.98 on an unnamed 80 GB GPU, evaluated as an
    # H100 as its driver reports it (81559 MiB, modal-labs/modal-client PR #2797). 10 % (the KV target).
    blocks = vllm_memory(LLAMA31_70B, 81559 / 1024, "int8", "bf16", 1, 1, 0.98).num_blocks
    assert blocks == pytest.approx(1381, rel=0.10)


def test_ho0002_trtllm_8b_bf16_h100_saturation() -> None:
    # TensorRT-LLM v0.15 perf-overview: Llama-3.1-8B BF16, 1 x H100, 128/128, 16116.63 output tok/s. 25 %.
    mem = vllm_memory(LLAMA31_8B, 80.0, "bf16", "bf16", 1, 1, 1.0)
    capacity = int(0.9 * mem.kv_budget_bytes / mem.kv_bytes_per_token_gpu)
    setup = gpu_setup(LLAMA31_8B, gpu_figures(H100), "bf16", mem.kv_bytes_per_token_gpu, "tensorrt-llm", 1, 1, 1)
    batch = min(2048, capacity // 256)
    assert steady_state(setup, 128, 128, batch).output_tokens_per_s == pytest.approx(16116.63, rel=0.25)


def test_ho0644_vllm_8b_fp8_h100_sharegpt() -> None:
    # LambdaLabs vllm-benchmark (vLLM 0.5.4): Llama-3.1-8B-FP8, 1 x H100 SXM, ShareGPT 320 prompts at rate inf,
    # 3400.4 output tok/s. ShareGPT assumed as input 220 and exponential outputs of mean 200. 25 %.
    n = 320
    outs = [max(1, min(1828, round(-200 * math.log(1 - (i + 0.5) / n)))) for i in range(n)]
    mem = vllm_memory(LLAMA31_8B, 80.0, "fp8", "bf16", 1, 1, 0.9, profile_tokens=2048, count_cuda_graphs=False)
    setup = gpu_setup(LLAMA31_8B, gpu_figures(H100), "fp8", mem.kv_bytes_per_token_gpu, "vllm-0.5", 1, 1, 1)
    result = simulate_drain(setup, [220] * n, outs, 256, mem.capacity_tokens)
    assert result.output_tokens_per_s == pytest.approx(3400.4, rel=0.25)


def test_ho0538_llama_cpp_q4_0_generation_on_ryzen_7950x() -> None:
    # ik_llama.cpp PR #54: mainline llama.cpp tg128, Llama-3.1-8B Q4_0, Ryzen 9 7950X, 4 threads: 11.25 tok/s. 25 %.
    cpu = CpuModel(id="ryzen-9-7950x", display_name="Ryzen 9 7950X", vendor="amd", arch="x86_64",
                   microarchitecture="Zen 4", source="benchmarks/data/calibration_hardware.yaml",
                   fp32_flops_per_cycle_per_core=32, sustained_clock_ghz=4.5, memory_bandwidth_gb_per_s=83.2,
                   cores_per_socket=16)
    s = cpu_setup(cpu, 16, threads=4)
    tokens_per_s = 1.0 / generation_step_s(s, gguf_weight_bytes(LLAMA31_8B, "q4_0"),
                                           float(param_groups(LLAMA31_8B).active()), 0.0, 1)
    assert tokens_per_s == pytest.approx(11.25, rel=0.25)
