"""Pure AWS layout and shared provisioning helpers: subnets, head IPs, EFA interfaces, LB ports, images,
user-data encoding, names and the user-data checks (no Pulumi involved)."""

from __future__ import annotations

import base64
import gzip
import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infragen.errors import InputError
from infragen.plan import Plan
from infragen.provision.aws.layout import (
    AZ_COUNT,
    USER_DATA_MAX_BYTES,
    efa_interfaces,
    encode_user_data,
    idle_timeout_s,
    image_parameter,
    replica_groups,
    subnet_cidrs,
    target_ports,
    weights_bucket,
)
from infragen.provision.common import (
    NAME_STEM_MAX_CHARS,
    SecretLeakError,
    check_secret_free,
    check_user_data,
    name_stem,
    plan_tags,
)
from tests.plan_factory import make_plan

private_vpcs = st.builds(
    lambda base, prefix: str(ipaddress.IPv4Network(f"{base}/{prefix}", strict=False)),
    st.sampled_from(["10.0.0.0", "10.200.0.0", "172.16.0.0", "192.168.0.0"]), st.integers(16, 20),
)


def with_updates(plan: Plan, part: str, **changes: object) -> Plan:
    return plan.model_copy(update={part: getattr(plan, part).model_copy(update=changes)})


@given(private_vpcs)
def test_subnets_are_disjoint_and_inside_the_vpc(vpc_cidr: str) -> None:
    vpc = ipaddress.IPv4Network(vpc_cidr)
    subnets = subnet_cidrs(vpc_cidr)
    nets = [ipaddress.IPv4Network(c) for c in subnets.private + subnets.public]
    assert len(subnets.private) == len(subnets.public) == AZ_COUNT
    assert all(n.subnet_of(vpc) for n in nets)
    assert all(not a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1:])


@given(private_vpcs, st.integers(1, 5))
def test_head_ips_are_distinct_and_in_their_subnet(vpc_cidr: str, replicas: int) -> None:
    base = make_plan("multinode", "aws")
    plan = with_updates(base, "deployment", replicas=replicas, nodes=replicas * base.deployment.nodes_per_replica)
    subnets = subnet_cidrs(vpc_cidr)
    groups = replica_groups(plan, subnets)
    assert len(groups) == replicas
    assert len({g.head_ip for g in groups}) == replicas
    for g in groups:
        net = ipaddress.IPv4Network(subnets.private[g.az_index])
        ip = ipaddress.IPv4Address(g.head_ip)
        assert ip in net and ip not in list(net.hosts())[:3]  # AWS reserves the first addresses
        assert g.workers == plan.deployment.nodes_per_replica - 1


def test_inconsistent_node_count_is_rejected() -> None:
    plan = with_updates(make_plan("multinode", "aws"), "deployment", nodes=3)
    with pytest.raises(InputError, match="inconsistent"):
        replica_groups(plan, subnet_cidrs("10.40.0.0/16"))


def test_single_node_plans_have_no_replica_groups() -> None:
    assert replica_groups(make_plan("packed", "aws"), subnet_cidrs("10.40.0.0/16")) == []


@pytest.mark.parametrize("count", [1, 4, 32])
def test_efa_layout_one_interface_per_card(count: int) -> None:
    plan = with_updates(make_plan("multinode", "aws"), "network", efa_interfaces=count)
    slots = efa_interfaces(plan)
    assert [s.network_card_index for s in slots] == list(range(count))
    assert all(s.device_index == 0 for s in slots)
    assert slots[0].interface_type == "efa"
    assert [s.interface_type for s in slots[1:]] == ["efa-only"] * (count - 1)


def test_no_efa_means_one_plain_interface() -> None:
    (slot,) = efa_interfaces(make_plan("single", "aws"))
    assert slot.interface_type == "interface" and slot.network_card_index == 0


def test_target_ports_follow_packing() -> None:
    assert target_ports(make_plan("packed", "aws")) == [8000, 8001, 8002, 8003]
    assert target_ports(make_plan("tp", "aws")) == [8000]


def test_packed_ports_are_not_capped_by_the_alb_action_limit() -> None:
    """One target group holds every engine port (instance + port targets), so neither the 5 target groups an ALB
    action takes nor an NLB's one target group per listener limits the packing."""
    plan = with_updates(make_plan("packed", "aws"), "deployment", replicas_per_node=8)
    assert target_ports(plan) == list(range(8000, 8008))
    nlb = with_updates(plan, "network", load_balancer="nlb")
    assert target_ports(nlb) == list(range(8000, 8008))


def test_image_parameter_by_accelerator_and_arch() -> None:
    gpu = image_parameter(make_plan("single", "aws"))
    assert gpu == "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
    cpu_arm = with_updates(make_plan("cpu", "aws"), "deployment", cpu_arch="arm64")
    assert image_parameter(cpu_arm).startswith("/aws/service/canonical/ubuntu/server/22.04/stable/current/arm64/")


def test_small_user_data_is_plain_base64() -> None:
    text = "#cloud-config\nruncmd: [[echo, hi]]\n"
    assert base64.b64decode(encode_user_data(text)).decode() == text


def test_large_user_data_is_gzipped_deterministically() -> None:
    text = "#cloud-config\n" + "".join(f"# line {i} of padding for the size limit\n" for i in range(1000))
    assert len(text.encode()) > USER_DATA_MAX_BYTES
    encoded = encode_user_data(text)
    assert encoded == encode_user_data(text)
    assert gzip.decompress(base64.b64decode(encoded)).decode() == text


def test_incompressible_oversized_user_data_is_rejected() -> None:
    import random

    rng = random.Random(0)
    text = "#cloud-config\n# " + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(40000))
    with pytest.raises(InputError, match="16 KB"):
        encode_user_data(text)


def test_weights_bucket() -> None:
    plan = with_updates(make_plan("single", "aws"), "model", weights_source="s3", weights_uri="s3://models/qwen/7b/")
    assert weights_bucket(plan) == ("models", "qwen/7b")
    assert weights_bucket(make_plan("single", "aws")) is None


@pytest.mark.parametrize("uri", ["s3://*/*", "s3://models/*", "s3://models/", "s3://models", "s3://mo*/x",
                                 "s3://models/a/../b", "s3://models/a?/b", "oss://models/x"])
def test_weights_bucket_refuses_wildcards_and_whole_buckets(uri: str) -> None:
    # A plan built in-process skips load_plan's checks; the grant itself refuses what is not concrete.
    plan = with_updates(make_plan("single", "aws"), "model", weights_source="s3", weights_uri=uri)
    with pytest.raises(InputError, match="concrete bucket and prefix"):
        weights_bucket(plan)


def test_node_role_reads_exactly_the_weights_prefix() -> None:
    import json

    from infragen.provision.aws.secrets import _policy

    doc = json.loads(_policy("arn:hf", "arn:api", "aws", ("models", "qwen/7b")))
    read = next(s for s in doc["Statement"] if s["Sid"] == "ReadWeights")
    listing = next(s for s in doc["Statement"] if s["Sid"] == "ListWeights")
    assert read["Resource"] == ["arn:aws:s3:::models/qwen/7b/*"] and read["Action"] == ["s3:GetObject"]
    assert listing["Resource"] == ["arn:aws:s3:::models"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["qwen/7b/*", "qwen/7b"]}}


@given(st.text(min_size=1, max_size=60))
def test_name_stem_is_dns_safe_and_short(workload: str) -> None:
    plan = make_plan("single", "aws").model_copy(update={"workload": workload})
    stem = name_stem(plan)
    assert 1 <= len(stem) <= NAME_STEM_MAX_CHARS
    assert all(c.isascii() and (c.isalnum() or c == "-") for c in stem) and not stem.endswith("-")


def test_tags_carry_the_digest() -> None:
    plan = make_plan("cpu", "aws")
    assert plan_tags(plan)["infragen:plan-digest"] == plan.digest
    assert plan_tags(plan, {"Name": "x"})["Name"] == "x"


@pytest.mark.parametrize(("text", "error", "match"), [
    ("   ", ValueError, "empty"),
    ("runcmd: []\n", ValueError, "does not start with"),
    ("#cloud-config\n" + "#" * 100, ValueError, "limit"),
    ("#cloud-config\n# hf_abcdefghijklmnopqrstuvwxyzABCDEFGH\n", SecretLeakError, "credential"),
    ("#!/bin/bash\nexport KEY=AKIAABCDEFGHIJKLMNOP\n", SecretLeakError, "credential"),
])
def test_check_user_data_rejects(text: str, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        check_user_data(text, max_bytes=64)


def test_check_user_data_accepts_secret_names() -> None:
    text = "#cloud-config\n# reads infragen/team/hf-token and infragen/team/api-key at boot\n"
    assert check_user_data(text, max_bytes=1024) == text


def test_check_secret_free() -> None:
    assert check_secret_free("#cloud-config\n", ["s3cr3t", ""]) == "#cloud-config\n"
    with pytest.raises(SecretLeakError):
        check_secret_free("#cloud-config\nkey: s3cr3t\n", ["s3cr3t"])


def test_idle_timeout_range_depends_on_lb_kind() -> None:
    plan = make_plan("single", "aws")
    assert idle_timeout_s(plan) == plan.network.idle_timeout_s
    with pytest.raises(InputError, match="ALB range 1-4000"):
        idle_timeout_s(with_updates(plan, "network", idle_timeout_s=5000))
    with pytest.raises(InputError, match="NLB range 60-6000"):
        idle_timeout_s(with_updates(plan, "network", idle_timeout_s=30, load_balancer="nlb"))


def test_secret_names_per_stack() -> None:
    """The stack goes after the leading `infragen/`; other names get the prefix; a stack that would make an
    invalid name is an InputError naming the stack."""
    from infragen.plan import SecretsPlan

    plan = make_plan("single", "aws")
    scoped = plan.secrets.for_stack("prod-eu")
    assert scoped.api_key_name == f"infragen/prod-eu/{plan.workload}/api-key"
    assert scoped.hf_token_name == f"infragen/prod-eu/{plan.workload}/hf-token"
    assert plan.secrets.for_stack("staging") != scoped
    custom = SecretsPlan(hf_token_name="team/hf", api_key_name="key")
    assert custom.for_stack("dev") == SecretsPlan(hf_token_name="infragen/dev/team/hf", api_key_name="infragen/dev/key")
    with pytest.raises(InputError, match=r"stack 'x{120}'"):
        plan.secrets.for_stack("x" * 120)
