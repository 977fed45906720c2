"""TTFT's serving path: a client waits for HTTP, tokenisation and the first streamed chunk beyond the engine's steps
(performance.yaml engines.vllm.first_token_overhead_ms, measured in vLLM PR #54628). It is a fixed delay added to
TTFT only: no step carries it, so TPOT, throughput, the running batch and capacity must not move."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from infragen.sizing import constants
from infragen.sizing.constants import EngineConstants, load_constants
from infragen.sizing.estimate import estimate
from infragen.sizing.hardware import hardware_from_gpu
from infragen.sizing.load_estimate import LoadModel, prepare_load
from infragen.sizing.memory import vllm_memory
from infragen.sizing.performance import gpu_setup
from infragen.sizing.types import Estimate
from tests.sizing.conftest import LLAMA3_8B, gpu


@pytest.fixture
def without_serving_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The file's constants with the vllm engine's first-token overhead at 0 (cached layouts dropped)."""
    c = load_constants()
    engines = dict(c.engines)
    engines["vllm"] = engines["vllm"].model_copy(update={"first_token_overhead_ms": 0.0})
    monkeypatch.setattr(constants, "OVERRIDE", [c.model_copy(update={"engines": engines})])
    gpu_setup.cache_clear()
    vllm_memory.cache_clear()
    yield
    gpu_setup.cache_clear()
    vllm_memory.cache_clear()


def _estimate(conc: int, **kw: float) -> Estimate:
    return estimate(LLAMA3_8B, hardware_from_gpu(gpu(), 1), precision="bf16", input_len=401,
                    output_len=256, concurrency=conc, **kw)


def test_the_vllm_profile_has_a_sourced_first_token_overhead() -> None:
    e = load_constants().engines["vllm"]
    assert e.first_token_overhead_ms > 0 and "54628" in e.first_token_source
    assert load_constants().engines["tensorrt-llm"].first_token_overhead_ms == 0  # trtllm-bench measures in-process


@pytest.mark.parametrize("conc", [1, 32])
def test_ttft_gains_exactly_the_overhead_and_nothing_else_moves(conc: int, without_serving_path: None) -> None:
    bare = _estimate(conc)
    constants.OVERRIDE.clear()
    gpu_setup.cache_clear()
    served = _estimate(conc)
    extra = load_constants().engines["vllm"].first_token_overhead_ms
    assert served.ttft_ms == pytest.approx(bare.ttft_ms + extra, rel=1e-12)
    assert (served.tpot_ms, served.output_tokens_per_s) == (bare.tpot_ms, bare.output_tokens_per_s)
    assert served.e2e_ms == pytest.approx(bare.e2e_ms + extra, rel=1e-12)


def test_calibration_factors_do_not_scale_the_serving_path() -> None:
    """A measured prefill/decode factor speeds up GPU time; the serving path is not GPU time."""
    extra = load_constants().engines["vllm"].first_token_overhead_ms
    base, fast = _estimate(1), _estimate(1, prefill_factor=2.0, decode_factor=2.0)
    assert fast.ttft_ms - extra == pytest.approx((base.ttft_ms - extra) / 2.0, rel=1e-9)


def test_open_loop_ttft_shifts_by_the_overhead_and_the_batch_does_not(without_serving_path: None) -> None:
    def load() -> LoadModel:
        a100 = gpu(bandwidth=2039.0, tflops=312.0, fp8=None, arch="Ampere")
        m = prepare_load(LLAMA3_8B, hardware_from_gpu(a100, 1), precision="bf16", input_len=1024, output_len=256)
        assert isinstance(m, LoadModel)
        return m

    bare = load()
    constants.OVERRIDE.clear()
    gpu_setup.cache_clear()
    served = load()
    extra = load_constants().engines["vllm"].first_token_overhead_ms * 1e-3
    assert served.first_token_s == pytest.approx(extra) and bare.first_token_s == 0.0
    a, b = bare.at(3.0), served.at(3.0)
    assert (b.running_batch, b.tpot_s, b.slot_utilisation) == (a.running_batch, a.tpot_s, a.slot_utilisation)
    assert b.ttft_mean_s == pytest.approx(a.ttft_mean_s + extra, rel=1e-12)
    for q in ("ttft_p50_s", "ttft_p99_s"):
        assert getattr(b, q) == pytest.approx(getattr(a, q) + extra, rel=2e-3), q
    assert b.ttft_cdf(a.ttft_p99_s + extra) == pytest.approx(a.ttft_cdf(a.ttft_p99_s), abs=1e-12)
    assert bare.capacity_per_s() == served.capacity_per_s()


def test_an_overhead_needs_its_source() -> None:
    fields = load_constants().engines["vllm"].model_dump()
    fields.update(first_token_overhead_ms=5.0, first_token_source="")
    with pytest.raises(ValidationError, match="first_token_source"):
        EngineConstants.model_validate(fields)
