"""Alibaba stacks with the real cloud-init renderer: the user data each instance gets is the plan's, secret-free,
small enough for ECS, and tells multi-node workers the head's fixed address."""

from __future__ import annotations

import base64

import pytest
import yaml

from infragen.provision.alicloud import USER_DATA_MAX_BYTES
from tests.plan_factory import SENTINEL_SECRET, make_plan
from tests.provision.test_alicloud_support import (
    SENTINEL_HF,
    AliRun,
    decoded_user_data,
    node_specs,
    real_renderer,
    run_alicloud,
)

KINDS = ["single", "packed", "tp", "multinode", "cpu"]


@pytest.fixture(scope="module", params=KINDS)
def rendered(request: pytest.FixtureRequest) -> tuple[str, AliRun]:
    plan = make_plan(request.param, "alicloud")
    return request.param, run_alicloud(plan, render=real_renderer())


def test_user_data_is_cloud_config_without_secrets(rendered: tuple[str, AliRun]) -> None:
    kind, run = rendered
    plan = make_plan(kind, "alicloud")  # type: ignore[arg-type]
    names = plan.secrets.for_stack("test")  # the mocks' stack
    specs = node_specs(run)  # fixed instances (multi-node) or the replica groups' launch template
    assert sum(spec.nodes for spec in specs) == plan.deployment.nodes
    for inst in (spec.resource for spec in specs):
        text = decoded_user_data(inst)
        assert text.startswith("#cloud-config"), inst.name
        assert isinstance(yaml.safe_load(text), dict), inst.name
        sent = len(base64.b64decode(inst.inputs["userData"]))  # ECS: 16 KB before Base64 (gzip above that)
        assert sent <= USER_DATA_MAX_BYTES, f"{inst.name}: {sent} bytes"
        assert SENTINEL_HF not in text and SENTINEL_SECRET not in text, f"{inst.name} user data carries a secret"
        # The node reads the secrets by the names the KMS secrets were created with: the stack's own.
        assert names.hf_token_name in text and names.api_key_name in text, inst.name
    kms_names = {r.inputs["secretName"] for r in run.of_type("kms/secret:Secret")}
    assert kms_names == {names.hf_token_name, names.api_key_name}


def test_multinode_workers_are_told_the_heads_fixed_address() -> None:
    plan = make_plan("multinode", "alicloud")
    run = run_alicloud(plan, render=real_renderer())
    instances = run.of_type("ecs/instance:Instance")
    (head,) = [i for i in instances if i.inputs["tags"]["infragen:role"] == "head"]
    head_ip = head.inputs["privateIp"]
    for inst in instances:
        assert head_ip in decoded_user_data(inst), f"{inst.name} does not know the head at {head_ip}"
    worker_text = decoded_user_data(next(i for i in instances if i is not head))
    head_text = decoded_user_data(head)
    assert worker_text != head_text, "head and worker got the same user data"
