"""Pure layout of an Alibaba Cloud deployment: address plan, node roles, head IPs, disks, ERIs, LB ports.

Turns a Plan (plus the VPC CIDR) into frozen dataclasses the Pulumi components read.
No Pulumi, no cloud calls and no sizing decision here: every count comes from the plan.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

from infragen.errors import InputError
from infragen.plan import Plan
from infragen.units import GIB

Role = Literal["replica", "head", "worker"]

# ESSD capacity range per performance level, GiB (Alibaba ECS doc "ESSDs", doc-detail/122389, updated 2024-01-18:
# PL0 1~65,536, PL1 20~65,536, PL2 461~65,536, PL3 1,261~65,536).
ESSD_MIN_GIB: dict[str, int] = {"PL0": 1, "PL1": 20, "PL2": 461, "PL3": 1261}
ESSD_MAX_GIB = 65536
# The provider's default ESSD level when none is given (pulumi-alicloud 4.0.0 ecs.Instance docs: "Default to PL1").
ESSD_DEFAULT_LEVEL = "PL1"

# Elastic RDMA interfaces per instance type (Alibaba PAI doc "eRDMA: use high-performance networks for distributed
# training", updated 2025-10-29, table "Number of eRDMA network interface cards"). Other ERI-capable types get one ERI
# (the primary ENI in HighPerformance mode): the ECS doc says every type with EriQuantity > 0 supports ERIs.
ERI_INTERFACES: dict[str, int] = {
    "ecs.ebmgn7v.32xlarge": 2,
    "ecs.ebmgn8v.48xlarge": 2,
    "ecs.ebmgn8is.32xlarge": 2,
    "ecs.ebmgn8i.32xlarge": 4,
    "ecs.gn8is.2xlarge": 1,
    "ecs.gn8is.4xlarge": 1,
    "ecs.gn8is-2x.8xlarge": 1,
    "ecs.gn8is-4x.16xlarge": 1,
}

# ALB listeners accept an idle timeout of 0~600 s (pulumi-alicloud 4.0.0 alb.Listener `idle_timeout`).
ALB_MAX_IDLE_TIMEOUT_S = 600
# The NAT gateway's EIP is pay-as-you-go, pay-by-traffic: 1~200 Mbit/s (pulumi-alicloud 4.0.0 ecs.EipAddress docs).
NAT_EIP_BANDWIDTH_MBIT_S = 200
# A vSwitch keeps its first and last three addresses (Alibaba VPC docs); fixed head IPs start past them.
HEAD_HOST_OFFSET = 10
# Node vSwitches: at most two zones for the nodes; the ALB always gets two zones of its own.
MAX_NODE_ZONES = 2
#: Zones (vSwitches) of the single-node replicas' scaling groups, in priority order: the first two are where the
#: groups live, every one is a fallback. Fewer distinct zones in the region: the slots repeat them.
REPLICA_GROUP_ZONES = 3
LB_ZONES = 2


@dataclass(frozen=True)
class NodeLayout:
    """One ECS instance to launch."""

    index: int
    """Position in the deployment, 0..nodes-1."""
    name: str
    """Resource name suffix (`node-0`, `r0-head`, `r0-worker-1`)."""
    role: Role
    """cloud-init role: `replica` (serves alone), `head` (serves, leads a multi-node replica) or `worker`."""
    replica: int
    """Replica group the node belongs to (multi-node) or its node index (single-node replicas)."""
    zone_slot: int
    """Which node vSwitch (zone) it lives in; all nodes of one replica share it."""
    private_ip: str | None
    """Fixed private IP (heads only, so workers can be told where to join); None = assigned by the VSwitch."""
    serving_ports: tuple[int, ...]
    """Engine ports the load balancer sends traffic to on this node; empty for workers."""


@dataclass(frozen=True)
class NetworkLayout:
    """Address plan of the VPC."""

    vpc_cidr: str
    """VPC CIDR."""
    node_cidrs: tuple[str, ...]
    """One private vSwitch CIDR per node zone slot."""
    lb_cidrs: tuple[str, ...]
    """Two vSwitch CIDRs for the load balancer (ALB needs two zones)."""


@dataclass(frozen=True)
class DiskLayout:
    """System and data disks of one node (ESSD, encrypted)."""

    system_gib: int
    """System disk size, GiB."""
    system_level: str
    """System disk ESSD performance level."""
    data_gib: int | None
    """Data disk size, GiB; None when the plan uses local NVMe (instance store) instead."""
    data_category: str
    """Data disk category (`cloud_essd`)."""
    data_level: str | None
    """Data disk ESSD performance level; None = provider default (PL1)."""


def plan_nodes(plan: Plan, node_cidrs: tuple[str, ...]) -> list[NodeLayout]:
    """Every node of the plan, with its role, zone slot and (for heads) a fixed private IP."""
    dep = plan.deployment
    slots = len(node_cidrs)
    nodes: list[NodeLayout] = []
    if dep.nodes_per_replica > 1:
        # Multi-node replicas: one head (serves the API) and nodes_per_replica-1 workers, all in one zone.
        for replica in range(dep.replicas):
            slot = replica % slots
            head_ip = _host(node_cidrs[slot], HEAD_HOST_OFFSET + replica // slots)
            for rank in range(dep.nodes_per_replica):
                head = rank == 0
                nodes.append(NodeLayout(
                    index=len(nodes), name=f"r{replica}-head" if head else f"r{replica}-worker-{rank}",
                    role="head" if head else "worker", replica=replica, zone_slot=slot,
                    private_ip=head_ip if head else None,
                    serving_ports=(plan.engine.port,) if head else (),
                ))
    else:
        ports = tuple(plan.engine.port + i for i in range(dep.replicas_per_node))
        for index in range(dep.nodes):
            nodes.append(NodeLayout(index=index, name=f"node-{index}", role="replica", replica=index,
                                    zone_slot=index % slots, private_ip=None, serving_ports=ports))
    expected = -(-dep.replicas * dep.nodes_per_replica // dep.replicas_per_node)
    if len(nodes) != dep.nodes or dep.nodes != expected:
        raise InputError(f"plan {plan.workload}: deployment.nodes is {dep.nodes} but replicas x nodes_per_replica / "
                         f"replicas_per_node gives {expected} nodes",
                         fix="regenerate the plan with `infragen plan`")
    return nodes


def node_zone_count(plan: Plan) -> int:
    """How many node vSwitches (zones) the VPC gets: single-node replicas (ESS groups) three, so each group has
    zones to fall back to when its own has no stock; multi-node replicas one per replica, at most two."""
    dep = plan.deployment
    if dep.nodes_per_replica == 1:
        return REPLICA_GROUP_ZONES
    return max(1, min(MAX_NODE_ZONES, dep.replicas))


def plan_network(plan: Plan, vpc_cidr: str) -> NetworkLayout:
    """Split the VPC CIDR into node and load-balancer vSwitches (/20 each in a /16)."""
    try:
        vpc = ipaddress.ip_network(vpc_cidr)
    except ValueError as exc:
        raise InputError(f"vpc_cidr {vpc_cidr!r} is not a CIDR block: {exc}") from exc
    if not isinstance(vpc, ipaddress.IPv4Network) or not 8 <= vpc.prefixlen <= 24:
        raise InputError(f"vpc_cidr {vpc_cidr!r}: an Alibaba VPC needs an IPv4 block between /8 and /24",
                         fix="use a block such as 10.0.0.0/16")
    subnets = list(vpc.subnets(new_prefix=vpc.prefixlen + 4))
    count = node_zone_count(plan)
    # Node vSwitches take the low blocks, the LB vSwitches the upper half, so the split reads at a glance.
    node_cidrs = tuple(str(subnets[i]) for i in range(count))
    lb_cidrs = tuple(str(subnets[len(subnets) // 2 + i]) for i in range(LB_ZONES))
    return NetworkLayout(vpc_cidr=str(vpc), node_cidrs=node_cidrs, lb_cidrs=lb_cidrs)


def plan_disks(plan: Plan) -> DiskLayout:
    """ESSD system and data disks from `plan.storage`; refuses sizes Alibaba rejects for the level."""
    storage = plan.storage
    _check_essd("storage.root_volume_gib", storage.root_volume_gib, ESSD_DEFAULT_LEVEL)
    if storage.kind == "instance-store":
        return DiskLayout(system_gib=storage.root_volume_gib, system_level=ESSD_DEFAULT_LEVEL, data_gib=None,
                          data_category="cloud_essd", data_level=None)
    category = storage.volume_type or "cloud_essd"
    if category not in {"cloud_essd", "cloud_auto"}:
        raise InputError(f"plan {plan.workload}: storage.volume_type {category!r} is not an Alibaba disk category "
                         "this program provisions (cloud_essd, cloud_auto)",
                         fix="plan the workload with `cloud: alicloud` so the storage is planned for Alibaba")
    size = max(storage.volume_gib, storage.required_gib)
    level = storage.performance_level
    if category == "cloud_essd":
        _check_essd("storage.volume_gib", size, level or ESSD_DEFAULT_LEVEL)
    return DiskLayout(system_gib=storage.root_volume_gib, system_level=ESSD_DEFAULT_LEVEL, data_gib=size,
                      data_category=category, data_level=level if category == "cloud_essd" else None)


def eri_interfaces(plan: Plan) -> int:
    """Elastic RDMA interfaces per node: 0 without eRDMA, else the documented count for the type (1 if unlisted)."""
    if plan.network.rdma != "erdma":
        return 0
    return ERI_INTERFACES.get(plan.deployment.instance_type, 1)


def internet_download_s(plan: Plan) -> float | None:
    """Least time to fetch the weights from the internet through the NAT EIP; None when they come from OSS
    (internal endpoint, not through the NAT)."""
    if plan.model.weights_source == "oss":
        return None
    return plan.model.weights_gib * GIB * 8 / (NAT_EIP_BANDWIDTH_MBIT_S * 1e6)


def idle_timeout_s(plan: Plan) -> int:
    """The listener idle timeout: the plan's, within ALB's 0~600 s range."""
    return max(1, min(plan.network.idle_timeout_s, ALB_MAX_IDLE_TIMEOUT_S))


def serving_ports(plan: Plan) -> tuple[int, ...]:
    """Every engine port a node may serve on (the node security group opens exactly these to the LB)."""
    if plan.deployment.nodes_per_replica > 1:
        return (plan.engine.port,)
    return tuple(plan.engine.port + i for i in range(plan.deployment.replicas_per_node))


def _host(cidr: str, offset: int) -> str:
    net = ipaddress.ip_network(cidr)
    if offset >= net.num_addresses - 4:
        raise InputError(f"vSwitch {cidr} has no room for a head at offset {offset}",
                         fix="use a larger vpc_cidr")
    return str(net.network_address + offset)


def _check_essd(field: str, size_gib: int, level: str) -> None:
    low = ESSD_MIN_GIB.get(level)
    if low is None:
        raise InputError(f"{field}: unknown ESSD performance level {level!r}; expected one of PL0, PL1, PL2, PL3")
    if not low <= size_gib <= ESSD_MAX_GIB:
        raise InputError(f"{field}: an ESSD {level} disk holds {low}~{ESSD_MAX_GIB} GiB, the plan asks for "
                         f"{size_gib} GiB",
                         fix="choose a performance level that allows this size (PL2 needs 461 GiB, PL3 1,261 GiB)")
