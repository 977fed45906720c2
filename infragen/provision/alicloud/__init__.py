"""Alibaba Cloud provisioning: `build_alicloud(plan, settings)` wires the network, secrets, nodes and LB components
(single-node replicas in ESS scaling groups that follow the plan's daily view, multi-node replicas as fixed instances).

Consumes a Plan and the stack settings; makes no sizing decision (counts, types and sizes are the plan's).
Images: every node boots the newest Ubuntu 22.04 system image unless `infragen:imageId` names one; GPU nodes install
the plan's NVIDIA driver (`plan.bootstrap.gpu_driver`) at first boot. Secrets need KMS 3.0 (instance + key).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_alicloud as alicloud

from infragen.catalog.alicloud_node import load_alicloud_node
from infragen.errors import InputError
from infragen.plan import Plan
from infragen.provision.alicloud.autoscaling import (
    extra_floor_nodes,
    group_shares,
    keeps_offset,
    launch_wait_s,
    on_demand_floor_nodes,
    one_zone_warning,
    schedule_window,
    scheduled_steps,
    spot_instance_types,
    target_qps_per_engine,
    today_utc,
)
from infragen.provision.alicloud.compute import AliNodes, NodesArgs
from infragen.provision.alicloud.group import AliReplicaGroups, ReplicaGroupsArgs
from infragen.provision.alicloud.layout import (
    NAT_EIP_BANDWIDTH_MBIT_S,
    DiskLayout,
    NodeLayout,
    eri_interfaces,
    idle_timeout_s,
    internet_download_s,
    plan_disks,
    plan_network,
    plan_nodes,
    serving_ports,
)
from infragen.provision.alicloud.loadbalancer import AliLoadBalancer, Backend, LoadBalancerArgs, listener_ports
from infragen.provision.alicloud.network import AliNetwork, NetworkArgs
from infragen.provision.alicloud.secrets import AliSecrets, SecretsArgs
from infragen.provision.common import TAG_STACK, check_user_data, name_stem, plan_tags, stack_slug

if TYPE_CHECKING:
    from infragen.provision.settings import StackSettings

__all__ = [
    "AliLoadBalancer",
    "AliNetwork",
    "AliNodes",
    "AliReplicaGroups",
    "AliSecrets",
    "AlicloudOptions",
    "build_alicloud",
    "load_alicloud_options",
]

# "The size of the user data cannot exceed 16 KB before it is encoded" (Alibaba ECS doc "Use instance user data",
# doc-detail/52012). The ECS SDK's launch-template docstring says 32 KB; the stricter figure is kept.
USER_DATA_MAX_BYTES = 16 * 1024
#: Rendered text larger than the ECS limit is sent gzip-compressed (cloud-init decompresses gzip user data, its
#: "User-data formats" doc); the limit then applies to the compressed bytes, checked in compute.encode_user_data.
USER_DATA_TEXT_MAX_BYTES = 64 * 1024

Renderer = Callable[..., str]


@dataclass(frozen=True)
class AlicloudOptions:
    """Alibaba-only stack options (`infragen:*` config keys the shared settings do not cover)."""

    image_id: str | None = None
    """`infragen:imageId`: a custom image for every node (e.g. one with the NVIDIA driver baked in); None = the
    newest Ubuntu 22.04 system image for the node's architecture."""
    kms_instance_id: str | None = None
    """`infragen:kmsInstanceId`: the KMS 3.0 instance the secrets live in (required with `kms_key_id`)."""
    kms_key_id: str | None = None
    """`infragen:kmsKeyId`: the symmetric key of that instance that encrypts the secrets."""
    node_zone_ids: tuple[str, ...] | None = None
    """`infragen:nodeZones`: zones for the nodes, best first; None = every zone offering the instance type."""
    lb_zone_ids: tuple[str, ...] | None = None
    """`infragen:lbZones`: two zones for the load balancer; None = the first two the LB service offers."""


def load_alicloud_options(config: pulumi.Config | None = None) -> AlicloudOptions:
    """Read the Alibaba-only `infragen:*` keys (call inside a Pulumi program)."""
    cfg = config if config is not None else pulumi.Config("infragen")
    return AlicloudOptions(
        image_id=cfg.get("imageId") or None,
        kms_instance_id=cfg.get("kmsInstanceId") or None,
        kms_key_id=cfg.get("kmsKeyId") or None,
        node_zone_ids=_zones(cfg.get_object("nodeZones"), "infragen:nodeZones"),
        lb_zone_ids=_zones(cfg.get_object("lbZones"), "infragen:lbZones"),
    )


def build_alicloud(plan: Plan, settings: StackSettings, *, options: AlicloudOptions | None = None,
                   render: Renderer | None = None, today: date | None = None) -> dict[str, Any]:
    """Create everything `plan` needs on Alibaba Cloud; returns the cloud exports (`endpoint`, ...).

    `today` (UTC) dates the scheduled tasks' window and their UTC offset; None = the clock (a test seam)."""
    if plan.deployment.cloud != "alicloud":
        raise InputError(f"plan {plan.workload} targets {plan.deployment.cloud}, not alicloud")
    opts = options if options is not None else load_alicloud_options()
    renderer = render if render is not None else _default_renderer()
    prefix = name_stem(plan)
    # Two stacks of one workload in one account must not share secrets or a role (same rule as AWS): the secret
    # names carry the stack (`plan.secrets.for_stack`), the role and policy names its slug, every resource its tag.
    stack = pulumi.get_stack()
    secret_names = plan.secrets.for_stack(stack)
    tags = plan_tags(plan, {TAG_STACK: stack})
    # Refusals come before any resource is declared, so a preview fails cleanly.
    _require_driver_image(plan, opts)
    kms_instance_id, kms_key_id = _require_kms(opts)
    _refuse_spot_in_deployment_sets(plan)
    if plan.deployment.pricing == "spot" and plan.spot is None:
        pulumi.log.warn(f"plan {plan.workload} is priced on spot but carries no on-demand floor (`spot` part): "
                        "every node is spot; re-plan it with this infragen to keep a base on demand")
    region = plan.deployment.region
    configured = pulumi.Config("alicloud").get("region")
    if configured and configured != region:
        # Same rule as AWS: the plan's region wins (prices and capacity were checked there).
        pulumi.log.warn(f"alicloud:region is {configured} but plan {plan.workload} targets {region}; "
                        f"resources are created in {region}")
    download_s = internet_download_s(plan)
    if download_s is not None and download_s > plan.network.health_check_grace_s:
        pulumi.log.warn(f"{plan.model.weights_gib:.0f} GiB of weights through the shared NAT EIP "
                        f"({NAT_EIP_BANDWIDTH_MBIT_S} Mbit/s for {plan.deployment.nodes} node(s)) take at least "
                        f"{download_s / 60:.0f} min per node, more than the plan's "
                        f"{plan.network.health_check_grace_s} s load allowance; stage them in OSS "
                        "(weights: oss://...) to load over the internal network")
    # An explicit provider pins every resource and look-up to the plan's region. Explicit providers do not read
    # the `alicloud:*` stack config, so credentials set there are passed on (env vars are read by the plugin).
    cloud_cfg = pulumi.Config("alicloud")
    provider = alicloud.Provider(
        f"{prefix}-alicloud", region=region, profile=cloud_cfg.get("profile"),
        access_key=cloud_cfg.get("accessKey"), secret_key=cloud_cfg.get_secret("secretKey"),
        security_token=cloud_cfg.get_secret("securityToken"))
    in_region = pulumi.ResourceOptions(provider=provider)
    invoke = pulumi.InvokeOptions(provider=provider)

    network_layout = plan_network(plan, settings.vpc_cidr)
    disks = plan_disks(plan)
    ports = listener_ports(plan.network.load_balancer, settings.certificate_arn)
    # Single-node replicas live in ESS scaling groups (replaced on failure, scaled, rolled by instance refresh);
    # multi-node replicas are fixed instances (heads keep fixed IPs that their workers are told).
    grouped = plan.deployment.nodes_per_replica == 1
    nodes = [] if grouped else plan_nodes(plan, network_layout.node_cidrs)

    def render(role: str, head: str | None, what: str) -> str:
        return check_user_data(renderer(plan, role, head_address=head, secrets=secret_names),
                               max_bytes=USER_DATA_TEXT_MAX_BYTES, what=what)

    image_id = _node_image(plan, opts, invoke)
    node_zones = _node_zones(plan, opts, invoke)
    lb_zones = _lb_zones(plan, opts, invoke)
    network = AliNetwork(f"{prefix}-net", NetworkArgs(
        prefix=prefix, layout=network_layout, node_zone_ids=node_zones, lb_zone_ids=lb_zones,
        listener_ports=ports, serving_ports=serving_ports(plan), allowed_cidrs=tuple(settings.allowed_cidrs),
        intra_cluster=plan.deployment.nodes_per_replica > 1, tags=tags), in_region)
    secrets = AliSecrets(f"{prefix}-secrets", SecretsArgs(
        prefix=prefix, role_stem=f"{prefix}-{stack_slug(stack)}", hf_token_name=secret_names.hf_token_name,
        api_key_name=secret_names.api_key_name,
        hf_token=settings.hf_token, api_key=settings.api_key, tags=tags, kms_instance_id=kms_instance_id,
        kms_key_id=kms_key_id, **_weights_bucket(plan)), in_region)
    compute = None
    if not grouped:
        compute = AliNodes(f"{prefix}-nodes", NodesArgs(
            prefix=prefix, instance_type=plan.deployment.instance_type, nodes=nodes,
            user_data=[render(n.role, _head_of(n, nodes), f"user-data of {n.name}") for n in nodes], disks=disks,
            image_id=image_id, vswitch_ids=network.node_vswitch_ids,
            security_group_id=network.node_security_group_id, role_name=secrets.role_name,
            spot=plan.deployment.pricing == "spot", eri_interfaces=eri_interfaces(plan),
            on_demand_replicas=plan.spot.on_demand_base_replicas if plan.spot is not None else 0,
            low_latency_placement=plan.network.placement == "cluster", tags=tags,
            depends_on=[secrets.policy_attachment]), in_region)
    backends = None if compute is None else [Backend(instance_id=compute.instance_ids[node.index], port=port)
                                             for node in nodes for port in node.serving_ports]
    lb = AliLoadBalancer(f"{prefix}-lb", LoadBalancerArgs(
        prefix=prefix, kind=plan.network.load_balancer, vpc_id=network.vpc_id, vswitch_ids=network.lb_vswitch_ids,
        zone_ids=network.lb_zone_ids, security_group_id=network.lb_security_group_id, listener_port=plan.engine.port,
        backends=backends, health_path=plan.engine.health_path, idle_timeout_s=idle_timeout_s(plan), tags=tags,
        certificate_id=settings.certificate_arn), in_region)
    exports: dict[str, Any] = {
        "endpoint": lb.endpoint,
        "load_balancer_dns": lb.dns_name,
        "vpc_id": network.vpc_id,
        "instance_ids": compute.instance_ids if compute is not None else [],
        "secret_names": [secret_names.hf_token_name, secret_names.api_key_name],
    }
    if grouped:
        groups = _replica_groups(plan, render("replica", None, "user-data of the replicas"), disks=disks,
                                 image_id=image_id, network=network, secrets=secrets, lb=lb, tags=tags,
                                 today=today, opts=in_region,
                                 spot_types=_spot_types(plan, invoke, node_zones))
        exports |= {"scaling_group_ids": groups.scaling_group_ids, "launch_template_id": groups.launch_template_id,
                    "autoscaling_resources": [r.urn for r in groups.scaling_resources],
                    "instance_refreshes": groups.refreshes}
    return exports


def _replica_groups(plan: Plan, user_data: str, *, disks: DiskLayout, image_id: pulumi.Input[str],
                    network: AliNetwork, secrets: AliSecrets, lb: AliLoadBalancer, tags: dict[str, str],
                    today: date | None, opts: pulumi.ResourceOptions,
                    spot_types: pulumi.Input[Sequence[str]] = ()) -> AliReplicaGroups:
    """The single-node replicas as ESS groups with the plan's bounds, QPS target and daily schedule (a spot plan:
    on-demand groups for its floor, spot groups for the rest)."""
    shares = group_shares(plan, len(network.node_vswitch_ids))
    one_zone = one_zone_warning(plan, len(network.node_vswitch_ids))
    if one_zone:
        pulumi.log.warn(one_zone)
    extra = extra_floor_nodes(plan)
    if extra:
        pulumi.log.warn(f"plan {plan.workload}'s floor is all on demand ({on_demand_floor_nodes(plan)} node(s)); its "
                        f"spot groups keep {extra} node at the quietest hours too (ESS target tracking cannot grow an "
                        "empty group), one more than the plan's floor")
    on = today or today_utc()
    steps = scheduled_steps(plan, on)
    if steps and plan.scaling is not None and not keeps_offset(plan.scaling.time_zone, on.year):
        pulumi.log.warn(f"{plan.scaling.time_zone} changes its UTC offset during the year; ESS scheduled tasks run "
                        "on UTC cron, so they follow the profile one hour off for part of the year")
    target = target_qps_per_engine(plan)
    if target is not None and plan.network.load_balancer != "alb":
        pulumi.log.warn("an NLB reports no per-server QPS to Auto Scaling: the replica groups follow the plan's "
                        "schedule and floor only; use an ALB for load-following scaling")
    # Launch template and scaling group names are unique in a region: they carry the stack, as the RAM names do.
    return AliReplicaGroups(f"{name_stem(plan)}-replicas", ReplicaGroupsArgs(
        prefix=f"{name_stem(plan)}-{stack_slug(pulumi.get_stack())}", instance_type=plan.deployment.instance_type,
        user_data=user_data, disks=disks,
        image_id=image_id, vswitch_ids=network.node_vswitch_ids, security_group_id=network.node_security_group_id,
        role_name=secrets.role_name, spot=plan.deployment.pricing == "spot", shares=shares,
        lb_kind=plan.network.load_balancer, server_group_id=lb.server_group_id, ports=serving_ports(plan),
        launch_wait_s=launch_wait_s(plan), tags=tags, target_qps=target, warmup_s=launch_wait_s(plan),
        steps=steps, schedule_window=schedule_window(on), on_demand_floor_nodes=on_demand_floor_nodes(plan),
        spot_instance_types=spot_types, depends_on=[secrets.policy_attachment, *lb.listeners]), opts)


def _spot_types(plan: Plan, invoke: pulumi.InvokeOptions,
                node_zones: pulumi.Input[Sequence[str]]) -> pulumi.Input[Sequence[str]]:
    """The types a spot plan's spot groups may launch: the planned one and the same-GPU alternatives that ECS sells
    as spot in every node zone (zone look-ups, like the planned type's)."""
    alternatives = plan.spot.alternative_instance_types if plan.spot is not None else []
    if plan.deployment.pricing != "spot" or not alternatives:
        return [plan.deployment.instance_type]
    offered = {t: alicloud.get_zones_output(
        available_instance_type=t, available_resource_creation="VSwitch", available_disk_category="cloud_essd",
        instance_charge_type="PostPaid", spot_strategy="SpotAsPriceGo", opts=invoke).ids for t in alternatives}
    names = list(offered)
    return pulumi.Output.all(pulumi.Output.from_input(node_zones), *(offered[t] for t in names)).apply(
        lambda found: spot_instance_types(plan, dict(zip(names, found[1:], strict=True)), list(found[0])))


def _head_of(node: NodeLayout, nodes: Sequence[NodeLayout]) -> str | None:
    """The fixed private IP of the head of `node`'s replica (None for single-node replicas)."""
    if node.role == "replica":
        return None
    head = next(n for n in nodes if n.replica == node.replica and n.role == "head")
    return head.private_ip


def _node_zones(plan: Plan, opts: AlicloudOptions, invoke: pulumi.InvokeOptions) -> pulumi.Input[Sequence[str]]:
    if opts.node_zone_ids:
        return list(opts.node_zone_ids)
    found = alicloud.get_zones_output(
        available_instance_type=plan.deployment.instance_type, available_resource_creation="VSwitch",
        available_disk_category="cloud_essd", instance_charge_type="PostPaid",
        spot_strategy="SpotAsPriceGo" if plan.deployment.pricing == "spot" else None, opts=invoke)
    return found.ids


def _lb_zones(plan: Plan, opts: AlicloudOptions, invoke: pulumi.InvokeOptions) -> pulumi.Input[Sequence[str]]:
    if opts.lb_zone_ids:
        return list(opts.lb_zone_ids)
    if plan.network.load_balancer == "nlb":
        return alicloud.nlb.get_zones_output(opts=invoke).ids
    return alicloud.alb.get_zones_output(opts=invoke).ids


def _require_driver_image(plan: Plan, opts: AlicloudOptions) -> None:
    has_driver_step = plan.bootstrap is not None and plan.bootstrap.gpu_driver is not None
    if plan.deployment.gpu is None or opts.image_id or has_driver_step:
        return
    # Deploying GPU nodes without a driver would boot fine and never serve: refuse up front instead.
    extra = " and the eRDMA software stack" if plan.network.rdma == "erdma" else ""
    raise InputError(
        f"plan {plan.workload} runs on {plan.deployment.instance_type} GPUs, but Alibaba system images carry no "
        f"NVIDIA driver and the plan names none to install ({plan.engine.name} {plan.engine.version} has no "
        "driver row in infragen/catalog/data/alicloud_node.yaml)",
        fix=f"pulumi config set infragen:imageId <an image with the NVIDIA driver{extra}>",
        hint="docs/alicloud.md, section 'Images'")


def _require_kms(opts: AlicloudOptions) -> tuple[str, str]:
    """KMS 3.0 stores a secret only in an instance, encrypted with one of its keys: both ids, or a clear error."""
    if opts.kms_instance_id and opts.kms_key_id:
        return opts.kms_instance_id, opts.kms_key_id
    missing = [key for key, value in (("infragen:kmsInstanceId", opts.kms_instance_id),
                                      ("infragen:kmsKeyId", opts.kms_key_id)) if not value]
    raise InputError(
        f"{' and '.join(missing)} not set: on KMS 3.0 a secret must name the KMS instance it lives in and the "
        "symmetric key of that instance that encrypts it (pulumi-alicloud kms.Secret: dkms_instance_id and "
        "encryption_key_id are required on KMS 3.0)",
        fix="pulumi config set infragen:kmsInstanceId kst-...; pulumi config set infragen:kmsKeyId key-...",
        hint="docs/alicloud.md, section 'First deploy' (buying a KMS instance and creating its key)")


def _refuse_spot_in_deployment_sets(plan: Plan) -> None:
    if plan.deployment.pricing == "spot" and plan.network.placement == "cluster":
        raise InputError(
            f"plan {plan.workload} puts spot instances in a low-latency deployment set, which ECS refuses (spot "
            "instances cannot join a deployment set), and a multi-node replica without one loses its eRDMA locality",
            fix="plan the multi-node workload with pricing: on-demand (or a single-node layout for spot)")


def _weights_bucket(plan: Plan) -> dict[str, Any]:
    """The OSS bucket and prefix the node role may read, when the weights come from OSS."""
    if plan.model.weights_source != "oss":
        return {}
    bucket, _, prefix = plan.model.weights_uri.removeprefix("oss://").partition("/")
    return {"weights_bucket": bucket, "weights_prefix": prefix}


def _node_image(plan: Plan, opts: AlicloudOptions, invoke: pulumi.InvokeOptions) -> pulumi.Input[str]:
    return opts.image_id or _system_image(plan, invoke)


def _system_image(plan: Plan, invoke: pulumi.InvokeOptions) -> pulumi.Output[str]:
    regex = load_alicloud_node().system_image_name_regex[plan.deployment.cpu_arch]
    images = alicloud.ecs.get_images_output(owners="system", name_regex=regex, most_recent=True,
                                            instance_type=plan.deployment.instance_type, opts=invoke)
    return images.ids.apply(lambda ids: _first_image(ids, regex, plan.deployment.instance_type))


def _first_image(ids: Sequence[str], regex: str, instance_type: str) -> str:
    if not ids:
        raise pulumi.RunError(f"no system image matching {regex} supports {instance_type} in this region; "
                              "set infragen:imageId to an image that does")
    return ids[0]


def _zones(value: Any, key: str) -> tuple[str, ...] | None:
    if value is None or value == []:  # Pulumi.yaml declares `[]` as the default: look the zones up
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(z, str) and z for z in items):
        raise InputError(f"{key}: expected a list of zone ids such as [\"cn-hangzhou-j\"], got {value!r}")
    return tuple(items)


def _default_renderer() -> Renderer:
    from infragen.render import render_user_data

    return render_user_data
