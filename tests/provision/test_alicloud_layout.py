"""The pure Alibaba layout: address plan, node roles, head IPs, disk checks, ERI counts (no Pulumi)."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infragen.errors import InputError
from infragen.plan import Plan
from infragen.provision.alicloud.layout import (
    ESSD_MIN_GIB,
    REPLICA_GROUP_ZONES,
    eri_interfaces,
    idle_timeout_s,
    internet_download_s,
    plan_disks,
    plan_network,
    plan_nodes,
    serving_ports,
)
from tests.plan_factory import make_plan


def _plan_with(plan: Plan, **sections: dict[str, Any]) -> Plan:
    data = plan.model_dump(mode="json", exclude={"digest"})
    for section, fields in sections.items():
        data[section] = {**data[section], **fields}
    return Plan.model_validate(data)


def _multinode(replicas: int, nodes_per_replica: int) -> Plan:
    return _plan_with(make_plan("multinode", "alicloud"), deployment={
        "replicas": replicas, "nodes_per_replica": nodes_per_replica, "pp": nodes_per_replica,
        "nodes": replicas * nodes_per_replica})


@settings(max_examples=40, deadline=None)
@given(replicas=st.integers(1, 6), nodes_per_replica=st.integers(2, 4),
       cidr=st.sampled_from(["10.40.0.0/16", "172.16.0.0/18", "192.168.0.0/20"]))
def test_multinode_layout_properties(replicas: int, nodes_per_replica: int, cidr: str) -> None:
    plan = _multinode(replicas, nodes_per_replica)
    net = plan_network(plan, cidr)
    nodes = plan_nodes(plan, net.node_cidrs)
    vpc = ipaddress.ip_network(cidr)
    blocks = [ipaddress.ip_network(c) for c in net.node_cidrs + net.lb_cidrs]
    assert all(b.subnet_of(vpc) for b in blocks)
    assert not any(a.overlaps(b) for i, a in enumerate(blocks) for b in blocks[i + 1:]), "vSwitches overlap"
    assert len(nodes) == replicas * nodes_per_replica
    heads = [n for n in nodes if n.role == "head"]
    assert len(heads) == replicas
    assert len({h.private_ip for h in heads}) == replicas, "two heads share an address"
    for replica in range(replicas):
        members = [n for n in nodes if n.replica == replica]
        assert len({n.zone_slot for n in members}) == 1, "a replica spans two zones"
        (head,) = [n for n in members if n.role == "head"]
        assert ipaddress.ip_address(head.private_ip) in ipaddress.ip_network(net.node_cidrs[head.zone_slot])
        assert head.serving_ports == (plan.engine.port,)
        assert all(n.serving_ports == () and n.private_ip is None for n in members if n.role == "worker")


@pytest.mark.parametrize("kind", ["single", "packed", "tp", "cpu"])
def test_single_node_replicas_all_serve(kind: str) -> None:
    plan = make_plan(kind, "alicloud")  # type: ignore[arg-type]
    net = plan_network(plan, "10.40.0.0/16")
    nodes = plan_nodes(plan, net.node_cidrs)
    assert [n.role for n in nodes] == ["replica"] * plan.deployment.nodes
    ports = tuple(plan.engine.port + i for i in range(plan.deployment.replicas_per_node))
    assert all(n.serving_ports == ports for n in nodes)
    assert serving_ports(plan) == ports
    assert sum(len(n.serving_ports) for n in nodes) == plan.deployment.replicas
    # ESS groups: vSwitches in three zones, each a fallback for the groups' preferred zones.
    assert len(net.node_cidrs) == REPLICA_GROUP_ZONES == 3


def test_inconsistent_node_counts_are_refused() -> None:
    plan = _plan_with(make_plan("single", "alicloud"), deployment={"nodes": 3})
    with pytest.raises(InputError, match=r"deployment\.nodes is 3"):
        plan_nodes(plan, ("10.40.0.0/20", "10.40.16.0/20"))


@pytest.mark.parametrize("cidr", ["not-a-cidr", "10.0.0.0/26", "fd00::/48"])
def test_bad_vpc_cidrs_are_input_errors(cidr: str) -> None:
    with pytest.raises(InputError, match="vpc_cidr"):
        plan_network(make_plan("single", "alicloud"), cidr)


@pytest.mark.parametrize(("level", "size", "ok"), [
    ("PL0", 1, True), ("PL1", 19, False), ("PL1", 20, True), ("PL2", 460, False), ("PL2", 461, True),
    ("PL3", 1260, False), ("PL3", 1261, True), ("PL1", 65537, False),
])
def test_essd_levels_enforce_documented_capacity(level: str, size: int, ok: bool) -> None:
    plan = _plan_with(make_plan("single", "alicloud"),
                      storage={"performance_level": level, "volume_gib": size, "required_gib": min(size, 20)})
    if ok:
        disks = plan_disks(plan)
        assert (disks.data_gib, disks.data_level, disks.data_category) == (size, level, "cloud_essd")
    else:
        with pytest.raises(InputError, match=level):
            plan_disks(plan)
    assert ESSD_MIN_GIB[level] <= 1261


def test_data_disk_never_smaller_than_required() -> None:
    plan = _plan_with(make_plan("single", "alicloud"), storage={"volume_gib": 40, "required_gib": 75})
    assert plan_disks(plan).data_gib == 75


def test_instance_store_plans_get_no_data_disk() -> None:
    plan = _plan_with(make_plan("single", "alicloud"), storage={
        "kind": "instance-store", "volume_gib": 0, "volume_type": None, "performance_level": None,
        "nvme_devices": 2, "nvme_total_gib": 3576})
    assert plan_disks(plan).data_gib is None


def test_aws_volume_types_are_refused() -> None:
    with pytest.raises(InputError, match="gp3"):
        plan_disks(_plan_with(make_plan("single", "alicloud"), storage={"volume_type": "gp3"}))


@pytest.mark.parametrize(("itype", "expected"), [
    ("ecs.ebmgn8v.48xlarge", 2), ("ecs.ebmgn8i.32xlarge", 4), ("ecs.gn8is.4xlarge", 1), ("ecs.ebmgn9g.64xlarge", 1),
])
def test_eri_counts(itype: str, expected: int) -> None:
    plan = _plan_with(make_plan("multinode", "alicloud"), deployment={"instance_type": itype})
    assert eri_interfaces(plan) == expected


def test_no_eri_without_erdma() -> None:
    assert eri_interfaces(make_plan("tp", "alicloud")) == 0


@pytest.mark.parametrize(("planned", "expected"), [(600, 600), (900, 600), (120, 120)])
def test_idle_timeout_within_alb_range(planned: int, expected: int) -> None:
    plan = _plan_with(make_plan("single", "alicloud"), network={"idle_timeout_s": planned})
    assert idle_timeout_s(plan) == expected


def test_internet_download_time_at_the_nat_eip_cap() -> None:
    plan = make_plan("tp", "alicloud")  # 131.4 GiB of weights from Hugging Face
    seconds = internet_download_s(plan)
    assert seconds == pytest.approx(131.4 * 1024**3 * 8 / 200e6)
    oss = _plan_with(plan, model={"weights_source": "oss", "weights_uri": "oss://bucket/llama-70b"})
    assert internet_download_s(oss) is None


def test_stack_slug_fits_ram_names_and_keeps_stacks_apart() -> None:
    from infragen.provision.common import STACK_SLUG_MAX_CHARS, stack_slug

    assert stack_slug("ali-chat-7b") == "ali-chat-7b"
    odd = [stack_slug(s) for s in ("Prod_A", "prod-a", "prod.a", "x" * 80, "x" * 81)]
    assert len(set(odd)) == len(odd), odd  # a changed name gains a digest of the original
    for slug in odd:
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", slug) and len(slug) <= STACK_SLUG_MAX_CHARS, slug
        # A RAM role name: <workload stem, 14> - <slug> -node, within Alibaba's 64 characters.
        assert len(f"{'w' * 14}-{slug}-node") <= 64
