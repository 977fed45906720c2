"""Alibaba replica groups under Pulumi mocks: single-node replicas in ESS scaling groups (a failed node is replaced
without `pulumi up`), spread over two zones with fallback zones, rolled by an instance refresh when the launch template
changes, and scaled from the plan's daily view: bounds, the ALB QPS target and the profile's scheduled tasks in UTC,
each checked against the plan (and the bounds against the AWS program's derivation)."""

from __future__ import annotations

import math
from datetime import date
from pathlib import Path

import pytest

from infragen.plan import Plan
from infragen.provision.alicloud.autoscaling import (
    fleet_bounds,
    group_shares,
    keeps_offset,
    schedule_window,
    scheduled_steps,
    split,
    utc_offset_minutes,
)
from infragen.provision.aws.autoscaling import group_bounds, scheduled_actions
from infragen.sizing import plan_file
from tests.plan_factory import make_plan
from tests.provision.test_alicloud_support import TEMPLATE, ZONES, AliRun, run_alicloud

GROUP = "alicloud:ess/scalingGroup:ScalingGroup"
RULE = "alicloud:ess/scalingRule:ScalingRule"
TASK = "alicloud:ess/scheduledTask:ScheduledTask"
HOOK = "alicloud:ess/lifecycleHook:LifecycleHook"
REFRESH = "alicloud:ess/instanceRefresh:InstanceRefresh"
TODAY = date(2026, 12, 3)
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# The mainland example's shape with a working day in Beijing (Asia/Shanghai: UTC+8 all year, no DST).
DAILY = """\
name: ali-daily
model: qwen2-7b
precision: int4-awq
weights: modelscope://qwen/Qwen2-7B-Instruct-AWQ
traffic:
  peak_requests_per_s: 25
  prompt_tokens: 1024
  output_tokens: 256
  max_context_tokens: 32768
  hourly_profile: [0.1, 0.1, 0.1, 0.1, 0.1, 0.15, 0.25, 0.4, 0.6, 0.8, 0.9, 1.0,
                   1.0, 0.95, 0.9, 0.9, 0.85, 0.8, 0.6, 0.45, 0.35, 0.25, 0.2, 0.15]
  time_zone: Asia/Shanghai
slo:
  ttft_p99_ms: 2000
  tpot_ms: 60
cloud: alicloud
regions: [cn-beijing]
min_replicas: 2
"""


@pytest.fixture(scope="module")
def daily(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    path = tmp_path_factory.mktemp("ali-daily") / "ali-daily.yaml"
    path.write_text(DAILY)
    plan = plan_file(path)
    assert plan.scaling is not None and plan.scaling.strategy == "scheduled" and plan.deployment.nodes >= 2
    return plan


@pytest.fixture(scope="module")
def daily_run(daily: Plan) -> AliRun:
    return run_alicloud(daily, today=TODAY)


def test_the_fleet_bounds_are_the_plans_and_mirror_aws(daily: Plan) -> None:
    sc = daily.scaling
    assert sc is not None and sc.replicas_by_hour is not None
    low, high, desired = fleet_bounds(daily)
    assert (low, high, desired) == (min(sc.replicas_by_hour), sc.max_replicas, daily.deployment.nodes)
    # The AWS program derives the same bounds from the same plan (one replica per node here).
    assert (low, high, desired) == group_bounds(daily, daily.deployment.nodes)
    packed = make_plan("packed", "alicloud")  # no daily view: a fixed fleet
    assert fleet_bounds(packed) == (packed.deployment.nodes,) * 3


def test_replicas_live_in_two_scaling_groups_that_add_up_to_the_plan(daily: Plan, daily_run: AliRun) -> None:
    low, high, desired = fleet_bounds(daily)
    groups = sorted(daily_run.recording.of_type(GROUP), key=lambda g: g.name)
    assert len(groups) == 2, "a fleet that never drops below two nodes spreads over two zones"
    assert sum(g.inputs["minSize"] for g in groups) == low
    assert sum(g.inputs["maxSize"] for g in groups) == high
    assert sum(g.inputs["desiredCapacity"] for g in groups) == desired
    assert all(g.inputs["minSize"] >= 1 for g in groups), "an empty group would never scale out again"
    # No fixed instance: every serving node comes from the template, so ESS can replace a failed one.
    assert not daily_run.recording.of_type("alicloud:ecs/instance:Instance")
    (template,) = daily_run.recording.of_type(TEMPLATE)
    for g in groups:
        assert g.inputs["launchTemplateId"] == f"{template.name}-id" and g.inputs["launchTemplateVersion"] == "Latest"
        assert g.inputs["healthCheckTypes"] == ["ECS"], "a stopped or failed node is replaced"
        assert g.inputs["multiAzPolicy"] == "PRIORITY"  # instance refresh needs it (StartInstanceRefresh doc)
    # The scaler owns the size: a later `pulumi up` must not reset it to the peak.
    opts = {name: o for (typ, name), o in daily_run.recording.options.items() if typ == GROUP}
    assert all(o.ignore_changes == ["desired_capacity"] for o in opts.values())
    # ESS adds the nodes to the server group: the program must not remove them at its next update.
    (server_group,) = [o for (typ, _), o in daily_run.recording.options.items()
                       if typ == "alicloud:alb/serverGroup:ServerGroup"]
    assert server_group.ignore_changes == ["servers"]


def test_groups_prefer_two_zones_and_fall_back_to_every_other(daily_run: AliRun) -> None:
    switches = {f"{s.name}-id": s.inputs["zoneId"]
                for s in daily_run.of_type("vpc/switch:Switch") if "-nodes-" in s.name}
    assert sorted(switches.values()) == sorted(ZONES), "a vSwitch in every zone offering the type (up to three)"
    groups = sorted(daily_run.recording.of_type(GROUP), key=lambda g: g.name)
    orders = [[switches[v] for v in g.inputs["vswitchIds"]] for g in groups]
    assert orders[0][0] != orders[1][0], "the two groups live in two zones"
    assert all(sorted(order) == sorted(ZONES) for order in orders), "each falls back to the other zones"


def test_target_tracking_holds_the_plans_qps_per_engine(daily: Plan, daily_run: AliRun) -> None:
    sc = daily.scaling
    assert sc is not None
    rules = daily_run.recording.of_type(RULE)
    groups = {f"{g.name}-id" for g in daily_run.recording.of_type(GROUP)}
    (server_group,) = daily_run.of_type("alb/serverGroup:ServerGroup")
    assert {r.inputs["scalingGroupId"] for r in rules} == groups
    for rule in rules:
        assert rule.inputs["scalingRuleType"] == "TargetTrackingScalingRule"
        assert rule.inputs["metricName"] == "LoadBalancerRealServerAverageQps"
        assert rule.inputs["targetValue"] == pytest.approx(sc.target_requests_per_s_per_replica, abs=1e-3)
        assert rule.inputs["alarmDimension"] == {"dimensionKey": "rulePool",
                                                 "dimensionValue": f"{server_group.name}-id"}
        assert rule.inputs["estimatedInstanceWarmup"] == daily.network.health_check_grace_s


def test_new_nodes_wait_the_plans_boot_time_before_they_count(daily: Plan, daily_run: AliRun) -> None:
    hooks = daily_run.recording.of_type(HOOK)
    assert len(hooks) == 2
    for hook in hooks:
        assert hook.inputs["lifecycleTransition"] == "SCALE_OUT" and hook.inputs["defaultResult"] == "CONTINUE"
        assert hook.inputs["heartbeatTimeout"] == min(21600, daily.network.health_check_grace_s)


def test_scheduled_tasks_follow_the_profile_in_utc(daily: Plan, daily_run: AliRun) -> None:
    sc = daily.scaling
    assert sc is not None and sc.replicas_by_hour is not None
    steps = scheduled_steps(daily, TODAY)
    changes = sum(sc.replicas_by_hour[h] != sc.replicas_by_hour[h - 1] for h in range(24))
    assert len(steps) == changes > 0
    tasks = daily_run.recording.of_type(TASK)
    assert len(tasks) == 2 * len(steps)
    lead = math.ceil(sc.boot.total_s / 60)
    start, end = schedule_window(TODAY)
    assert (start, end) == ("2026-12-04T00:00Z", "2027-12-01T00:00:00Z")
    for step in steps:
        hour, direction = int(step.name.split("-")[1]), step.name.split("-")[2]
        local = hour * 60 - (lead if direction == "up" else 0)
        assert step.utc_minute == (local - 8 * 60) % 1440, step.name  # Beijing is UTC+8
        mine = [t.inputs for t in tasks if t.name.endswith(step.name)]
        assert len(mine) == 2 and {t["recurrenceValue"] for t in mine} == {step.cron}
        assert sum(t["minValue"] for t in mine) == step.nodes == sum(t["desiredCapacity"] for t in mine)
        assert all(t["recurrenceType"] == "Cron" and t["launchTime"] == start and t["recurrenceEndTime"] == end
                   for t in mine)
    assert not any("UTC offset" in w for w in daily_run.recording.warnings)


def test_a_zone_with_daylight_saving_time_warns_and_converts_on_the_day() -> None:
    aws_daily = plan_file(PROJECT_ROOT / "examples" / "daily-chatbot.yaml")  # Europe/Berlin
    assert not keeps_offset("Europe/Berlin", 2026) and keeps_offset("Asia/Shanghai", 2026)
    winter, summer = date(2026, 1, 15), date(2026, 7, 15)
    assert (utc_offset_minutes("Europe/Berlin", winter), utc_offset_minutes("Europe/Berlin", summer)) == (60, 120)
    up = {s.name: s for s in scheduled_steps(aws_daily, winter)}["hour-07-up-3"]
    # Same local time as the AWS action (cron 45 6 in Europe/Berlin), one hour earlier in UTC in winter.
    aws = {a.name: a for a in scheduled_actions(aws_daily)}["hour-07-up-3"]
    assert aws.recurrence == "45 6 * * *" and up.cron == "45 5 * * *"


def test_a_fixed_fleet_gets_no_rules_and_no_tasks() -> None:
    plan = make_plan("single", "alicloud")
    run = run_alicloud(plan, today=TODAY)
    groups = run.recording.of_type(GROUP)
    assert sum(g.inputs["desiredCapacity"] for g in groups) == plan.deployment.nodes == 2
    assert len(groups) == 2 and all(g.inputs["minSize"] == g.inputs["maxSize"] == 1 for g in groups)
    assert not run.recording.of_type(RULE) and not run.recording.of_type(TASK)
    assert not run.exports["autoscaling_resources"]


def test_one_node_fleets_use_one_group_with_fallback_zones() -> None:
    plan = make_plan("tp", "alicloud")
    (group,) = run_alicloud(plan).recording.of_type(GROUP)
    assert group.inputs["minSize"] == group.inputs["maxSize"] == group.inputs["desiredCapacity"] == 1
    assert len(group.inputs["vswitchIds"]) == 3


def test_a_changed_launch_template_rolls_each_group_one_node_at_a_time() -> None:
    plan = make_plan("single", "alicloud")
    fresh = run_alicloud(plan)
    assert not fresh.recording.of_type(REFRESH), "a new group has nothing to refresh"
    updated = run_alicloud(plan, computed={TEMPLATE: lambda i, n: {"latestVersionNumber": 2}})
    refreshes = updated.recording.of_type(REFRESH)
    groups = {f"{g.name}-id": g.inputs for g in updated.recording.of_type(GROUP)}
    (template,) = updated.recording.of_type(TEMPLATE)
    assert {r.inputs["scalingGroupId"] for r in refreshes} == set(groups)
    for refresh in refreshes:
        inputs = refresh.inputs
        assert inputs["desiredConfigurationLaunchTemplateId"] == f"{template.name}-id"
        assert inputs["desiredConfigurationLaunchTemplateVersion"] == "2" and inputs["skipMatching"] is True
        # Never below capacity; one node above it at the group's floor (1 node: 200 %).
        floor = groups[inputs["scalingGroupId"]]["minSize"]
        assert inputs["minHealthyPercentage"] == 100
        assert inputs["maxHealthyPercentage"] == min(200, 100 + math.ceil(100 / floor))
        assert math.floor(floor * (inputs["maxHealthyPercentage"] - 100) / 100) == 1


def test_an_nlb_fleet_scales_on_its_schedule_only(daily: Plan) -> None:
    data = daily.model_dump(mode="json", exclude={"digest"})
    data["network"] = {**data["network"], "load_balancer": "nlb"}
    plan = Plan.model_validate(data)
    run = run_alicloud(plan, today=TODAY)
    assert not run.recording.of_type(RULE) and run.recording.of_type(TASK)
    assert any("NLB reports no per-server QPS" in w for w in run.recording.warnings)


def test_split_adds_up() -> None:
    for total in range(0, 30):
        for groups in (1, 2):
            parts = split(total, groups)
            assert sum(parts) == total and max(parts) - min(parts) <= 1
    assert [s.min_size for s in group_shares(make_plan("single", "alicloud"), 3)] == [1, 1]


def test_names_that_are_unique_in_a_region_carry_the_stack() -> None:
    """Two stacks of one workload in one region: launch templates and scaling groups must not collide, and every
    name stays within Alibaba's limits (scaling group 64, template 128 characters) even for a long stack name."""
    from infragen.provision.alicloud import AlicloudOptions, build_alicloud
    from infragen.provision.common import stack_slug
    from tests.provision.mocks import run_program
    from tests.provision.test_alicloud_support import COMPUTED, call_results, make_settings

    plan = make_plan("single", "alicloud")
    for stack in ("test", "a-very-long-stack-name-for-the-production-deployment-of-2027"):
        def program() -> dict[str, object]:
            return build_alicloud(plan, make_settings(), render=lambda *a, **k: "#cloud-config\nruncmd: []\n",
                                  options=AlicloudOptions(kms_instance_id="kst-1", kms_key_id="key-1"), today=TODAY)

        rec = run_program(program, call_results=call_results(ZONES), computed=COMPUTED, stack=stack)
        (template,) = rec.of_type(TEMPLATE)
        groups = rec.of_type(GROUP)
        assert stack_slug(stack) in template.inputs["launchTemplateName"]
        assert all(stack_slug(stack) in g.inputs["scalingGroupName"] for g in groups)
        assert all(len(g.inputs["scalingGroupName"]) <= 64 for g in groups)
        assert len(template.inputs["hostName"]) <= 64 and not template.inputs["hostName"].endswith("-")
