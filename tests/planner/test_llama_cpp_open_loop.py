"""The planner sizes llama.cpp under traffic.peak_requests_per_s with the load model `estimate --rate` uses
(llama-server's slots and --batch-size under Poisson arrivals, sizing/load_estimate.prepare_llama_cpp_load), not
the closed-loop batch model: the same server answers the same at the same slots."""

from __future__ import annotations

import math
from typing import Any

import pytest

from infragen.catalog import catalog_from_records, load_catalog
from infragen.catalog.models import load_model_registry
from infragen.sizing import search
from infragen.sizing.context import search_model_len
from infragen.sizing.load_estimate import LoadModel, prepare_llama_cpp_load
from infragen.spec import WorkloadSpec

PEAK, PROMPT, OUTPUT, TPOT_MS = 0.6, 100, 100, 400.0


def _catalog(*ids: str):
    full = load_catalog()
    return catalog_from_records(full.accelerators.values(), full.cpus.values(), [full.instance(i) for i in ids],
                                usd_per_cny=full.usd_per_cny, fx_source=full.fx_source)


def _spec(**extra: Any) -> WorkloadSpec:
    return WorkloadSpec.model_validate({
        "model": "llama-3.1-8b", "precision": "q4_0", "engine": "llama.cpp", "weights": "org/repo/model-q4_0.gguf",
        "cloud": "aws", "regions": ["us-east-1"],
        "traffic": {"peak_requests_per_s": PEAK, "prompt_tokens": PROMPT, "output_tokens": OUTPUT},
        "slo": {"tpot_ms": TPOT_MS}, **extra})


@pytest.fixture(scope="module")
def sized():
    spec = _spec()
    model = load_model_registry()["llama-3.1-8b"]
    result = search(spec, model, _catalog("c7i.4xlarge"))
    ok = [c for c in result.candidates if c.rejected is None]
    assert ok, [c.rejected for c in result.candidates]
    s = ok[0].sizing
    load = prepare_llama_cpp_load(model, s.hardware, precision="q4_0", input_len=PROMPT, output_len=OUTPUT,
                                  max_model_len=search_model_len(spec, model, "llama.cpp"))
    assert isinstance(load, LoadModel)
    return spec, model, s, load


def test_the_plans_latencies_are_estimate_rate_at_the_per_replica_rate(sized) -> None:
    _, _, s, load = sized
    point = load.at(PEAK / s.replicas, quantiles=(0.5, 0.99))
    est = s.estimate
    assert est.tpot_ms == pytest.approx(point.tpot_s * 1e3, rel=1e-9)
    assert est.ttft_p99_ms == pytest.approx(point.ttft_p99_s * 1e3, rel=1e-9)
    assert est.running_batch == pytest.approx(point.running_batch, rel=1e-9)


def test_the_rendered_slots_carry_the_per_replica_rate_as_estimate_rate_says(sized) -> None:
    """`estimate --rate R --max-num-seqs <the plan's --parallel>`: the same server is stable at the plan's rate
    per replica, whose SLO rate is within its capacity, and its TPOT is the plan's (the slots' headroom keeps
    the slot limit out of the answer)."""
    spec, model, s, _ = sized
    rendered = prepare_llama_cpp_load(model, s.hardware, precision="q4_0", input_len=PROMPT, output_len=OUTPUT,
                                      max_model_len=search_model_len(spec, model, "llama.cpp"), parallel=s.batch)
    assert isinstance(rendered, LoadModel) and rendered.scheduler.slots == s.batch
    at_peak = rendered.at(PEAK / s.replicas, quantiles=(0.99,))
    assert at_peak.stable
    assert s.estimate.requests_per_s <= rendered.capacity_per_s()
    assert at_peak.tpot_s * 1e3 == pytest.approx(s.estimate.tpot_ms, rel=0.05)


def test_the_replicas_are_the_fewest_meeting_the_slo_at_the_confidence_factor(sized) -> None:
    _, _, s, load = sized
    slow = load.slowed(s.estimate.latency_factor)
    assert slow.at(PEAK / s.replicas, quantiles=()).tpot_s * 1e3 <= TPOT_MS
    assert s.replicas * s.estimate.requests_per_s >= PEAK * (1 - 1e-9)
    if s.replicas > 1:
        fewer = slow.at(PEAK / (s.replicas - 1), quantiles=())
        assert not fewer.stable or fewer.tpot_s * 1e3 > TPOT_MS
    assert math.isfinite(s.estimate.ttft_p99_ms)
