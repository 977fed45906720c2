"""Replicas spread over two zones when there are two (issue 15), on both clouds, including a fleet whose autoscaling
floor is one node: AWS's one group spans both node subnets (EC2 Auto Scaling balances its zones); on Alibaba a
scheduled fleet gets a second group, empty in the quiet hours and filled by its scheduled tasks; a fleet that only
target-tracks stays one ESS group (an empty group never scales out; PRIORITY, which instance refresh needs, fills
the first zone), so the preview says so and how to get two groups."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from infragen.plan import Plan
from infragen.provision.alicloud.autoscaling import fleet_bounds, group_count, one_zone_warning
from infragen.sizing import plan_file
from tests.plan_factory import make_plan
from tests.provision.test_alicloud_autoscaling import DAILY, GROUP, TASK
from tests.provision.test_alicloud_support import run_alicloud
from tests.provision.test_aws_placement import SUBNET, run

TODAY = date(2026, 12, 3)


def _floor_one(tmp_path: Path, cloud: str, *, average: bool = False) -> Plan:
    """The Beijing working day at 8 requests/s with min_replicas 1: one node at night, five at the peak (with
    `average`: 2 requests/s on average instead of the profile, so the fleet only target-tracks)."""
    text = DAILY.replace("min_replicas: 2", "min_replicas: 1").replace("peak_requests_per_s: 25",
                                                                     "peak_requests_per_s: 8")
    if average:
        start = text.index("  # hour 0") if "  # hour 0" in text else text.index("  hourly_profile")
        end = text.index("  time_zone")
        text = text[:start] + "  average_requests_per_s: 2\n" + text[end:]
    if cloud == "aws":
        text = (text.replace("cloud: alicloud", "cloud: aws").replace("regions: [cn-beijing]", "regions: [us-east-1]")
                .replace("modelscope://qwen/Qwen2-7B-Instruct-AWQ", "Qwen/Qwen2-7B-Instruct-AWQ"))
    path = tmp_path / f"floor-one-{cloud}.yaml"
    path.write_text(text)
    plan = plan_file(path)
    assert plan.scaling is not None and plan.deployment.nodes >= 2
    return plan


def test_aws_one_group_over_two_zones_even_with_a_floor_of_one(tmp_path: Path) -> None:
    plan = _floor_one(tmp_path, "aws")
    assert min(plan.scaling.replicas_by_hour or [0]) == 1  # type: ignore[union-attr]
    rec = run(plan)
    (group,) = rec.of_type("aws:autoscaling/group:Group")
    zone_of = {f"{s.name}-id": s.inputs["availabilityZoneId"] for s in rec.of_type(SUBNET)}
    assert len({zone_of[x] for x in group.inputs["vpcZoneIdentifiers"]}) == 2
    assert group.inputs["minSize"] == 1 and group.inputs["maxSize"] >= 2
    assert not [w for w in rec.warnings if "one zone" in w]


def test_alibaba_scheduled_floor_of_one_gets_a_second_group_filled_by_the_schedule(tmp_path: Path) -> None:
    plan = _floor_one(tmp_path, "alicloud")
    low, high, _ = fleet_bounds(plan)
    assert (low, group_count(plan, 3)) == (1, 2) and plan.scaling.strategy == "scheduled"  # type: ignore[union-attr]
    result = run_alicloud(plan, today=TODAY)
    groups = sorted(result.recording.of_type(GROUP), key=lambda g: g.name)
    assert [g.inputs["minSize"] for g in groups] == [1, 0]
    assert sum(g.inputs["maxSize"] for g in groups) == high
    switches = {f"{s.name}-id": s.inputs["zoneId"] for s in result.of_type("vpc/switch:Switch") if "-nodes-" in s.name}
    assert switches[groups[0].inputs["vswitchIds"][0]] != switches[groups[1].inputs["vswitchIds"][0]]
    # The second group's nodes come from the schedule: its floor reaches one node or more in the busy hours.
    tasks = [t for t in result.recording.of_type(TASK) if t.inputs["scalingGroupId"] == f"{groups[1].name}-id"]
    assert max(t.inputs["minValue"] for t in tasks) >= 1 and min(t.inputs["minValue"] for t in tasks) == 0
    assert not [w for w in result.recording.warnings if "one scaling group" in w]


def test_alibaba_target_tracked_floor_of_one_is_one_group_and_the_preview_says_so(tmp_path: Path) -> None:
    plan = _floor_one(tmp_path, "alicloud", average=True)
    low, high, _ = fleet_bounds(plan)
    assert (low, group_count(plan, 3)) == (1, 1) and high >= 2
    result = run_alicloud(plan, today=TODAY)
    (group,) = result.recording.of_type(GROUP)
    assert group.inputs["multiAzPolicy"] == "PRIORITY" and len(group.inputs["vswitchIds"]) == 3
    warned = [w for w in result.recording.warnings if "so it is one scaling group" in w]
    assert warned and "min_replicas: 2" in warned[0] and f"up to {high}" in warned[0]


@pytest.mark.parametrize("kind", ["single", "tp"])
def test_no_warning_when_two_groups_spread_or_one_node_is_all_there_is(kind: str) -> None:
    plan = make_plan(kind, "alicloud")  # single: two fixed nodes in two groups; tp: one node
    assert one_zone_warning(plan, 3) is None
    assert not [w for w in run_alicloud(plan, today=TODAY).recording.warnings if "one scaling group" in w]
    assert one_zone_warning(make_plan("single", "alicloud"), 1) is None  # one zone slot: nothing to spread over
