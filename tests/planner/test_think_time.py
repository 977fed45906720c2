"""traffic.think_time_s: concurrent users who read and type between requests (closed loop with think time)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infragen.catalog import load_catalog
from infragen.catalog.models import load_model_registry
from infragen.sizing import daily, plan_file, plan_workload, queueing
from infragen.spec import TrafficSpec, WorkloadSpec
from tests.spec.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]


def _plan(think_time_s: float | None, users: int = 300):
    traffic: dict[str, object] = {"concurrent_users": users, "prompt_tokens": 1024, "output_tokens": 256}
    if think_time_s is not None:
        traffic["think_time_s"] = think_time_s
    spec = WorkloadSpec.model_validate({
        "model": "llama-3.1-8b", "cloud": "aws", "regions": ["us-east-1"], "traffic": traffic,
        "slo": {"ttft_p99_ms": 1500, "tpot_ms": 50}, "instance_families": {"allow": ["g6e"]}})
    return plan_workload(spec, catalog=load_catalog(), model=load_model_registry()["llama-3.1-8b"],
                         workload_name="users")


def test_users_who_think_need_far_fewer_replicas_and_the_figures_follow_the_formula() -> None:
    busy, reading = _plan(0), _plan(30)
    assert reading.deployment.nodes * 2 <= busy.deployment.nodes  # 4 g6e.xlarge instead of 10
    assert reading.cost.usd_per_month * 2 <= busy.cost.usd_per_month
    est = reading.estimate
    e2e_s = est.e2e_ms / 1000
    assert est.in_flight_requests == pytest.approx(300 * e2e_s / (30 + e2e_s), rel=1e-3)
    assert est.arrival_requests_per_s == pytest.approx(300 / (30 + e2e_s), rel=1e-3)
    # The per-replica batch at peak is the fixed point: ceil(users per replica x E2E / (think + E2E)).
    per_replica = 300 / reading.deployment.replicas
    assert est.concurrency_per_replica == math.ceil(per_replica * e2e_s / (30 + e2e_s))
    assert est.utilisation == pytest.approx(est.in_flight_requests / (reading.engine.max_num_seqs
                                                                       * reading.deployment.replicas), abs=1e-3)
    assert "think 30 s between requests" in " ".join(reading.explanation)
    assert "think time" in est.queueing_method
    # Without think time every user is a request in flight, as before the field existed.
    assert busy.estimate.in_flight_requests == 300
    assert busy.deployment.replicas == math.ceil(300 / busy.engine.max_num_seqs)


def test_think_time_zero_is_the_field_left_out() -> None:
    assert _plan(0).digest == _plan(None).digest


def test_replicas_keep_the_in_flight_requests_within_the_batch_at_the_99th_percentile() -> None:
    # p = 2 / (30 + 2): n p + 2.326 sqrt(n p (1 - p)) = 24 at the largest n.
    n = queueing.users_per_replica(24, 2.0, 30.0)
    p = 2.0 / 32.0
    assert n * p + queueing.Z_P99 * math.sqrt(n * p * (1 - p)) == pytest.approx(24)
    assert 24 < n < 24 / p  # more users than slots, fewer than the mean alone would allow
    assert queueing.users_per_replica(24, 2.0, 0.0) == 24
    assert queueing.replicas_for_users(1000, 24, 1, e2e_s=2.0, think_time_s=30.0) == math.ceil(1000 / n)
    assert queueing.replicas_for_users(1000, 24, 1) == math.ceil(1000 / 24)


@settings(max_examples=60, deadline=None)
@given(batch=st.integers(1, 256), e2e=st.floats(0.05, 120), think=st.floats(0.0, 3600))
def test_more_think_time_never_serves_fewer_users_per_replica(batch: int, e2e: float, think: float) -> None:
    base = queueing.users_per_replica(batch, e2e, think)
    assert base >= batch * (1 - 1e-9)
    assert queueing.users_per_replica(batch, e2e, think + 1.0) >= base * (1 - 1e-9)


def test_the_batch_at_peak_is_the_fixed_point_of_latency_and_load() -> None:
    calls: list[int] = []

    def e2e_s_at(b: int) -> float:  # latency grows with the batch: 1 s + 0.1 s per request
        calls.append(b)
        return 1.0 + 0.1 * b

    b = queueing.closed_loop_batch(100.0, 20.0, 64, e2e_s_at)
    assert len(calls) <= queueing.MAX_FIXED_POINT_ROUNDS
    assert b == math.ceil(100 * e2e_s_at(b) / (20 + e2e_s_at(b)))
    # The largest such b (the steps start above it and never rise): no larger batch maps onto itself.
    assert all(math.ceil(100 * e2e_s_at(x) / (20 + e2e_s_at(x))) < x for x in range(b + 1, 65))
    assert queueing.closed_loop_batch(100.0, 0.0, 64, e2e_s_at) == 64  # no think time: every user, up to the batch


def test_the_daily_shape_counts_users_per_replica_with_their_think_time() -> None:
    profile = [0.5] * 12 + [1.0] * 12
    t = TrafficSpec(concurrent_users=1000, think_time_s=30, hourly_profile=profile)
    shape = daily.shape_for(t, capacity_requests_per_s=12.0, batch=24, min_replicas=1, nodes_per_replica=1,
                            replicas_per_node=1)
    assert shape.load_per_replica == pytest.approx(queueing.users_per_replica(24, 2.0, 30.0))
    flat = daily.shape_for(TrafficSpec(concurrent_users=1000, hourly_profile=profile), capacity_requests_per_s=12.0,
                           batch=24, min_replicas=1, nodes_per_replica=1, replicas_per_node=1)
    assert flat.load_per_replica == 24


def test_think_time_with_a_request_rate_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("model: qwen2-7b\ntraffic:\n  peak_requests_per_s: 5\n  think_time_s: 30\n")
    r = run_cli("validate", str(path))
    assert r.code == 2 and "Traceback" not in r.err
    assert r.err.startswith(f"Error: {path}: traffic.think_time_s: a think time needs `concurrent_users`")
    path.write_text("model: qwen2-7b\ntraffic:\n  concurrent_users: 5\n  think_time_s: -1\n")
    r = run_cli("validate", str(path))
    assert r.code == 2 and "traffic.think_time_s: Input should be greater than or equal to 0" in r.err


def test_the_think_time_example_plans_people_online() -> None:
    plan = plan_file(ROOT / "examples" / "support-assistant.yaml")
    assert plan.estimate.in_flight_requests is not None
    assert plan.estimate.in_flight_requests < 300 / 4  # far fewer requests in flight than people online
    assert "think" in " ".join(plan.explanation)


def test_a_plan_above_the_limits_names_the_users_and_their_think_time(tmp_path: Path) -> None:
    path = tmp_path / "crowd.yaml"
    path.write_text("model: llama-3.1-8b\ntraffic:\n  concurrent_users: 10000000\n  think_time_s: 5\n"
                    "cloud: aws\nregions: [us-east-1]\n")
    r = run_cli("plan", str(path))
    assert r.code == 3 and "traffic.concurrent_users 10000000 (think_time_s 5)" in r.err
