"""traffic.prefix_cache_hit_rate: cached prompt tokens are not prefilled again; KV memory is not credited."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infragen.catalog import load_catalog
from infragen.catalog.models import load_model_registry
from infragen.errors import InputError
from infragen.sizing import plan_workload
from infragen.sizing.estimate import cached_prompt_tokens, estimate
from infragen.sizing.hardware import hardware_from_gpu
from infragen.sizing.types import Hardware
from infragen.spec import WorkloadSpec
from tests.sizing.conftest import LLAMA3_8B, gpu
from tests.spec.conftest import run_cli

ONE_H100 = hardware_from_gpu(gpu(), 1)


def _est(h: float | None, conc: int | None = None, hw: Hardware = ONE_H100, **kw: object):
    extra = {} if h is None else {"prefix_cache_hit_rate": h}
    return estimate(LLAMA3_8B, hw, precision="bf16", input_len=2048, output_len=256, concurrency=conc,
                    **extra, **kw)  # type: ignore[arg-type]


def test_a_hit_rate_of_zero_gives_todays_numbers_exactly() -> None:
    for conc in (1, 16, None):
        assert _est(0.0, conc) == _est(None, conc)


def test_half_the_prompt_cached_cuts_ttft_and_raises_capacity_but_not_memory() -> None:
    cold, warm = _est(0.0), _est(0.5)
    assert warm.ttft_ms < 0.7 * cold.ttft_ms
    assert warm.requests_per_s > 1.1 * cold.requests_per_s  # less prefill mixed into every decode step
    assert warm.tpot_ms < cold.tpot_ms
    # KV memory is not credited: the same sequences fit.
    assert (warm.max_concurrency, warm.kv_cache_capacity_tokens) == (cold.max_concurrency,
                                                                     cold.kv_cache_capacity_tokens)
    assert any("1,024 of 2,048 prompt tokens taken as cached" in n for n in warm.notes)
    # At batch 1 TTFT is the prefill of the uncached half, attending the cached half as well: more than half of
    # the cold prefill (attention over the whole prompt), far less than all of it.
    one_cold, one_warm = _est(0.0, 1), _est(0.5, 1)
    assert 0.5 * one_cold.ttft_ms < one_warm.ttft_ms < 0.8 * one_cold.ttft_ms


@settings(max_examples=60, deadline=None)
@given(prompt=st.integers(1, 100_000), hit=st.floats(0.0, 1.0))
def test_cached_tokens_are_whole_blocks_before_the_last_prompt_token(prompt: int, hit: float) -> None:
    cached = cached_prompt_tokens(prompt, hit, 16)
    assert cached % 16 == 0 and 0 <= cached <= hit * prompt and cached <= prompt - 1


def test_cached_token_examples() -> None:
    assert cached_prompt_tokens(1024, 0.5, 16) == 512
    assert cached_prompt_tokens(1000, 0.5, 16) == 496
    assert cached_prompt_tokens(1024, 1.0, 16) == 1008  # the last block holds the last token: computed again
    assert cached_prompt_tokens(10, 1.0, 16) == 0


@settings(max_examples=25, deadline=None)
@given(h=st.floats(0.0, 0.95), conc=st.sampled_from([1, 8, 64]))
def test_more_hits_never_slow_anything(h: float, conc: int) -> None:
    lo, hi = _est(h, conc), _est(min(1.0, h + 0.05), conc)
    assert hi.ttft_ms <= lo.ttft_ms + 1e-9 and hi.tpot_ms <= lo.tpot_ms + 1e-9


def test_llama_cpp_does_not_credit_it(cpu_host: Hardware) -> None:
    kw = {"precision": "q4_k_m", "engine": "llama.cpp", "input_len": 512, "output_len": 64, "concurrency": 2}
    cold = estimate(LLAMA3_8B, cpu_host, **kw)  # type: ignore[arg-type]
    warm = estimate(LLAMA3_8B, cpu_host, prefix_cache_hit_rate=0.5, **kw)  # type: ignore[arg-type]
    assert warm.ttft_ms == cold.ttft_ms and any("not credited for llama.cpp" in n for n in warm.notes)


def test_a_hit_rate_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(InputError, match="share of prompt tokens"):
        _est(1.5)


def _plan(h: float | None):
    traffic: dict[str, object] = {"peak_requests_per_s": 20, "prompt_tokens": 2048, "output_tokens": 256}
    if h is not None:
        traffic["prefix_cache_hit_rate"] = h
    spec = WorkloadSpec.model_validate({
        "model": "llama-3.1-8b", "cloud": "aws", "regions": ["us-east-1"], "traffic": traffic,
        "slo": {"ttft_p99_ms": 1000, "tpot_ms": 50}, "instance_families": {"allow": ["g6e"]}})
    return plan_workload(spec, catalog=load_catalog(), model=load_model_registry()["llama-3.1-8b"],
                         workload_name="cached")


def test_the_plan_credits_the_cache_and_only_then_passes_the_flag() -> None:
    cold, none, warm = _plan(0.0), _plan(None), _plan(0.5)
    assert cold.digest == none.digest
    assert "--enable-prefix-caching" not in cold.engine.argv  # vLLM 0.34 enables it anyway for decoder models
    assert "--enable-prefix-caching" in warm.engine.argv
    assert warm.estimate.capacity_requests_per_s > cold.estimate.capacity_requests_per_s
    assert warm.cost.usd_per_month <= cold.cost.usd_per_month
    assert any("prefill computes 1,024 of 2,048 prompt tokens" in x for x in warm.explanation)
    assert warm.memory == cold.memory  # no KV credit


def test_the_workload_field_and_the_estimate_option_are_checked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "w.yaml"
    path.write_text("model: qwen2-7b\ntraffic:\n  peak_requests_per_s: 5\n  prefix_cache_hit_rate: 1.5\n")
    r = run_cli("validate", str(path))
    assert r.code == 2 and "traffic.prefix_cache_hit_rate: Input should be less than or equal to 1" in r.err
    base = ["estimate", "--model", "llama-3.1-8b", "--precision", "bf16", "--instance", "g6e.xlarge",
            "--input-len", "2048", "--output-len", "256", "--concurrency", "8", "--format", "json"]
    bad = run_cli(*base, "--prefix-cache-hit-rate", "2")
    assert bad.code == 2 and "--prefix-cache-hit-rate is a share of prompt tokens from 0 to 1" in bad.err
    rate = run_cli(*base[:-4], "--rate", "2", "--prefix-cache-hit-rate", "0.5")
    assert rate.code == 2 and "--prefix-cache-hit-rate goes with --concurrency" in rate.err
    cold = json.loads(run_cli(*base).out)
    warm = json.loads(run_cli(*base, "--prefix-cache-hit-rate", "0.5").out)
    assert warm["latency"]["ttft_ms"] < cold["latency"]["ttft_ms"]
