"""Spot with an on-demand floor on AWS, under Pulumi mocks: the replica group's mixed-instances policy keeps the
plan's base on demand, fills the rest from spot pools of the planned type and its same-GPU alternatives offered in
every node zone (price-capacity-optimized); multi-node replicas are wholly on demand or wholly spot."""

from __future__ import annotations

from typing import Any

from infragen.plan import Plan, SpotPlan
from infragen.provision.aws import build_aws
from infragen.provision.aws.options import AwsOptions
from tests.plan_factory import make_plan
from tests.provision.conftest import AWS_CALLS, AWS_COMPUTED, MOCK_AMI, fake_renderer, make_settings
from tests.provision.mocks import Recording, run_program

ASG = "aws:autoscaling/group:Group"
OFFERINGS = "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings"
#: What the mocked region offers where: use1-az4 has no node type, the wide type lacks use1-az2.
OFFERED = {"use1-az1": {"g6e.2xlarge", "g6e.4xlarge", "g6e.16xlarge", "p5.48xlarge"},
           "use1-az2": {"g6e.2xlarge", "g6e.4xlarge", "p5.48xlarge"}}


def offerings(args: dict[str, Any]) -> dict[str, Any]:
    """DescribeInstanceTypeOfferings filtered by instance type, zone by zone."""
    [flt] = args["filters"]
    pairs = [(t, z) for z, types in sorted(OFFERED.items()) for t in flt["values"] if t in types]
    return {"id": "mock", "instanceTypes": [t for t, _ in pairs], "locations": [z for _, z in pairs],
            "locationTypes": ["availability-zone-id"] * len(pairs)}


def spot_plan(kind: str, itype: str, *, base: int, alternatives: list[str], replicas: int | None = None) -> Plan:
    plan = make_plan(kind, "aws", spot=True)  # type: ignore[arg-type]
    d = plan.deployment
    if replicas is not None:
        d = d.model_copy(update={"replicas": replicas, "nodes": replicas * d.nodes_per_replica})
    held = base * d.nodes_per_replica
    return plan.model_copy(update={
        "deployment": d.model_copy(update={"instance_type": itype}),
        "spot": SpotPlan(on_demand_base_replicas=base, on_demand_base_nodes=held, spot_nodes=d.nodes - held,
                         base_basis="test", alternative_instance_types=alternatives, usd_per_month_expected=None,
                         interruption_note="none", risk="test")})


def run(plan: Plan) -> Recording:
    rec = run_program(lambda: build_aws(plan, make_settings(), render_user_data=fake_renderer(plan),
                                        options=AwsOptions(image_id=MOCK_AMI)),
                      call_results={**AWS_CALLS, OFFERINGS: offerings}, computed=AWS_COMPUTED)
    assert not rec.errors, rec.errors
    return rec


def test_the_replica_group_keeps_the_on_demand_base_and_same_gpu_pools() -> None:
    plan = spot_plan("single", "g6e.2xlarge", base=1, alternatives=["g6e.4xlarge", "g6e.16xlarge"])
    rec = run(plan)
    [group] = rec.of_type(ASG)
    policy = group.inputs["mixedInstancesPolicy"]
    dist = policy["instancesDistribution"]
    assert dist["onDemandBaseCapacity"] == 1 and dist["onDemandPercentageAboveBaseCapacity"] == 0
    assert dist["spotAllocationStrategy"] == "price-capacity-optimized"
    # g6e.16xlarge is not offered in use1-az2, one of the node zones: an override there would fail its launches.
    assert [o["instanceType"] for o in policy["launchTemplate"]["overrides"]] == ["g6e.2xlarge", "g6e.4xlarge"]
    assert group.inputs["capacityRebalance"] is True and "launchTemplate" not in group.inputs
    asked = [a["filters"][0]["values"] for t, a in rec.calls if t == OFFERINGS]
    assert asked == [["g6e.2xlarge"], ["g6e.4xlarge", "g6e.16xlarge"]]


def test_a_spot_plan_without_a_floor_is_all_spot_and_says_so() -> None:
    plan = make_plan("single", "aws", spot=True)
    assert plan.spot is None
    rec = run_program(lambda: build_aws(plan, make_settings(), render_user_data=fake_renderer(plan),
                                        options=AwsOptions(image_id=MOCK_AMI)),
                      call_results=AWS_CALLS, computed=AWS_COMPUTED)
    [group] = rec.of_type(ASG)
    assert group.inputs["mixedInstancesPolicy"]["instancesDistribution"]["onDemandBaseCapacity"] == 0
    assert any("no on-demand floor" in w for w in rec.warnings), rec.warnings


def test_multinode_replicas_are_wholly_on_demand_or_wholly_spot() -> None:
    plan = spot_plan("multinode", "p5.48xlarge", base=1, alternatives=[], replicas=2)
    rec = run(plan)
    groups = {g.name: g for g in rec.of_type(ASG)}
    assert len(groups) == 4  # two replicas, each a head group and a worker group
    for name, group in groups.items():
        replica = int(name.split("-r")[-1].split("-")[0])
        if replica == 0:  # the on-demand base: a plain launch template, no spot, no rebalancing
            assert "launchTemplate" in group.inputs and "mixedInstancesPolicy" not in group.inputs, name
            assert group.inputs["capacityRebalance"] is False, name
        else:  # spot, the planned type only (one EFA layout and placement group), no on-demand part
            policy = group.inputs["mixedInstancesPolicy"]
            assert policy["instancesDistribution"]["onDemandBaseCapacity"] == 0, name
            assert [o["instanceType"] for o in policy["launchTemplate"]["overrides"]] == ["p5.48xlarge"], name


def test_on_demand_plans_use_one_launch_template() -> None:
    rec = run(make_plan("single", "aws").model_copy(update={"deployment": make_plan("single", "aws").deployment
                                                            .model_copy(update={"instance_type": "g6e.2xlarge"})}))
    [group] = rec.of_type(ASG)
    assert "launchTemplate" in group.inputs and "mixedInstancesPolicy" not in group.inputs
    assert group.inputs["capacityRebalance"] is False
