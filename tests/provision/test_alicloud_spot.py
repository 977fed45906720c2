"""Alibaba spot plans under Pulumi mocks: the plan's on-demand floor runs pay-as-you-go (issue 19), in its own
priority-policy ESS groups from a second launch template (ESS's OnDemandBaseCapacity needs the cost-optimised policy,
which instance refresh does not support), the rest on spot, with the plan's same-GPU alternatives as extra spot
types; multi-node replicas are whole on demand or whole spot."""

from __future__ import annotations

from typing import Any

import pytest

from infragen.plan import Plan, SpotPlan
from infragen.provision.alicloud.autoscaling import (
    extra_floor_nodes,
    fleet_bounds,
    group_shares,
    share_of,
    spot_instance_types,
)
from tests.plan_factory import make_plan
from tests.provision.mocks import run_program
from tests.provision.test_alicloud_autoscaling import DAILY, TODAY
from tests.provision.test_alicloud_support import (
    COMPUTED,
    KMS_INSTANCE_ID,
    KMS_KEY_ID,
    TEMPLATE,
    ZONES,
    AliRun,
    call_results,
    make_settings,
    run_alicloud,
    stand_in_renderer,
)

GROUP = "alicloud:ess/scalingGroup:ScalingGroup"


def with_floor(plan: Plan, base_replicas: int, *, alternatives: tuple[str, ...] = ()) -> Plan:
    """`plan` (spot) with an on-demand floor of `base_replicas` replicas, as the planner writes it."""
    d = plan.deployment
    per_node = d.replicas_per_node if d.nodes_per_replica == 1 else 1
    base_nodes = (-(-base_replicas // per_node) if d.nodes_per_replica == 1
                  else base_replicas * d.nodes_per_replica)
    spot = SpotPlan(on_demand_base_replicas=base_replicas, on_demand_base_nodes=base_nodes,
                    spot_nodes=d.nodes - base_nodes, base_basis="test", alternative_instance_types=list(alternatives),
                    usd_per_month_expected=None, interruption_note="none", risk="test")
    return plan.model_copy(update={"spot": spot})


def _templates(run: AliRun) -> dict[str, dict[str, Any]]:
    return {t.name: t.inputs for t in run.of_type("ecs/ecsLaunchTemplate:EcsLaunchTemplate")}


def _groups(run: AliRun) -> list[Any]:
    return run.of_type("ess/scalingGroup:ScalingGroup")


def test_the_floor_runs_on_demand_and_the_rest_on_spot_in_groups_that_add_up_to_the_plan() -> None:
    plan = with_floor(make_plan("single", "alicloud", spot=True), 1)
    assert plan.deployment.nodes == 2 and plan.spot is not None and plan.spot.on_demand_base_nodes == 1
    run = run_alicloud(plan, today=TODAY)
    templates = _templates(run)
    (spot_name,) = [n for n, t in templates.items() if t["spotStrategy"] == "SpotAsPriceGo"]
    (od_name,) = [n for n, t in templates.items() if t["spotStrategy"] == "NoSpot"]
    assert templates[od_name]["instanceChargeType"] == "PostPaid"
    assert templates[od_name]["userData"] == templates[spot_name]["userData"], "the same node either way"
    groups = _groups(run)
    by_template = {g.name: g.inputs["launchTemplateId"] for g in groups}
    on_demand = [g for g in groups if by_template[g.name] == f"{od_name}-id"]
    spot = [g for g in groups if by_template[g.name] == f"{spot_name}-id"]
    assert len(on_demand) + len(spot) == len(groups)
    # The floor's node count is on demand, the rest spot: desired capacities add up to the plan's fleet.
    assert sum(g.inputs["desiredCapacity"] for g in on_demand) == plan.spot.on_demand_base_nodes
    assert sum(g.inputs["desiredCapacity"] for g in spot) == plan.deployment.nodes - plan.spot.on_demand_base_nodes
    # Both kinds are priority-policy groups (instance refresh runs only there), with their own boot hook and the
    # load balancer on every engine port.
    assert all(g.inputs["multiAzPolicy"] == "PRIORITY" for g in groups)
    assert len(run.of_type("ess/lifecycleHook:LifecycleHook")) == len(groups)
    assert len(run.of_type("ess/serverGroupAttachment:ServerGroupAttachment")) == len(groups)
    names = [g.inputs["scalingGroupName"] for g in groups]
    assert len(set(names)) == len(names) and any(n.endswith("-od0") for n in names)
    assert not any("on-demand floor is not applied" in w for w in run.recording.warnings)


def test_without_a_floor_the_groups_and_their_names_are_unchanged() -> None:
    for plan in (make_plan("single", "alicloud", spot=True), make_plan("single", "alicloud"),
                 with_floor(make_plan("single", "alicloud", spot=True), 0)):
        run = run_alicloud(plan, today=TODAY)
        assert len(_templates(run)) == 1
        assert all(g.inputs["scalingGroupName"].endswith(("-g0", "-g1")) for g in _groups(run))
        assert [s.on_demand for s in group_shares(plan, 3)] == [False, False]


def test_a_floor_as_large_as_the_fleet_leaves_no_spot_group() -> None:
    plan = with_floor(make_plan("single", "alicloud", spot=True), 2)
    shares = group_shares(plan, 3)
    assert all(s.on_demand for s in shares) and sum(s.desired for s in shares) == 2
    run = run_alicloud(plan, today=TODAY)
    spot_templates = [n for n, t in _templates(run).items() if t["spotStrategy"] != "NoSpot"]
    used = {g.inputs["launchTemplateId"] for g in _groups(run)}
    assert not used & {f"{n}-id" for n in spot_templates}, "no node is launched from the spot template"


@pytest.fixture(scope="module")
def daily_spot(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """The daily Beijing shape as a spot plan (Alibaba's catalog has no spot prices: the factory's SpotPlan is
    attached to the real daily plan), with the floor above the quietest hours' fleet."""
    from infragen.sizing import plan_file

    path = tmp_path_factory.mktemp("ali-daily-spot") / "ali-daily.yaml"
    path.write_text(DAILY)
    plan = plan_file(path)
    plan = plan.model_copy(update={"deployment": plan.deployment.model_copy(update={"pricing": "spot"})})
    low, high, _ = fleet_bounds(plan)
    assert high > low + 2
    return with_floor(plan, low + 1)


def test_a_scaling_spot_fleet_splits_every_hour_between_the_floor_and_spot(daily_spot: Plan) -> None:
    base = daily_spot.spot.on_demand_base_nodes  # type: ignore[union-attr]
    low, high, _ = fleet_bounds(daily_spot)
    shares = group_shares(daily_spot, 3)
    floor = [s for s in shares if s.on_demand]
    spot = [s for s in shares if not s.on_demand]
    # As AWS's on-demand base: the first `base` nodes of any fleet size are on demand.
    assert (sum(s.min_size for s in floor), sum(s.max_size for s in floor)) == (min(low, base), base)
    assert sum(s.max_size for s in spot) == high - base
    # Below the floor the spot groups keep one node (target tracking cannot grow an empty group): one extra.
    assert sum(s.min_size for s in spot) == 1 and extra_floor_nodes(daily_spot) == 1
    hours = daily_spot.scaling.replicas_by_hour  # type: ignore[union-attr]
    for n in hours:
        od = sum(share_of(n, s, shares, base) for s in floor)
        sp = sum(share_of(n, s, shares, base) for s in spot)
        assert od == min(n, base) and sp == max(n - base, 1)


def test_a_scaling_spot_fleet_under_mocks_warns_of_its_one_extra_node(daily_spot: Plan) -> None:
    run = run_alicloud(daily_spot, today=TODAY)
    assert any("one more than the plan's floor" in w for w in run.recording.warnings)
    tasks = run.of_type("ess/scheduledTask:ScheduledTask")
    assert tasks and any(t.inputs["scheduledTaskName"].endswith("-od0") for t in tasks)
    rules = run.of_type("ess/scalingRule:ScalingRule")
    assert len(rules) == len(_groups(run)), "every group follows the QPS target"


def test_spot_groups_may_launch_the_plans_same_gpu_types_offered_in_every_node_zone() -> None:
    plan = with_floor(make_plan("single", "alicloud", spot=True), 1,
                      alternatives=("ecs.gn7i-c16g1.4xlarge", "ecs.gn7i-c32g1.8xlarge"))
    # One alternative is sold as spot in every node zone, the other in one only.
    results: dict[str, Any] = dict(call_results(ZONES))

    def zones(args: dict[str, Any]) -> dict[str, Any]:
        found = ZONES[:1] if args.get("availableInstanceType") == "ecs.gn7i-c32g1.8xlarge" else ZONES
        return {"ids": found, "zones": [{"id": z} for z in found]}

    results["alicloud:index/getZones:getZones"] = zones

    def program() -> dict[str, Any]:
        from infragen.provision.alicloud import AlicloudOptions, build_alicloud

        return build_alicloud(plan, make_settings(), render=stand_in_renderer, today=TODAY,
                              options=AlicloudOptions(kms_instance_id=KMS_INSTANCE_ID, kms_key_id=KMS_KEY_ID))

    rec = run_program(program, call_results=results, computed=COMPUTED)
    assert not rec.errors, rec.errors
    groups = rec.of_type(GROUP)
    templates = {t.name: t.inputs for t in rec.of_type(TEMPLATE)}
    for g in groups:
        spot = templates[g.inputs["launchTemplateId"].removesuffix("-id")]["spotStrategy"] == "SpotAsPriceGo"
        overrides = g.inputs.get("launchTemplateOverrides")
        if spot:
            assert [o["instanceType"] for o in overrides] == [plan.deployment.instance_type, "ecs.gn7i-c16g1.4xlarge"]
        else:
            assert not overrides, "the on-demand floor launches the planned type only"
    assert spot_instance_types(plan, {}, ZONES) == [plan.deployment.instance_type]


def test_multi_node_replicas_are_whole_on_demand_or_whole_spot() -> None:
    base = make_plan("multinode", "alicloud", spot=True)
    # Spot never goes into a deployment set (refused): this replica layout runs without one.
    network = base.network.model_copy(update={"placement": "none"})
    deployment = base.deployment.model_copy(update={"replicas": 2, "nodes": 4})
    plan = with_floor(base.model_copy(update={"network": network, "deployment": deployment}), 1)
    run = run_alicloud(plan, today=TODAY)
    instances = run.of_type("ecs/instance:Instance")
    assert len(instances) == 4
    strategies = {i.name: i.inputs["spotStrategy"] for i in instances}
    on_demand = sorted(n for n, s in strategies.items() if s == "NoSpot")
    assert len(on_demand) == plan.spot.on_demand_base_nodes == 2  # type: ignore[union-attr]
    assert all("r0" in n for n in on_demand) and all(s == "SpotAsPriceGo" for n, s in strategies.items()
                                                      if n not in on_demand)
