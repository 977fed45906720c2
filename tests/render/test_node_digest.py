"""The user data names its node digest (what the node runs), not the plan digest: a plan change that leaves every
rendered file the same (a price refresh, other alternatives, the bill) leaves every node's user data byte for byte
the same on both clouds, so no launch template version, instance refresh or replacement follows from it."""

from __future__ import annotations

import re

import pytest

from infragen.plan import Plan
from infragen.render import render_all
from infragen.render.cloud_init import node_digest
from tests.plan_factory import make_plan


def _repriced(plan: Plan) -> Plan:
    data = plan.model_dump(mode="json", exclude={"digest"})
    data["cost"] = {**data["cost"], "usd_per_month": data["cost"]["usd_per_month"] * 1.25}
    data["alternatives"] = []
    return Plan.model_validate(data)


@pytest.mark.parametrize("cloud", ["aws", "alicloud"])
@pytest.mark.parametrize("kind", ["single", "multinode", "cpu"])
def test_a_price_refresh_leaves_every_node_s_user_data_the_same(kind: str, cloud: str) -> None:
    plan = make_plan(kind, cloud)
    repriced = _repriced(plan)
    assert repriced.digest != plan.digest
    before, after = render_all(plan), render_all(repriced)
    assert before == after
    for role, text in before.items():
        [named] = re.findall(r"^# infragen \S+ \S+ role \S+ node ([0-9a-f]{16}): generated", text, re.M)
        assert named == node_digest(text.replace(named, "NODEDIGESTxSLOTx")), role
        assert plan.digest not in text and ("DIGEST=" not in text or f"DIGEST={named}" in text), role


def test_a_node_change_changes_the_node_digest() -> None:
    plan = make_plan("single", "aws")
    data = plan.model_dump(mode="json", exclude={"digest"})
    data["engine"]["argv"] = [*data["engine"]["argv"], "--max-num-batched-tokens", "4096"]
    changed = Plan.model_validate(data)
    [a], [b] = (re.findall(r"role replica node ([0-9a-f]{16})", render_all(p)["replica.yaml"]) for p in (plan, changed))
    assert a != b
