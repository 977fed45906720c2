"""Pure layout of an AWS deployment: subnet CIDRs, node roles and head IPs, EFA interface layout,
load balancer ports, machine-image parameters and user-data encoding.

No Pulumi and no cloud calls; every count comes from the plan (no sizing decision is made here).
"""

from __future__ import annotations

import base64
import gzip
import ipaddress
from dataclasses import dataclass
from typing import Literal

from infragen.catalog.aws_deploy import load_aws_deploy
from infragen.errors import InputError
from infragen.identifiers import OBJECT_URI_RE
from infragen.plan import Plan
from infragen.provision.common import engine_ports
from infragen.render.cloud_init import AWS_LAUNCH_HOOK

# Re-exported: the target group's delay, which a packed node also waits out after deregistering its own ports.
from infragen.render.cloud_init import deregistration_delay_s as deregistration_delay_s

Role = Literal["replica", "head", "worker"]

#: Availability zones the VPC spans (an ALB needs subnets in at least two AZs).
AZ_COUNT = 2
#: Root device of Ubuntu-based AMIs (both the DLAMI and Canonical's images).
ROOT_DEVICE_NAME = "/dev/sda1"
#: Device name of the model data volume (appears as an NVMe device on Nitro instances).
DATA_DEVICE_NAME = "/dev/sdf"
#: EC2 user data is limited to 16 KB in raw form, before base64 encoding (EC2 user guide, "user data").
USER_DATA_MAX_BYTES = 16 * 1024
#: Idle timeout ranges, seconds: ALB `idle_timeout` 1-4000 and NLB TCP listener `tcp_idle_timeout_seconds`
#: 60-6000 (ELB user guides, "Connection idle timeout").
ALB_IDLE_TIMEOUT_RANGE_S = (1, 4000)
NLB_IDLE_TIMEOUT_RANGE_S = (60, 6000)
#: First host offset used for fixed head IPs inside a subnet (AWS reserves the first four addresses).
HEAD_IP_OFFSET = 10
#: Head IPs live in an explicit subnet CIDR reservation of this prefix length at offset 8 (.8-.15): AWS never
#: auto-assigns a reserved address, so a worker cannot take a head's address while the head is replaced.
HEAD_RESERVATION_PREFIX = 29
HEADS_PER_SUBNET = 8 - (HEAD_IP_OFFSET - 8)
#: Launch lifecycle hook the node's readiness unit completes (the renderer's name, so both sides agree).
LIFECYCLE_HOOK_NAME = AWS_LAUNCH_HOOK
#: With a launch lifecycle hook the group may use a grace period of 0 (EC2 Auto Scaling guide, "health check
#: grace period"); a short one absorbs the first ELB health checks after the hook completes.
POST_HOOK_GRACE_S = 60


@dataclass(frozen=True)
class Subnets:
    """CIDRs of the VPC's subnets, one private and one public per AZ."""

    private: tuple[str, ...]
    """Node subnets (no route from the internet), one per AZ."""
    public: tuple[str, ...]
    """Load-balancer subnets (route to the internet gateway), one per AZ."""


@dataclass(frozen=True)
class NetworkInterfaceSlot:
    """One network interface of a multi-node (EFA) launch template."""

    network_card_index: int
    """Physical network card it sits on."""
    device_index: int
    """Device index on that card."""
    interface_type: Literal["efa", "efa-only", "interface"]
    """`efa` (EFA with ENA: carries IP traffic), `efa-only` (RDMA only) or a plain ENA `interface`."""


@dataclass(frozen=True)
class ReplicaGroup:
    """The nodes of one multi-node replica: one head (fixed IP, LB target) and its workers."""

    index: int
    """Replica number, 0-based."""
    az_index: int
    """AZ (and private subnet) all its nodes live in; one cluster placement group is one AZ."""
    head_ip: str
    """Fixed private IP of the head node (workers join it)."""
    workers: int
    """Worker nodes (nodes_per_replica - 1)."""


def subnet_cidrs(vpc_cidr: str, az_count: int = AZ_COUNT) -> Subnets:
    """Carve the VPC into 16 equal blocks: private subnets first, public ones from the ninth block."""
    vpc = ipaddress.IPv4Network(vpc_cidr)
    blocks = list(vpc.subnets(prefixlen_diff=4))
    if az_count > 8:
        raise InputError(f"at most 8 availability zones fit this subnet layout, not {az_count}")
    return Subnets(
        private=tuple(str(b) for b in blocks[:az_count]),
        public=tuple(str(b) for b in blocks[8 : 8 + az_count]),
    )


def is_multinode(plan: Plan) -> bool:
    """True when one replica spans several nodes (head + workers)."""
    return plan.deployment.nodes_per_replica > 1


def choose_zones(offered: list[str], available: list[str], instance_type: str, region: str,
                 count: int = AZ_COUNT, *, reservation_zone: str | None = None) -> tuple[list[str], list[str]]:
    """(node zone ids, load-balancer zone ids): nodes only in zones offering the instance type, spread over
    `count` distinct ones where that many do (repeated when fewer do), or all in `reservation_zone` when a capacity
    reservation holds them; the load balancer in the node zones first, then others, `count` distinct ones."""
    nodes_in = [z for z in available if z in set(offered)]
    if not nodes_in:
        raise InputError(f"no availability zone of {region} offers {instance_type} "
                         f"(zones: {', '.join(available) or 'none'})",
                         fix="plan another region (workload `regions`) or run `infragen preflight` first")
    if reservation_zone is not None:
        if reservation_zone not in nodes_in:
            raise InputError(f"infragen:capacityReservationZone {reservation_zone} is not a zone of {region} that "
                             f"offers {instance_type} ({', '.join(nodes_in)})",
                             fix="set it to the reservation's zone id (`infragen preflight` prints it)")
        nodes_in = [reservation_zone]
    lb_in = (nodes_in + [z for z in available if z not in nodes_in])[:count]
    if len(lb_in) < count:
        raise InputError(f"{region} has {len(available)} available zone(s); the load balancer needs {count}")
    return [nodes_in[i % len(nodes_in)] for i in range(count)], lb_in


def head_reservation(subnet_cidr: str) -> str:
    """The /29 of a private subnet that holds its heads' fixed addresses (offset 8)."""
    net = ipaddress.IPv4Network(subnet_cidr)
    return str(ipaddress.IPv4Network(f"{net.network_address + 8}/{HEAD_RESERVATION_PREFIX}"))


def replica_groups(plan: Plan, subnets: Subnets) -> list[ReplicaGroup]:
    """One group per multi-node replica, spread round-robin over the AZs; empty for single-node replicas."""
    if not is_multinode(plan):
        return []
    groups = []
    for index in range(plan.deployment.replicas):
        az_index = index % len(subnets.private)
        net = ipaddress.IPv4Network(subnets.private[az_index])
        slot = index // len(subnets.private)
        if slot >= HEADS_PER_SUBNET:
            raise InputError(f"plan has {plan.deployment.replicas} multi-node replicas; at most "
                             f"{HEADS_PER_SUBNET * len(subnets.private)} heads fit the reserved head addresses")
        head_ip = str(net.network_address + HEAD_IP_OFFSET + slot)
        groups.append(ReplicaGroup(index=index, az_index=az_index, head_ip=head_ip,
                                   workers=plan.deployment.nodes_per_replica - 1))
    if len(groups) * plan.deployment.nodes_per_replica != plan.deployment.nodes:
        raise InputError(f"plan is inconsistent: {plan.deployment.replicas} replicas x "
                         f"{plan.deployment.nodes_per_replica} nodes != {plan.deployment.nodes} nodes")
    return groups


def single_node_count(plan: Plan) -> int:
    """Instances of the single-node Auto Scaling group (0 for multi-node plans)."""
    return 0 if is_multinode(plan) else plan.deployment.nodes


def efa_interfaces(plan: Plan) -> list[NetworkInterfaceSlot]:
    """Network interfaces of a node: one per network card, `efa` on card 0 and `efa-only` on the others.

    Card 0 device 0 is the primary interface: an EFA with ENA so it also carries IP traffic (an EFA-only
    interface cannot be primary). Each further card gets an EFA-only interface at device index 0, as the
    EC2 guide "Maximize network bandwidth on instances with multiple network cards" recommends.
    Without EFA the node has one plain ENA interface.
    """
    count = plan.network.efa_interfaces if plan.network.rdma == "efa" else 0
    if count <= 0:
        return [NetworkInterfaceSlot(network_card_index=0, device_index=0, interface_type="interface")]
    slots = [NetworkInterfaceSlot(network_card_index=0, device_index=0, interface_type="efa")]
    slots += [NetworkInterfaceSlot(network_card_index=card, device_index=0, interface_type="efa-only")
              for card in range(1, count)]
    return slots


def target_ports(plan: Plan) -> list[int]:
    """Ports the load balancer forwards to on every serving node: one target group at the first, the node's other
    engine ports registered on it as instance + port targets (port_targets.py; load_balancers.yaml has the source).

    Multi-node replicas serve from the head only, on the engine port.
    """
    return engine_ports(plan)


def idle_timeout_s(plan: Plan) -> int:
    """The plan's LB idle timeout, checked against what the load balancer kind accepts."""
    low, high = ALB_IDLE_TIMEOUT_RANGE_S if plan.network.load_balancer == "alb" else NLB_IDLE_TIMEOUT_RANGE_S
    value = plan.network.idle_timeout_s
    if not low <= value <= high:
        raise InputError(f"plan's idle_timeout_s {value} is outside the {plan.network.load_balancer.upper()} "
                         f"range {low}-{high} s")
    return value


def image_parameter(plan: Plan) -> str:
    """SSM parameter holding the machine image: the Deep Learning AMI on GPU nodes, Ubuntu on CPU nodes
    (catalog/data/aws_deploy.yaml)."""
    return load_aws_deploy().image_parameter(gpu=bool(plan.deployment.gpu), cpu_arch=plan.deployment.cpu_arch)


def encode_user_data(text: str) -> str:
    """Base64 for a launch template; gzip first (cloud-init reads gzip) when the raw text exceeds 16 KB."""
    raw = text.encode()
    if len(raw) > USER_DATA_MAX_BYTES:
        raw = gzip.compress(raw, mtime=0)
        if len(raw) > USER_DATA_MAX_BYTES:
            raise InputError(f"rendered user-data is {len(raw)} bytes even gzipped, over EC2's 16 KB limit")
    return base64.b64encode(raw).decode()


def weights_bucket(plan: Plan) -> tuple[str, str] | None:
    """(bucket, prefix) when the weights come from S3, else None."""
    if plan.model.weights_source != "s3":
        return None
    uri = plan.model.weights_uri
    # The node role is granted exactly this bucket and prefix: both must be concrete (no wildcard, no `..`,
    # no empty prefix that would open the whole bucket), whatever built the plan.
    match = OBJECT_URI_RE.fullmatch(uri)
    if match is None or match.group(1) != "s3":
        raise InputError(f"model weights_uri {uri!r} is not s3://BUCKET/PREFIX with a concrete bucket and prefix",
                         fix="name the bucket and the folder of the checkpoint, e.g. s3://my-models/llama-3.1-8b/")
    return match.group(2), match.group(3).strip("/")
