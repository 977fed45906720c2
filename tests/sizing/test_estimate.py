"""estimate(): fits/does-not-fit answers, `max` concurrency, caps, regimes, engines, hardware files, speed."""

from __future__ import annotations

from pathlib import Path

import pytest

from infragen.catalog import catalog_from_records
from infragen.errors import InputError
from infragen.sizing.estimate import estimate, estimate_memory
from infragen.sizing.hardware import hardware_from_gpu, load_hardware_file
from infragen.sizing.types import Hardware
from tests.sizing.conftest import DEEPSEEK_V2_LITE, LLAMA3_8B, LLAMA3_70B, MIXTRAL, gpu


def test_max_concurrency_is_kv_or_max_num_seqs_limited(h100x8: Hardware) -> None:
    long = estimate(LLAMA3_70B, h100x8, precision="bf16", tp=2, input_len=4000, output_len=4000, concurrency=None)
    assert long.fits
    assert long.concurrency == long.max_concurrency
    assert long.max_concurrency == long.kv_cache_capacity_tokens // 8000 < 256
    short = estimate(LLAMA3_8B, h100x8, precision="bf16", tp=1, input_len=100, output_len=100, concurrency=None)
    assert short.max_concurrency == 256  # vLLM's default max-num-seqs


def test_concurrency_above_the_limit_is_capped_with_a_note(h100x8: Hardware) -> None:
    est = estimate(LLAMA3_70B, h100x8, precision="bf16", tp=2, input_len=4000, output_len=4000, concurrency=10_000)
    assert est.concurrency == est.max_concurrency
    assert any("queues" in n for n in est.notes)


def test_does_not_fit_is_an_answer_not_an_error() -> None:
    est = estimate(LLAMA3_70B, hardware_from_gpu(gpu(memory_gib=24.0), 2), precision="bf16", tp=2,
                   input_len=100, output_len=100, concurrency=1)
    assert not est.fits and est.reason and "131.4 GiB" in est.reason
    assert est.output_tokens_per_s == 0.0


def test_request_longer_than_context_does_not_fit(h100x8: Hardware) -> None:
    est = estimate(LLAMA3_8B, h100x8, precision="bf16", input_len=8000, output_len=1000, concurrency=1)
    assert not est.fits and "max_model_len 8192" in (est.reason or "")


def test_tensor_parallel_speeds_up_a_memory_bound_decode(h100x8: Hardware) -> None:
    one = estimate(LLAMA3_70B, h100x8, precision="fp8", tp=1, input_len=500, output_len=200, concurrency=1)
    four = estimate(LLAMA3_70B, h100x8, precision="fp8", tp=4, input_len=500, output_len=200, concurrency=1)
    assert one.regime == "gpu-decode-memory-bound"
    assert four.tpot_ms < one.tpot_ms / 2


def test_fp8_prefill_is_faster_only_on_gpus_with_fp8() -> None:
    hopper = hardware_from_gpu(gpu(), 1)
    ampere = hardware_from_gpu(gpu(arch="Ampere", fp8=None), 1)
    kw = dict(input_len=4000, output_len=10, concurrency=1)
    assert estimate(LLAMA3_8B, hopper, precision="fp8", **kw).ttft_ms < estimate(
        LLAMA3_8B, hopper, precision="bf16", **kw).ttft_ms * 0.8
    # weight-only fp8 on Ampere: 16-bit tensor math for prefill (Marlin, priced by the fitted roofline; bf16 by the
    # measured cuBLAS kernel), so no faster than bf16; fewer bytes for decode
    a8 = estimate(LLAMA3_8B, ampere, precision="fp8", **kw)
    a16 = estimate(LLAMA3_8B, ampere, precision="bf16", **kw)
    assert a8.ttft_ms >= a16.ttft_ms
    decode = dict(input_len=100, output_len=500, concurrency=1)
    assert estimate(LLAMA3_8B, ampere, precision="fp8", **decode).tpot_ms < estimate(
        LLAMA3_8B, ampere, precision="bf16", **decode).tpot_ms * 0.85


def test_moe_and_mla_models_estimate(h100x8: Hardware) -> None:
    for model in (MIXTRAL, DEEPSEEK_V2_LITE):
        est = estimate(model, h100x8, precision="bf16", tp=2, input_len=1000, output_len=200, concurrency=8)
        assert est.fits and est.tpot_ms > 0 and est.output_tokens_per_s > 0


def test_uncertainty_is_positive_and_from_the_regime(h100x8: Hardware) -> None:
    est = estimate(LLAMA3_8B, h100x8, precision="bf16", input_len=100, output_len=100, concurrency=1)
    assert 0 < est.relative_uncertainty < 1


def test_llama_cpp_on_a_cpu(cpu_host: Hardware) -> None:
    est = estimate(LLAMA3_8B, cpu_host, precision="q4_k_m", engine="llama.cpp", input_len=500, output_len=200,
                   concurrency=1)
    assert est.fits and est.regime in ("cpu-generation", "cpu-prompt")
    # generation is bandwidth bound: 16 threads x per-thread limit or 70 % of 300 GB/s over ~4.9 GB of weights
    assert 5 < est.output_tokens_per_s < 60
    with pytest.raises(InputError):
        estimate(LLAMA3_8B, cpu_host, precision="bf16", engine="vllm", input_len=5, output_len=5, concurrency=1)


def test_llama_cpp_weights_must_fit_in_ram(cpu_host: Hardware) -> None:
    est = estimate(LLAMA3_70B, cpu_host, precision="q8_0", engine="llama.cpp", input_len=5, output_len=5,
                   concurrency=1)
    assert not est.fits and "RAM" in (est.reason or "")


def test_hardware_file_round_trip(tmp_path: Path) -> None:
    acc = gpu()
    catalog = catalog_from_records([acc], [], [])
    path = tmp_path / "box.yaml"
    path.write_text(f"name: lab-box\ngpu: {acc.id}\ngpu_count: 4\nmemory_gib: 512\n")
    hw = load_hardware_file(path, catalog)
    assert hw.gpu_count == 4 and hw.accelerator == acc and hw.name == "lab-box"
    path.write_text("gpu_count: -1\nwat: 1\n")
    with pytest.raises(InputError, match="gpu_count"):
        load_hardware_file(path, catalog)


@pytest.mark.parametrize("text, field", [
    ("memory_gib: .inf\n", "memory_gib"),  # was accepted: the llama.cpp KV budget became NaN (exit 70)
    ("memory_gib: 1.0e+300\n", "memory_gib"),
    ("vcpus: 4\nmeasured: {memory_bandwidth_gb_per_s: .nan}\n", "measured.memory_bandwidth_gb_per_s"),
    ("vcpus: 1000000000\n", "vcpus"),
    ("cpu: {id: x, display_name: x, vendor: amd, arch: x86_64, microarchitecture: x, source: s, "
     "sustained_clock_ghz: .inf}\n", "sustained_clock_ghz"),
])
def test_a_hardware_file_with_a_non_finite_or_absurd_figure_is_refused(tmp_path: Path, text: str,
                                                                       field: str) -> None:
    path = tmp_path / "box.yaml"
    path.write_text("name: box\n" + text)
    with pytest.raises(InputError, match=field.replace(".", r"\.")):
        load_hardware_file(path, catalog_from_records([gpu()], [], []))


def test_missing_figures_raise_instead_of_guessing(cpu_host: Hardware) -> None:
    from infragen.catalog.records import CpuModel
    from infragen.errors import MissingFigureError

    bare = CpuModel(id="bare", display_name="bare", vendor="intel", arch="x86_64", microarchitecture="x",
                    source="inline test record")
    host = Hardware(name="h", accelerator=None, gpu_count=0, gpu_memory_gib=None, cpu=bare, vcpus=8,
                    memory_gib=64.0, network_gbps=None)
    with pytest.raises(MissingFigureError, match="memory_bandwidth_gb_per_s"):
        estimate(LLAMA3_8B, host, precision="q4_0", engine="llama.cpp", input_len=5, output_len=5, concurrency=1)
    no_bw = gpu().model_copy(update={"memory_bandwidth_gb_per_s": None})
    hw = hardware_from_gpu(no_bw, 1)
    assert estimate_memory(LLAMA3_8B, hw, precision="bf16").fits  # memory needs no bandwidth
    with pytest.raises(MissingFigureError, match="bandwidth"):
        estimate(LLAMA3_8B, hw, precision="bf16", input_len=5, output_len=5, concurrency=1)


def test_pipeline_across_nodes_is_slower_per_token_than_tp_inside_one(h100x8: Hardware) -> None:
    tp8 = estimate(LLAMA3_70B, h100x8, precision="bf16", tp=8, input_len=500, output_len=100, concurrency=8)
    pp2 = estimate(LLAMA3_70B, h100x8, precision="bf16", tp=8, pp=2, nodes=2, input_len=500, output_len=100,
                   concurrency=8)
    assert pp2.fits and pp2.regime == "gpu-multi-node"
    assert pp2.weights_gib_per_gpu < tp8.weights_gib_per_gpu
    assert pp2.tpot_ms > tp8.tpot_ms / 2  # no free lunch: stages run in series for one token
    with pytest.raises(InputError):
        estimate(LLAMA3_70B, h100x8, precision="bf16", tp=16, nodes=2, input_len=5, output_len=5, concurrency=1)
