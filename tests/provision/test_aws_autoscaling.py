"""AWS autoscaling from the plan's daily view, under Pulumi mocks: the replica group's bounds, one ALB request-count
target tracking policy per target group with the plan's target per minute, and the profile's scheduled actions."""

from __future__ import annotations

import math

import pytest

from infragen.plan import Plan
from infragen.provision.aws.autoscaling import group_bounds, scheduled_actions, target_requests_per_minute
from infragen.provision.aws.layout import POST_HOOK_GRACE_S
from infragen.sizing import plan_file
from tests.plan_factory import make_plan
from tests.provision.conftest import PROJECT_ROOT
from tests.provision.test_aws_stack import ASG, TG, run_aws

POLICY = "aws:autoscaling/policy:Policy"
SCHEDULE = "aws:autoscaling/schedule:Schedule"


@pytest.fixture(scope="module")
def daily() -> Plan:
    return plan_file(PROJECT_ROOT / "examples" / "daily-chatbot.yaml")


def test_the_replica_group_scales_between_the_plans_bounds(daily: Plan) -> None:
    sc = daily.scaling
    assert sc is not None and sc.replicas_by_hour is not None and sc.strategy == "scheduled"
    rec = run_aws(daily)
    assert not rec.errors, rec.errors
    [group] = rec.of_type(ASG)
    assert group.inputs["minSize"] == min(sc.replicas_by_hour)  # one replica per node
    assert group.inputs["maxSize"] == sc.max_replicas and group.inputs["desiredCapacity"] == daily.deployment.nodes
    policies = rec.of_type(POLICY)
    assert len(policies) == len(rec.of_type(TG)) == 1
    tt = policies[0].inputs["targetTrackingConfiguration"]
    assert tt["targetValue"] == pytest.approx(sc.target_requests_per_s_per_replica * 60, abs=0.01)
    metric = tt["predefinedMetricSpecification"]
    assert metric["predefinedMetricType"] == "ALBRequestCountPerTarget"
    assert metric["resourceLabel"].endswith(rec.of_type(TG)[0].name)
    assert policies[0].inputs["estimatedInstanceWarmup"] == POST_HOOK_GRACE_S  # the hook held it through the boot
    schedules = rec.of_type(SCHEDULE)
    assert len(schedules) == len(scheduled_actions(daily)) > 0
    assert {s.inputs["timeZone"] for s in schedules} == {"Europe/Berlin"}
    assert all(s.inputs["maxSize"] == sc.max_replicas for s in schedules)


def test_scale_ups_start_one_boot_time_before_their_hour(daily: Plan) -> None:
    sc = daily.scaling
    assert sc is not None and sc.replicas_by_hour is not None
    actions = {a.name: a for a in scheduled_actions(daily)}
    lead = math.ceil(sc.boot.total_s / 60)  # 15 minutes
    # The example rises from 2 to 3 replicas at hour 7 and falls from 3 to 2 in the evening (hour 21 since the
    # open-loop load model sized the per-replica rate); scale-downs happen on the hour.
    up = actions["hour-07-up-3"]
    assert up.recurrence == f"{(7 * 60 - lead) % 60} {(7 * 60 - lead) // 60} * * *" == "45 6 * * *"
    assert up.min_size == up.desired_capacity == 3
    down = next(h for h in range(8, 24) if sc.replicas_by_hour[h - 1] == 3 and sc.replicas_by_hour[h] == 2)
    assert actions[f"hour-{down:02d}-down-2"].recurrence == f"0 {down} * * *"
    changes = sum(sc.replicas_by_hour[h] != sc.replicas_by_hour[h - 1] for h in range(24))
    assert len(actions) == changes


def test_target_tracking_only_and_fixed_groups() -> None:
    fixed = make_plan("single", "aws")
    assert fixed.scaling is None and group_bounds(fixed, 3) == (3, 3, 3)
    assert target_requests_per_minute(fixed) is None and scheduled_actions(fixed) == []
    multinode = make_plan("multinode", "aws")
    assert group_bounds(multinode, 2) == (2, 2, 2)


def test_a_plan_without_a_daily_view_creates_no_scaling_resources() -> None:
    rec = run_aws(make_plan("single", "aws"))
    assert not rec.errors and rec.of_type(POLICY) == [] and rec.of_type(SCHEDULE) == []
