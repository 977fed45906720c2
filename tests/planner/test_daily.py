"""Traffic over a day: the spec fields, replicas per hour, the autoscaling floor/target and the cost at the profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from infragen.sizing import daily, plan_file
from infragen.sizing.resources import BootTime, boot_time, health_grace_s
from infragen.spec import TrafficSpec
from tests.spec.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
OFFICE = [0.1] * 7 + [0.4, 0.6, 0.8, 1.0, 1.0, 1.0, 0.9, 0.9, 0.8, 0.6, 0.4] + [0.2] * 6
#: 15 minutes, the grace floor: a quarter of an hour's ramp happens before a new replica serves.
BOOT = BootTime(install_s=600, download_s=100, load_s=50, download_gbps=1.0, grace_s=900)


def _shape(load: float = 10.0, *, min_replicas: int = 1, per_node: int = 1) -> daily.ReplicaShape:
    return daily.ReplicaShape(load, load, min_replicas, 1, per_node)


def test_every_hour_is_sized_like_the_peak_and_the_schedule_leads_by_the_boot_time() -> None:
    t = TrafficSpec(peak_requests_per_s=100, hourly_profile=OFFICE)
    s = daily.select_scaling(t, _shape(10.0), BOOT, node_usd_per_hour=2.0)
    assert s is not None and s.replicas_by_hour is not None
    # ceil(fraction x 100 / 10): 0.1 -> 1, 0.4 -> 4, 1.0 -> 10 ...
    assert s.replicas_by_hour == [1] * 7 + [4, 6, 8, 10, 10, 10, 9, 9, 8, 6, 4] + [2] * 6
    assert max(s.replicas_by_hour) == 10 and s.usd_per_month_at_peak == pytest.approx(10 * 2.0 * 730)
    # Scheduled: hour h's fleet starts 15 minutes early; each rise costs its extra replicas for a quarter hour.
    hours = sum(s.replicas_by_hour)
    rises = sum(max(0, s.replicas_by_hour[h] - s.replicas_by_hour[h - 1]) for h in range(24))
    scheduled = (hours + rises * 0.25) * 2.0 * 730 / 24
    assert s.strategy == "scheduled"
    assert s.usd_per_month_at_profile == pytest.approx(scheduled, abs=0.01)
    assert s.usd_per_month_at_profile < s.usd_per_month_at_peak
    assert s.average_replicas == pytest.approx((hours + rises * 0.25) / 24, abs=1e-3)


def test_the_floor_and_target_keep_headroom_for_the_steepest_ramp() -> None:
    t = TrafficSpec(peak_requests_per_s=100, hourly_profile=OFFICE)
    s = daily.select_scaling(t, _shape(10.0), BOOT, node_usd_per_hour=2.0)
    assert s is not None
    # Steepest rise: 0.1 -> 0.4 of the peak at hour 7 (30 requests/s in an hour, 7.5 during one boot).
    assert s.steepest_ramp_per_hour == pytest.approx(0.3)
    # Floor: the quietest hour (10 req/s) plus 7.5 req/s -> ceil(17.5 / 10) = 2 replicas.
    assert s.min_replicas == 2
    # Above the floor the fleet must absorb each rise's quarter hour: 40 -> 60 at hour 8 is the tightest
    # (40 / 45); 60 -> 80 gives 60 / 65, 80 -> 100 gives 80 / 85, 10 -> 40 is carried by the floor (20 >= 17.5).
    assert s.target_requests_per_s_per_replica == pytest.approx(10 * 40 / 45, abs=1e-3)
    assert s.max_replicas == 12  # ceil(100 / 8.889)
    assert s.boot.total_s == 900


def test_no_ramp_no_headroom_and_a_flat_profile_costs_the_peak() -> None:
    t = TrafficSpec(peak_requests_per_s=100, hourly_profile=[1.0] * 24)
    s = daily.select_scaling(t, _shape(10.0), BOOT, node_usd_per_hour=2.0)
    assert s is not None
    assert s.target_requests_per_s_per_replica == 10 and s.min_replicas == s.max_replicas == 10
    assert s.usd_per_month_at_profile == pytest.approx(s.usd_per_month_at_peak or 0)


def test_packed_replicas_are_billed_as_whole_nodes() -> None:
    t = TrafficSpec(peak_requests_per_s=100, hourly_profile=[0.3] * 12 + [1.0] * 12)
    s = daily.select_scaling(t, _shape(10.0, per_node=4), BOOT, node_usd_per_hour=8.0)
    assert s is not None and s.replicas_by_hour == [3] * 12 + [10] * 12
    # 3 replicas -> 1 node, 10 -> 3 nodes; the peak fleet is 3 nodes all day.
    assert s.usd_per_month_at_peak == pytest.approx(3 * 8.0 * 730)
    assert s.usd_per_month_at_profile is not None and s.usd_per_month_at_profile < s.usd_per_month_at_peak


def test_closed_loop_profile_counts_users_per_batch() -> None:
    t = TrafficSpec(concurrent_users=256, hourly_profile=[0.25] * 12 + [1.0] * 12)
    shape = daily.shape_for(t, capacity_requests_per_s=5.0, batch=32, min_replicas=1, nodes_per_replica=1,
                            replicas_per_node=1)
    s = daily.select_scaling(t, shape, BOOT, node_usd_per_hour=1.0)
    assert s is not None and s.replicas_by_hour == [2] * 12 + [8] * 12


def test_average_only_prices_the_average_load() -> None:
    t = TrafficSpec(peak_requests_per_s=100, average_requests_per_s=35)
    s = daily.select_scaling(t, _shape(10.0, min_replicas=2), BOOT, node_usd_per_hour=1.0)
    assert s is not None and s.replicas_by_hour is None and s.hourly_profile is None
    assert s.average_load_fraction == 0.35 and s.min_replicas == 2
    assert s.usd_per_month_at_profile == pytest.approx(4 * 730)
    assert "average only" in s.method


def test_boot_time_matches_the_health_grace_period() -> None:
    for gib, gbps, shared in ((15.0, 25.0, None), (140.0, 100.0, None), (400.0, 12.5, None), (60.0, 16.0, 0.2)):
        b = boot_time(gib, gbps, download_gbps=shared)
        assert b.total_s == b.grace_s == health_grace_s(gib, gbps, download_gbps=shared)
        assert b.total_s >= min(7200, b.install_s + b.download_s + b.load_s - 2) or shared is not None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=24, max_size=24), st.floats(0.5, 50), st.integers(0, 7200))
def test_profile_never_costs_more_than_the_peak_and_peaks_at_the_peak(fracs: list[float], load: float,
                                                                      boot_s: int) -> None:
    fracs[0] = 1.0
    t = TrafficSpec(peak_requests_per_s=100, hourly_profile=fracs)
    s = daily.select_scaling(t, _shape(load), BootTime(600, 0, 0, 1.0, boot_s), node_usd_per_hour=1.0)
    assert s is not None and s.replicas_by_hour is not None
    assert max(s.replicas_by_hour) == _shape(load).replicas_for(100)
    assert s.usd_per_month_at_profile is not None and s.usd_per_month_at_peak is not None
    assert s.usd_per_month_at_profile <= s.usd_per_month_at_peak + 1e-6
    assert s.min_replicas <= s.max_replicas and s.target_requests_per_s_per_replica <= load + 1e-4


def test_a_workload_with_a_profile_plans_min_max_and_a_cheaper_average(tmp_path: Path) -> None:
    path = ROOT / "examples" / "daily-chatbot.yaml"
    plan = plan_file(path)
    s = plan.scaling
    assert s is not None and s.replicas_by_hour is not None and len(s.replicas_by_hour) == 24
    assert max(s.replicas_by_hour) == plan.deployment.replicas
    assert 1 <= s.min_replicas < s.max_replicas
    assert s.usd_per_month_at_peak == plan.cost.usd_per_month
    assert s.usd_per_month_at_profile is not None and s.usd_per_month_at_profile < plan.cost.usd_per_month
    assert s.boot.total_s == plan.network.health_check_grace_s
    doc = json.loads(plan.to_json())
    assert doc["scaling"]["time_zone"] == "Europe/Berlin"
    r = run_cli("plan", str(path))
    assert r.code == 0 and "at the profile vs" in r.out and "replicas by hour 0-23:" in r.out


def test_a_workload_without_a_daily_shape_has_no_scaling_part() -> None:
    plan = plan_file(ROOT / "examples" / "team-chatbot.yaml")
    assert plan.scaling is None and "scaling" not in json.loads(plan.to_json())


def _workload(tmp_path: Path, **traffic: object) -> Path:
    doc = {"model": "qwen2-7b", "traffic": {"peak_requests_per_s": 5, **traffic}}
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(("traffic", "expected"), [
    ({"hourly_profile": [0.5, 1.0]}, "traffic.hourly_profile: give 24 values, one per hour from hour 0 to hour 23; "
                                     "found 2"),
    ({"hourly_profile": [0.5] * 24}, "traffic.hourly_profile: the largest value is 0.5, but the values are fractions"),
    ({"hourly_profile": [1.5] + [0.5] * 23}, "traffic.hourly_profile[0]: Input should be less than or equal to 1"),
    ({"hourly_profile": [-0.1] + [1.0] * 23}, "traffic.hourly_profile[0]: Input should be greater than or equal"),
    ({"hourly_profile": [1.0] * 24, "time_zone": "Mars/Olympus"}, "traffic.time_zone: 'Mars/Olympus' is not a time "
                                                                 "zone of the IANA tz database"),
    ({"time_zone": "$(reboot)"}, "traffic.time_zone: '$(reboot)' is not a valid time zone"),
    ({"average_requests_per_s": 9}, "traffic.average_requests_per_s: 9 requests/s is above peak_requests_per_s (5)"),
    ({"average_requests_per_s": 2, "hourly_profile": [1.0] * 24}, "traffic.average_requests_per_s: give "
                                                                  "`average_requests_per_s` or `hourly_profile`"),
])
def test_bad_daily_fields_exit_2_with_the_field(tmp_path: Path, traffic: dict[str, object], expected: str) -> None:
    path = _workload(tmp_path, **traffic)
    r = run_cli("plan", str(path))
    assert r.code == 2 and "Traceback" not in r.err
    assert r.err.startswith(f"Error: {path}: {expected}"), r.err


def test_average_with_concurrent_users_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({"model": "qwen2-7b", "traffic": {"concurrent_users": 10,
                                                                    "average_requests_per_s": 1}}))
    r = run_cli("validate", str(path))
    assert r.code == 2 and "an average rate needs `peak_requests_per_s`" in r.err
