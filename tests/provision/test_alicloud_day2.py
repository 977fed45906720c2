"""Alibaba day-2 and data-path rules under mocks: a user-data change replaces instances (replica after replica,
heads delete-before-replace), oversized user data goes gzip-compressed, the node role reads only its OSS prefix."""

from __future__ import annotations

import base64
import gzip
import json
import random
from typing import Any

import pytest

from infragen.plan import Plan
from infragen.provision.alicloud.compute import encode_user_data
from infragen.provision.alicloud.secrets import node_policy
from tests.plan_factory import make_plan
from tests.provision.test_alicloud_support import real_renderer, run_alicloud

INSTANCE = "alicloud:ecs/instance:Instance"


def _with(plan: Plan, **sections: dict[str, Any]) -> Plan:
    data = plan.model_dump(mode="json", exclude={"digest"})
    for section, fields in sections.items():
        data[section] = {**(data.get(section) or {}), **fields}
    return Plan.model_validate(data)


def test_a_user_data_change_replaces_instances_one_replica_after_another() -> None:
    plan = _with(make_plan("multinode", "alicloud"), deployment={"replicas": 2, "nodes": 4})
    run = run_alicloud(plan)
    options = {name: opts for (typ, name), opts in run.recording.options.items() if typ == INSTANCE}
    assert len(options) == 4
    names = {r.name: r for r in run.of_type("ecs/instance:Instance")}
    for name, opts in options.items():
        assert opts.replace_on_changes == ["userData"], name
        # A head keeps its fixed private IP, so the old one must go before the new one takes the address.
        assert bool(opts.delete_before_replace) == ("privateIp" in names[name].inputs), name
    # Replica 1's nodes wait for replica 0's: a change rolls replica by replica, never all at once.
    r1 = [opts for name, opts in options.items() if "-r1-" in name]
    r0_urns = {n for n in options if "-r0-" in n}
    for opts in r1:
        waited = {getattr(d, "_name", None) for d in opts.depends_on if hasattr(d, "_name")}
        assert r0_urns <= waited, waited
    for name, opts in options.items():
        if "-r0-" in name:  # the first replica waits for no other replica
            assert not any("-r1-" in str(getattr(d, "_name", "")) for d in opts.depends_on), name


def test_oversized_user_data_is_sent_gzip_compressed_and_stable() -> None:
    small = "#cloud-config\nruncmd: []\n"
    assert base64.b64decode(encode_user_data(small)).decode() == small
    big = "#cloud-config\n" + "".join(f"# line {i} of a long document\n" for i in range(800))
    encoded = encode_user_data(big)
    raw = base64.b64decode(encoded)
    assert raw[:2] == b"\x1f\x8b" and len(raw) <= 16 * 1024 and gzip.decompress(raw).decode() == big
    assert encode_user_data(big) == encoded, "gzip output must not change between runs (mtime=0)"
    noise = base64.b64encode(random.Random(0).randbytes(20000)).decode()  # incompressible
    with pytest.raises(ValueError, match="even gzip-compressed"):
        encode_user_data("#cloud-config\n# " + noise)


def test_every_real_alibaba_user_data_reaches_the_instance_intact() -> None:
    from tests.provision.test_alicloud_support import decoded_user_data

    plan = make_plan("multinode", "alicloud")
    run = run_alicloud(plan, render=real_renderer())
    for inst in run.of_type("ecs/instance:Instance"):
        assert len(base64.b64decode(inst.inputs["userData"])) <= 16 * 1024
        assert decoded_user_data(inst).startswith("#cloud-config"), inst.name


def test_node_role_reads_exactly_the_weights_prefix() -> None:
    arns = ["acs:kms:cn-beijing:42:secret/a", "acs:kms:cn-beijing:42:secret/b"]
    statements = json.loads(node_policy(arns, key_id="key-1", bucket="models-bj", prefix="qwen2/7b/"))["Statement"]
    by_action = {tuple(s["Action"]): s for s in statements}
    assert by_action[("kms:Decrypt",)]["Resource"] == ["acs:kms:cn-beijing:42:key/key-1"]
    assert by_action[("oss:GetObject",)]["Resource"] == ["acs:oss:*:*:models-bj/qwen2/7b/*"]
    listing = by_action[("oss:ListObjects",)]
    assert listing["Resource"] == ["acs:oss:*:*:models-bj"]
    assert listing["Condition"] == {"StringLike": {"oss:Prefix": ["qwen2/7b/*"]}}
    assert not any(a.startswith("oss:") and a not in {"oss:GetObject", "oss:ListObjects"}
                   for s in statements for a in s["Action"])
    # No OSS statement at all when the weights do not come from OSS.
    assert all(not a.startswith("oss:") for s in json.loads(node_policy(arns))["Statement"] for a in s["Action"])


def test_an_oss_plan_grants_its_bucket_prefix_to_the_node_role() -> None:
    plan = make_plan("single", "alicloud")
    argv = list(plan.engine.argv)
    argv[2] = "/opt/models/qwen2-7b"
    plan = _with(plan, model={"weights_source": "oss", "weights_uri": "oss://models-hz/qwen2-7b"},
                 engine={"argv": argv})
    run = run_alicloud(plan)
    (policy,) = run.of_type("ram/policy:Policy")
    text = policy.inputs["policyDocument"]
    assert "acs:oss:*:*:models-hz/qwen2-7b/*" in text and '"oss:ListObjects"' in text
    actions = {a for st in json.loads(text)["Statement"] for a in st["Action"]}
    assert actions == {"kms:GetSecretValue", "kms:Decrypt", "oss:GetObject", "oss:ListObjects"}
