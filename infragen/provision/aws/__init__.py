"""AWS provisioning: turn a Plan into a VPC, secrets, a load balancer and the serving nodes.

`build_aws` is the only entry point (called by infragen.provision.build_stack); it makes no sizing decision
and puts no secret value anywhere but the Secrets Manager versions.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from infragen.errors import InputError
from infragen.plan import Plan, SecretsPlan
from infragen.provision.aws.autoscaling import attach_autoscaling, scales
from infragen.provision.aws.capacity import spot_types
from infragen.provision.aws.compute import Compute, ComputeArgs, UserDataRenderer
from infragen.provision.aws.layout import (
    USER_DATA_MAX_BYTES,
    Role,
    deregistration_delay_s,
    idle_timeout_s,
    is_multinode,
    subnet_cidrs,
    target_ports,
    weights_bucket,
)
from infragen.provision.aws.load_balancer import LoadBalancer, LoadBalancerArgs, listener_ports
from infragen.provision.aws.network import Network, NetworkArgs
from infragen.provision.aws.options import AwsOptions, load_aws_options
from infragen.provision.aws.port_targets import attach_port_targets
from infragen.provision.aws.secrets import Secrets, SecretsArgs
from infragen.provision.aws.zones import Zones, resolve_zones
from infragen.provision.common import TAG_STACK, check_secret_free, check_user_data, name_stem, plan_tags
from infragen.provision.settings import StackSettings

__all__ = ["Compute", "LoadBalancer", "Network", "Secrets", "build_aws"]


def build_aws(plan: Plan, settings: StackSettings, *, render_user_data: UserDataRenderer | None = None,
              options: AwsOptions | None = None) -> dict[str, Any]:
    """Create the deployment in `plan.deployment.region`; returns the exports (`endpoint` and ids).

    `render_user_data(role, head_address)` renders one node's cloud-init; by default the real renderer
    (infragen.render.render_user_data, with the stack's secret names `plan.secrets.for_stack(stack)`) is used.
    Tests pass their own. `options` are the AWS-only stack settings (pinned image, capacity reservation); by
    default read from the `infragen:*` config.
    """
    if plan.deployment.cloud != "aws":
        raise ValueError(f"build_aws got a plan for {plan.deployment.cloud!r}")
    configured = pulumi.Config("aws").get("region")
    if configured and configured != plan.deployment.region:
        # The plan's region wins (prices and capacity were checked there); the explicit provider pins it.
        pulumi.log.warn(f"aws:region is {configured} but plan {plan.workload} targets {plan.deployment.region}; "
                        f"resources are created in {plan.deployment.region}")
    aws_options = options if options is not None else load_aws_options()
    if aws_options.capacity_reservation_id and plan.deployment.pricing == "spot":
        raise InputError(f"infragen:capacityReservationId is set but plan {plan.workload} is priced on spot; a "
                         "capacity reservation holds on-demand capacity",
                         fix="plan with on-demand pricing, or unset infragen:capacityReservationId")
    if plan.deployment.pricing == "spot" and plan.spot is None:
        pulumi.log.warn(f"plan {plan.workload} is priced on spot but carries no on-demand floor (`spot` part): "
                        "every node is spot; re-plan it with this infragen to keep a base on demand")
    if not settings.certificate_arn and "0.0.0.0/0" in settings.allowed_cidrs:
        pulumi.log.warn("no infragen:certificateArn and infragen:allowedCidrs open to the internet: clients send "
                        "the API key in clear text; set a certificate or restrict the client networks")
    if plan.network.load_balancer == "nlb":
        pulumi.log.warn("a network load balancer forwards every path: the engine's unauthenticated routes "
                        "(/metrics, /tokenize...) are reachable from infragen:allowedCidrs; restrict them")
    if aws_options.image_id is None:
        pulumi.log.warn("infragen:imageId is not set: the AMI is resolved from its SSM parameter at every deploy, "
                        "so a new AMI release rolls every node; pin it (see `infragen preflight`)")
    # Two stacks of one workload in one account must not share secrets or grant each other's nodes anything.
    stack = pulumi.get_stack()
    secret_names = plan.secrets.for_stack(stack)
    renderer = render_user_data or _default_renderer(plan, secret_names)
    stem = name_stem(plan)
    tags = plan_tags(plan, {TAG_STACK: stack})
    provider = aws.Provider(f"{stem}-aws", region=plan.deployment.region,
                            default_tags=aws.ProviderDefaultTagsArgs(tags=tags))
    opts = pulumi.ResourceOptions(provider=provider)
    checked = _checked_renderer(renderer, [settings.hf_token, settings.api_key])

    ports = tuple(target_ports(plan))
    kind = plan.network.load_balancer
    zones = resolve_zones(plan, provider, reservation_zone=aws_options.capacity_reservation_zone)
    _warn_about_zones(plan, zones, aws_options)
    network = Network(stem, NetworkArgs(
        vpc_cidr=settings.vpc_cidr, listener_ports=listener_ports(kind, settings.certificate_arn),
        target_ports=ports, allowed_cidrs=settings.allowed_cidrs, efa=is_multinode(plan) and plan.network.rdma == "efa",
        node_zone_ids=zones.node_zone_ids, lb_zone_ids=zones.lb_zone_ids,
        reserve_head_ips=is_multinode(plan), tags=tags), opts)
    secrets = Secrets(stem, SecretsArgs(
        hf_token_name=secret_names.hf_token_name, api_key_name=secret_names.api_key_name,
        hf_token=settings.hf_token, api_key=settings.api_key, weights_bucket=weights_bucket(plan), tags=tags,
        stack=stack, claims_head_address=is_multinode(plan)), opts)
    lb = LoadBalancer(stem, LoadBalancerArgs(
        kind=kind, vpc_id=network.vpc.id, public_subnet_ids=[s.id for s in network.public_subnets],
        security_group_id=network.lb_sg.id, target_ports=ports, health_path=plan.engine.health_path,
        idle_timeout_s=idle_timeout_s(plan), deregistration_delay_s=deregistration_delay_s(plan),
        certificate_arn=settings.certificate_arn, tags=tags), opts)
    # Packed nodes register their other engine ports on the one target group at boot: allowed before they start.
    ports_policy = attach_port_targets(stem, plan, secrets.role, lb.target_groups[0], opts)
    compute = Compute(stem, ComputeArgs(
        plan=plan, subnets=subnet_cidrs(settings.vpc_cidr), private_subnet_ids=[s.id for s in network.private_subnets],
        node_security_group_id=network.node_sg.id,
        efa_security_group_id=network.efa_sg.id if network.efa_sg is not None else None,
        instance_profile_arn=secrets.instance_profile.arn, target_group_arns=[t.arn for t in lb.target_groups],
        target_ports=ports, render_user_data=checked, tags=tags, image_id=aws_options.image_id,
        capacity_reservation_id=aws_options.capacity_reservation_id, capacity_block=aws_options.capacity_block,
        spot_instance_types=spot_types(plan, zones.offered, zones.node_zone_ids)),
        pulumi.ResourceOptions(provider=provider, depends_on=[secrets, *([ports_policy] if ports_policy else [])]))
    scaling = (attach_autoscaling(stem, plan, compute.groups[0], load_balancer_arn=lb.lb.arn,
                                  target_group_arns=[t.arn for t in lb.target_groups],
                                  opts=pulumi.ResourceOptions(provider=provider, parent=compute))
               if scales(plan) else [])
    return {
        "autoscaling_resources": [r.urn for r in scaling],
        "endpoint": lb.endpoint,
        "vpc_id": network.vpc.id,
        "load_balancer_dns": lb.lb.dns_name,
        "hf_token_secret": secret_names.hf_token_name,
        "api_key_secret": secret_names.api_key_name,
        "image_id": compute.image_id,
        "image_pinned": aws_options.image_id is not None,
        "head_private_ips": compute.head_ips,
        "node_zone_ids": network.node_zone_ids,
    }


def _warn_about_zones(plan: Plan, zones: Zones, options: AwsOptions) -> None:
    """Say at preview when the replicas cannot spread over two zones, and why."""
    if zones.spread or plan.deployment.replicas < 2:
        return
    why = (f"the capacity reservation holds them in {zones.node_zone_ids[0]}" if options.capacity_reservation_zone
           else f"only {zones.node_zone_ids[0]} offers {plan.deployment.instance_type}")
    pulumi.log.warn(f"all {plan.deployment.replicas} replicas run in one zone ({why}): a zone outage stops the "
                    "service")


def _default_renderer(plan: Plan, secrets: SecretsPlan) -> UserDataRenderer:
    from infragen.render import render_user_data

    def render(role: Role, head_address: str | None) -> str:
        return render_user_data(plan, role, head_address=head_address, secrets=secrets)

    return render


def _checked_renderer(renderer: UserDataRenderer, secrets: list[pulumi.Output[str]]) -> UserDataRenderer:
    """Wrap the renderer: the text must be valid user-data with no credential-looking string, and (checked
    once the secret values are known) must not contain either secret value."""

    def render(role: Role, head_address: str | None) -> str:
        text = check_user_data(renderer(role, head_address), max_bytes=4 * USER_DATA_MAX_BYTES,
                               what=f"{role} user-data")
        # The check runs inside apply so the values never leave their Outputs; a leak fails the update.
        pulumi.Output.all(*secrets).apply(lambda values: check_secret_free(text, values, what=f"{role} user-data")
                                          and None)
        return text

    return render
