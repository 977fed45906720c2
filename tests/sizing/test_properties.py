"""Monotonicity of the model (hypothesis): more context, concurrency or output never needs less memory or time;
more bandwidth never slows decode; MoE reads more experts as the batch grows."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from infragen.sizing.estimate import estimate
from infragen.sizing.hardware import hardware_from_gpu
from infragen.sizing.memory import max_sequences
from infragen.sizing.performance import expert_read_fraction
from tests.sizing.conftest import LLAMA3_8B, MIXTRAL, gpu

H100 = hardware_from_gpu(gpu(), 1)
FAST = hardware_from_gpu(gpu(bandwidth=4800.0), 1)
lengths = st.integers(min_value=16, max_value=3000)
batches = st.integers(min_value=1, max_value=200)


@settings(max_examples=60, deadline=None)
@given(inp=lengths, out=lengths, extra=st.integers(min_value=1, max_value=1000), conc=batches)
def test_longer_requests_never_get_faster_or_smaller(inp: int, out: int, extra: int, conc: int) -> None:
    base = estimate(LLAMA3_8B, H100, precision="bf16", input_len=inp, output_len=out, concurrency=conc)
    longer_in = estimate(LLAMA3_8B, H100, precision="bf16", input_len=inp + extra, output_len=out, concurrency=conc)
    longer_out = estimate(LLAMA3_8B, H100, precision="bf16", input_len=inp, output_len=out + extra, concurrency=conc)
    assert base.fits and longer_in.fits and longer_out.fits
    assert longer_in.ttft_ms >= base.ttft_ms
    assert longer_in.e2e_ms >= base.e2e_ms
    assert longer_out.e2e_ms >= base.e2e_ms
    assert longer_in.max_concurrency <= base.max_concurrency


@settings(max_examples=60, deadline=None)
@given(inp=lengths, out=lengths, conc=batches, more=st.integers(min_value=1, max_value=50))
def test_more_concurrency_never_lowers_latency_or_total_throughput(inp: int, out: int, conc: int, more: int) -> None:
    a = estimate(LLAMA3_8B, H100, precision="bf16", input_len=inp, output_len=out, concurrency=conc)
    b = estimate(LLAMA3_8B, H100, precision="bf16", input_len=inp, output_len=out, concurrency=conc + more)
    if b.concurrency == a.concurrency:  # both capped at max_concurrency
        return
    assert b.tpot_ms >= a.tpot_ms
    assert b.e2e_ms >= a.e2e_ms
    assert b.output_tokens_per_s >= a.output_tokens_per_s * 0.999


@settings(max_examples=40, deadline=None)
@given(inp=lengths, out=lengths, conc=batches)
def test_more_bandwidth_never_slows_decode(inp: int, out: int, conc: int) -> None:
    slow = estimate(LLAMA3_8B, H100, precision="bf16", input_len=inp, output_len=out, concurrency=conc)
    fast = estimate(LLAMA3_8B, FAST, precision="bf16", input_len=inp, output_len=out, concurrency=conc)
    assert fast.tpot_ms <= slow.tpot_ms


@given(cap=st.integers(min_value=0, max_value=10**7), seq=st.integers(min_value=1, max_value=10**5),
       more=st.integers(min_value=1, max_value=10**4))
def test_more_context_never_fits_more_sequences(cap: int, seq: int, more: int) -> None:
    assert max_sequences(LLAMA3_8B, cap, seq + more, 16) <= max_sequences(LLAMA3_8B, cap, seq, 16)


@given(tokens=st.integers(min_value=1, max_value=5000), more=st.integers(min_value=1, max_value=100))
def test_moe_reads_more_experts_as_batch_grows(tokens: int, more: int) -> None:
    e, k = MIXTRAL.num_experts, MIXTRAL.num_experts_per_token
    assert expert_read_fraction(e, k, tokens) >= k / e - 1e-12
    assert expert_read_fraction(e, k, tokens + more) >= expert_read_fraction(e, k, tokens)
    assert expert_read_fraction(e, k, tokens) <= 1.0
