"""Spot with a floor: the on-demand base (the workload's or the median load's), candidates ranked on the mix (base
on demand + the rest spot), same-GPU spot pools, the plan's views, and bad values exit 2."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml

from infragen.diff import diff_plans
from infragen.report import render_markdown, render_text
from infragen.sizing import plan_file
from tests.spec.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]


def spot_workload(tmp_path: Path, **extra: Any) -> Path:
    doc = yaml.safe_load((ROOT / "examples" / "daily-chatbot.yaml").read_text())
    doc.update({"name": "spot-chat", "pricing": "spot", **extra})
    path = tmp_path / f"spot-{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def price(itype: str, od: float, spot: float) -> dict[str, Any]:
    return {"instance_type": itype, "region": "us-east-1", "on_demand_usd_per_hour": od, "spot_usd_per_hour": spot}


#: Test prices (not the catalog's): one big node is the cheapest all-spot fleet, small nodes the cheapest mix.
PRICES = [price("g6e.2xlarge", 2.0, 0.8), price("g6e.48xlarge", 30.0, 4.0)]


def test_the_base_carries_the_median_hour_and_is_billed_on_demand(tmp_path: Path) -> None:
    plan = plan_file(spot_workload(tmp_path, prices=PRICES, instance_families={"allow": ["g6e"]}))
    s, d, sc = plan.spot, plan.deployment, plan.scaling
    assert s is not None and sc is not None and sc.hourly_profile is not None
    assert d.instance_type == "g6e.2xlarge" and d.nodes_per_replica == d.replicas_per_node == 1
    # The median hour of the profile, at the load one replica carries within the SLOs (the load model's rate per
    # replica, plan.estimate.capacity_requests_per_s), never below min_replicas.
    median = statistics.median(sc.hourly_profile) * 25
    assert s.on_demand_base_replicas == max(2, math.ceil(median / plan.estimate.capacity_requests_per_s))
    assert s.on_demand_base_replicas == s.on_demand_base_nodes == 3 and s.spot_nodes == d.nodes - 3
    assert "median hour" in s.base_basis
    expected = (3 * 2.0 + (d.nodes - 3) * 0.8) * 730
    assert s.usd_per_month_expected == pytest.approx(expected, abs=0.01)
    assert plan.cost.usd_per_month == pytest.approx(expected, abs=0.01)  # the plan's cost is the mix
    assert plan.cost.spot_usd_per_month == pytest.approx(d.nodes * 0.8 * 730, abs=0.01)
    assert sc.usd_per_month_at_peak == pytest.approx(expected, abs=0.01)
    assert plan.bill is not None and plan.bill.lines[0].usd_per_month_at_peak == pytest.approx(expected, abs=0.01)
    assert f"with 3 on demand and {d.nodes - 3} on spot" in plan.bill.lines[0].quantity
    assert s.interruption_band is None and "Spot Instance Advisor" in s.interruption_note
    assert "two minutes" in s.risk


def test_candidates_compete_on_the_mix_not_on_all_spot(tmp_path: Path) -> None:
    """4 engines on one g6e.48xlarge are the cheapest all-spot fleet ($4/h); with its one node on demand ($30/h)
    it loses to 6 x g6e.2xlarge with 3 on demand ($8.40/h)."""
    plan = plan_file(spot_workload(tmp_path, prices=PRICES, instance_families={"allow": ["g6e"]}))
    big = next(a for a in plan.alternatives if a.instance_type == "g6e.48xlarge")
    assert big.feasible and big.nodes == 1 and big.usd_per_month == pytest.approx(30.0 * 730, abs=0.01)
    assert plan.cost.usd_per_month < big.usd_per_month
    assert plan.cost.spot_usd_per_month is not None and plan.cost.spot_usd_per_month > 4.0 * 730


def test_the_workload_sets_the_base_and_the_views_show_it(tmp_path: Path) -> None:
    path = spot_workload(tmp_path, prices=PRICES, instance_families={"allow": ["g6e"]},
                         spot={"on_demand_base_replicas": 1})
    plan = plan_file(path)
    assert plan.spot is not None and plan.spot.on_demand_base_replicas == 1
    assert plan.spot.base_basis == "spot.on_demand_base_replicas"
    text = render_text(plan)
    assert "Spot:       1 replica(s) on demand (1 node(s), from spot.on_demand_base_replicas)" in text
    assert "risk: a spot node can be reclaimed" in text
    assert "| spot floor | 1 replica(s) on demand" in render_markdown(plan)
    assert '"on_demand_base_replicas": 1' in plan.to_json()
    r = run_cli("plan", str(path))
    assert r.code == 0 and "Spot:       1 replica(s) on demand" in r.out
    before = plan_file(spot_workload(tmp_path, prices=PRICES, instance_families={"allow": ["g6e"]}))
    rows = {c.label: c for c in diff_plans(before, plan).rows}
    assert rows["Spot: on-demand base (replicas)"].before == 3 and rows["Spot: on-demand base (replicas)"].after == 1


def test_a_base_above_the_fleet_is_the_whole_fleet(tmp_path: Path) -> None:
    plan = plan_file(spot_workload(tmp_path, prices=PRICES, instance_families={"allow": ["g6e"]},
                                   spot={"on_demand_base_replicas": 500}))
    assert plan.spot is not None and plan.spot.on_demand_base_replicas == plan.deployment.replicas
    assert plan.spot.spot_nodes == 0


def test_same_gpu_spot_pools_share_one_launch_template(tmp_path: Path) -> None:
    """g6e.4xlarge (same L40S, one NVMe disk, more vCPUs and RAM) joins; g6e.8xlarge (two NVMe disks: another disk
    layout) and g6e.xlarge (fewer vCPUs) do not, whatever their price."""
    extra = [price("g6e.4xlarge", 3.0, 1.1), price("g6e.8xlarge", 4.5, 1.2), price("g6e.xlarge", 2.1, 0.9)]
    plan = plan_file(spot_workload(tmp_path, prices=PRICES + extra, instance_families={"allow": ["g6e"]}))
    assert plan.deployment.instance_type == "g6e.2xlarge"
    assert plan.spot is not None and plan.spot.alternative_instance_types == ["g6e.4xlarge"]


def test_without_a_daily_shape_the_base_is_min_replicas(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "examples" / "daily-chatbot.yaml").read_text())
    del doc["traffic"]["hourly_profile"], doc["traffic"]["time_zone"]
    doc.update({"pricing": "spot", "prices": PRICES, "instance_families": {"allow": ["g6e"]}})
    path = tmp_path / "flat.yaml"
    path.write_text(yaml.safe_dump(doc))
    plan = plan_file(path)
    assert plan.spot is not None and plan.spot.on_demand_base_replicas == 2
    assert "median load is not known" in plan.spot.base_basis


def test_on_demand_plans_have_no_spot_part() -> None:
    plan = plan_file(ROOT / "examples" / "team-chatbot.yaml")
    assert plan.spot is None and '"spot":' not in plan.to_json()


@pytest.mark.parametrize(("extra", "expected"), [
    ({"pricing": "on-demand", "spot": {"on_demand_base_replicas": 1}}, "spot.on_demand_base_replicas applies"),
    ({"spot": {"on_demand_base_replicas": -1}}, "greater than or equal to 0"),
    ({"spot": {"on_demand_base_replicas": "two"}}, "spot.on_demand_base_replicas"),
    ({"spot": {"base": 1}}, "spot.base"),
])
def test_bad_spot_fields_exit_2(tmp_path: Path, extra: dict[str, Any], expected: str) -> None:
    r = run_cli("validate", str(spot_workload(tmp_path, **extra)))
    assert r.code == 2 and "Traceback" not in r.err and expected in r.err, r.err
