"""slo_confidence: p50 sizes to the model's median estimate (cheaper), p90 to its 90th-percentile error (safer);
the plan records which, and the open-loop replicas come from the load model."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infragen.catalog import load_catalog
from infragen.catalog.models import resolve_model
from infragen.sizing import plan_workload
from infragen.sizing.constants import load_constants
from infragen.sizing.queueing import METHOD_QPS
from infragen.spec import WorkloadSpec

ROOT = Path(__file__).resolve().parents[2]


def _plan(confidence: str, **changes: object):  # type: ignore[no-untyped-def]
    doc = yaml.safe_load((ROOT / "examples" / "team-chatbot.yaml").read_text())
    doc.update(changes, slo_confidence=confidence)
    spec = WorkloadSpec.model_validate(doc)
    return plan_workload(spec, catalog=load_catalog(), model=resolve_model(spec.model, base_dir=ROOT, where="model"),
                         workload_name="conf")


@pytest.fixture(scope="module")
def plans():  # type: ignore[no-untyped-def]
    return _plan("p50"), _plan("p90")


def test_p50_is_cheaper_and_p90_safer(plans) -> None:  # type: ignore[no-untyped-def]
    p50, p90 = plans
    assert p50.cost.usd_per_month < p90.cost.usd_per_month
    # the safer plan has more headroom: a lower arrival rate per replica against the SLO rate it was sized for
    assert p90.estimate.capacity_requests_per_s < p50.estimate.capacity_requests_per_s or (
        p90.deployment.instance_type != p50.deployment.instance_type)


def test_the_plan_records_the_confidence_and_its_factor(plans) -> None:  # type: ignore[no-untyped-def]
    p50, p90 = plans
    assert (p50.estimate.slo_confidence, p50.estimate.latency_factor) == ("p50", 1.0)
    factors = {f.factor for f in load_constants().slo_confidence.p90.values()}
    assert p90.estimate.slo_confidence == "p90" and p90.estimate.latency_factor in factors
    assert p90.estimate.latency_factor > 1.0


def test_open_loop_replicas_come_from_the_load_model(plans) -> None:  # type: ignore[no-untyped-def]
    spec = WorkloadSpec.model_validate(yaml.safe_load((ROOT / "examples" / "team-chatbot.yaml").read_text()))
    for plan in plans:
        est, d = plan.estimate, plan.deployment
        assert est.queueing_method == METHOD_QPS
        assert est.ttft_p50_ms is not None and est.ttft_p50_ms <= est.ttft_p99_ms <= est.e2e_p99_ms
        assert est.running_batch is not None and 0 < est.running_batch <= plan.engine.max_num_seqs
        # each replica's share of the peak is within the SLO rate it was sized for, and one fewer would not be
        per_replica = spec.traffic.peak_requests_per_s / d.replicas
        assert per_replica <= est.capacity_requests_per_s * (1 + 1e-9)
        assert spec.traffic.peak_requests_per_s / (d.replicas - 1) > est.capacity_requests_per_s * 0.99 or \
            d.replicas == spec.min_replicas
        # the SLOs hold on the model's percentiles even inflated by the confidence factor
        assert est.ttft_p99_ms * est.latency_factor <= spec.slo.ttft_p99_ms
        assert est.tpot_ms * est.latency_factor <= spec.slo.tpot_ms
        assert any("Poisson requests/s" in line for line in plan.explanation)


def test_unknown_confidence_is_bad_input() -> None:
    doc = yaml.safe_load((ROOT / "examples" / "team-chatbot.yaml").read_text())
    doc["slo_confidence"] = "p99"
    with pytest.raises(ValueError, match="slo_confidence"):
        WorkloadSpec.model_validate(doc)
