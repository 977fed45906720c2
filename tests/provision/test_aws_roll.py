"""How a plan change rolls on AWS, under Pulumi mocks: single-node replicas by the group's instance refresh (the
launch hook holds each new node until it is ready); multi-node replicas one replica at a time, head and workers
together, by replacing the replica's groups (old ones first) after the previous replica's groups stand."""

from __future__ import annotations

from typing import Any

from infragen.plan import Plan
from infragen.provision.aws.compute import GENERATION_TAG, ROLL_TRIGGERS
from tests.plan_factory import make_plan
from tests.provision.test_aws_stack import ASG, run_aws


def _with(plan: Plan, **sections: dict[str, Any]) -> Plan:
    data = plan.model_dump(mode="json", exclude={"digest"})
    for section, fields in sections.items():
        data[section] = {**(data.get(section) or {}), **fields}
    return Plan.model_validate(data)


def test_multinode_replicas_roll_one_after_another_head_and_workers_together() -> None:
    plan = _with(make_plan("multinode", "aws"), deployment={"replicas": 3, "nodes": 6})
    rec = run_aws(plan)
    assert not rec.errors, rec.errors
    groups = {g.name: g for g in rec.of_type(ASG)}
    assert len(groups) == 6
    for name, group in groups.items():
        opts = rec.options[(ASG, name)]
        # Replaced, not refreshed in place: AWS's refresh can neither wait for the other group of the replica nor
        # for the previous replica, and the provider does not wait for a refresh to finish.
        assert "instanceRefresh" not in group.inputs, name
        assert opts.replace_on_changes == list(ROLL_TRIGGERS) and opts.delete_before_replace is True, name
        tags = {t["key"]: t for t in group.inputs["tags"]}
        replica = name.split("-r")[-1].split("-")[0]
        assert tags[GENERATION_TAG]["value"] == "head-v1-worker-v1", name  # the mock's launch template versions
        # Replica k waits for replica k-1's head and worker groups (the head's group stands once its node passed
        # readiness: the launch hook), and for nothing else.
        waited = {getattr(d, "_name", None) for d in opts.depends_on}
        previous = {n for n in groups if f"-r{int(replica) - 1}-" in n}
        assert waited == previous, (name, waited)


def test_single_node_replicas_and_a_lone_multinode_replica_refresh_in_place() -> None:
    """Single-node replicas: the refresh replaces nodes behind the launch hook. A lone multi-node replica has no
    other replica to serve while it rolls, so it keeps the in-place refresh (the head launches first and takes the
    address only when its Ray starts: a shorter outage than deleting the replica first)."""
    rec = run_aws(make_plan("single", "aws"))
    [group] = rec.of_type(ASG)
    refresh = group.inputs["instanceRefresh"]
    assert refresh["strategy"] == "Rolling" and refresh["preferences"]["minHealthyPercentage"] == 50
    assert group.inputs["initialLifecycleHooks"][0]["lifecycleTransition"] == "autoscaling:EC2_INSTANCE_LAUNCHING"
    lone = run_aws(make_plan("multinode", "aws"))
    assert len(lone.of_type(ASG)) == 2
    for r, g in [(rec, group), *((lone, g) for g in lone.of_type(ASG))]:
        opts = r.options[(ASG, g.name)]
        assert not opts.replace_on_changes and not opts.delete_before_replace and not opts.depends_on, g.name
        assert GENERATION_TAG not in {t["key"] for t in g.inputs["tags"]} and "instanceRefresh" in g.inputs


def _node_inputs(plan: Plan) -> dict[str, Any]:
    """What reaches the nodes: every launch template's user data and instance tags, every group's tags and how
    it is replaced (the real renderer: the user data carries the node digest)."""
    from infragen.provision.aws import build_aws
    from tests.provision.conftest import AWS_CALLS, AWS_COMPUTED, make_settings
    from tests.provision.mocks import run_program

    rec = run_program(lambda: build_aws(plan, make_settings()), call_results=AWS_CALLS, computed=AWS_COMPUTED)
    assert not rec.errors, rec.errors
    lts = {lt.name: (lt.inputs["userData"], lt.inputs["tagSpecifications"])
           for lt in rec.of_type("aws:ec2/launchTemplate:LaunchTemplate")}
    groups = {g.name: g.inputs["tags"] for g in rec.of_type(ASG)}
    return {"launch_templates": lts, "groups": groups}


def test_a_plan_change_that_does_not_change_the_nodes_rolls_nothing() -> None:
    """A price refresh (new costs, alternatives, bill) changes the plan digest but not what a node runs: no launch
    template version, no instance refresh, no replaced multi-node replica. A node change (the engine's argv) rolls."""
    for kind in ("single", "multinode"):
        plan = make_plan(kind, "aws")
        repriced = _with(plan, cost={"usd_per_month": plan.cost.usd_per_month * 1.25})
        repriced = repriced.model_copy(update={"alternatives": []})
        assert repriced.digest != plan.digest
        assert _node_inputs(repriced) == _node_inputs(plan), kind
        changed = _with(plan, engine={"argv": [*plan.engine.argv, "--max-num-batched-tokens", "4096"]})
        assert _node_inputs(changed)["launch_templates"] != _node_inputs(plan)["launch_templates"], kind
