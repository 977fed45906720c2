"""Alibaba Cloud load balancer component: an Internet ALB (or NLB) in front of the serving nodes.

Listens on the engine port (and 443 with a certificate), forwards to the engine ports the layout lists,
health-checks the plan's health path. Makes no decision about how many backends there are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pulumi
import pulumi_alicloud as alicloud

HTTPS_PORT = 443


@dataclass(frozen=True)
class Backend:
    """One engine instance behind the load balancer."""

    instance_id: pulumi.Input[str]
    """ECS instance id."""
    port: int
    """Engine port on that instance."""


@dataclass(frozen=True)
class LoadBalancerArgs:
    """Inputs of `AliLoadBalancer`."""

    prefix: str
    """Name prefix (the workload name)."""
    kind: Literal["alb", "nlb"]
    """ALB (HTTP, layer 7) or NLB (TCP, layer 4), from plan.network.load_balancer."""
    vpc_id: pulumi.Input[str]
    """VPC."""
    vswitch_ids: Sequence[pulumi.Input[str]]
    """Two LB vSwitches, one per zone."""
    zone_ids: Sequence[pulumi.Input[str]]
    """Their zones."""
    security_group_id: pulumi.Input[str]
    """LB security group (clients to the listener ports only)."""
    listener_port: int
    """Port clients connect to (= the engine port)."""
    backends: Sequence[Backend]
    """Engine instances to forward to."""
    health_path: str
    """HTTP path the health check requests (plan.engine.health_path)."""
    idle_timeout_s: int
    """Listener idle timeout, long enough for streamed generations."""
    tags: Mapping[str, str]
    """Tags for every resource."""
    certificate_id: str | None = None
    """Alibaba SSL certificate id for an HTTPS listener on 443; None = the engine-port listener only."""


class AliLoadBalancer(pulumi.ComponentResource):
    """Load balancer, server group with an HTTP health check, and listeners."""

    dns_name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    listener_ports: tuple[int, ...]

    def __init__(self, name: str, args: LoadBalancerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("infragen:alicloud:LoadBalancer", name, None, opts)
        self.listener_ports = listener_ports(args.listener_port, args.certificate_id)
        if args.kind == "alb":
            self.dns_name = self._alb(name, args)
        else:
            self.dns_name = self._nlb(name, args)
        scheme = "https" if args.certificate_id else "http"
        port = HTTPS_PORT if args.certificate_id else args.listener_port
        self.endpoint = pulumi.Output.concat(scheme, "://", self.dns_name, ":", str(port))
        self.register_outputs({"dns_name": self.dns_name, "endpoint": self.endpoint})

    def _alb(self, name: str, args: LoadBalancerArgs) -> pulumi.Output[str]:
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        lb = alicloud.alb.LoadBalancer(
            f"{name}-alb", load_balancer_name=f"{args.prefix}-alb", vpc_id=args.vpc_id, address_type="Internet",
            address_allocated_mode="Dynamic", load_balancer_edition="Standard",
            load_balancer_billing_config=alicloud.alb.LoadBalancerLoadBalancerBillingConfigArgs(pay_type="PayAsYouGo"),
            zone_mappings=[alicloud.alb.LoadBalancerZoneMappingArgs(vswitch_id=v, zone_id=z)
                           for v, z in zip(args.vswitch_ids, args.zone_ids, strict=True)],
            tags=tags, opts=child)
        alicloud.alb.LoadBalancerSecurityGroupAttachment(
            f"{name}-alb-sg", load_balancer_id=lb.id, security_group_id=args.security_group_id, opts=child)
        group = alicloud.alb.ServerGroup(
            f"{name}-alb-servers", server_group_name=f"{args.prefix}-engines", server_group_type="Instance",
            protocol="HTTP", vpc_id=args.vpc_id, scheduler="Wrr",
            health_check_config=alicloud.alb.ServerGroupHealthCheckConfigArgs(
                health_check_enabled=True, health_check_protocol="HTTP", health_check_method="GET",
                health_check_path=args.health_path, health_check_codes=["http_2xx"],
                health_check_connect_port=0, health_check_interval=10, health_check_timeout=5,
                healthy_threshold=2, unhealthy_threshold=3),
            sticky_session_config=alicloud.alb.ServerGroupStickySessionConfigArgs(sticky_session_enabled=False),
            servers=[alicloud.alb.ServerGroupServerArgs(server_id=b.instance_id, server_type="Ecs", port=b.port,
                                                        weight=100, description=f"engine :{b.port}")
                     for b in args.backends],
            tags=tags, opts=child)
        forward = [alicloud.alb.ListenerDefaultActionArgs(
            type="ForwardGroup",
            forward_group_config=alicloud.alb.ListenerDefaultActionForwardGroupConfigArgs(
                server_group_tuples=[alicloud.alb.ListenerDefaultActionForwardGroupConfigServerGroupTupleArgs(
                    server_group_id=group.id)]))]
        # request_timeout bounds a whole response; streamed generations need as long as the idle timeout.
        alicloud.alb.Listener(
            f"{name}-alb-http", load_balancer_id=lb.id, listener_protocol="HTTP", listener_port=args.listener_port,
            idle_timeout=args.idle_timeout_s, request_timeout=args.idle_timeout_s, default_actions=forward,
            listener_description=f"{args.prefix} engine port", tags=tags, opts=child)
        if args.certificate_id:
            alicloud.alb.Listener(
                f"{name}-alb-https", load_balancer_id=lb.id, listener_protocol="HTTPS", listener_port=HTTPS_PORT,
                idle_timeout=args.idle_timeout_s, request_timeout=args.idle_timeout_s, default_actions=forward,
                certificates=alicloud.alb.ListenerCertificatesArgs(certificate_id=args.certificate_id),
                listener_description=f"{args.prefix} https", tags=tags, opts=child)
        return lb.dns_name

    def _nlb(self, name: str, args: LoadBalancerArgs) -> pulumi.Output[str]:
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        lb = alicloud.nlb.LoadBalancer(
            f"{name}-nlb", load_balancer_name=f"{args.prefix}-nlb", vpc_id=args.vpc_id, address_type="Internet",
            address_ip_version="ipv4", load_balancer_type="network",
            zone_mappings=[alicloud.nlb.LoadBalancerZoneMappingArgs(vswitch_id=v, zone_id=z)
                           for v, z in zip(args.vswitch_ids, args.zone_ids, strict=True)],
            security_group_ids=[args.security_group_id], tags=tags, opts=child)
        group = alicloud.nlb.ServerGroup(
            f"{name}-nlb-servers", server_group_name=f"{args.prefix}-engines", server_group_type="Instance",
            protocol="TCP", vpc_id=args.vpc_id, scheduler="Wrr",
            health_check=alicloud.nlb.ServerGroupHealthCheckArgs(
                health_check_enabled=True, health_check_type="HTTP", health_check_url=args.health_path,
                health_check_http_codes=["http_2xx"], http_check_method="GET", health_check_connect_port=0,
                health_check_interval=10, health_check_connect_timeout=5, healthy_threshold=2,
                unhealthy_threshold=3),
            tags=tags, opts=child)
        for i, backend in enumerate(args.backends):
            alicloud.nlb.ServerGroupServerAttachment(
                f"{name}-nlb-server-{i}", server_group_id=group.id, server_id=backend.instance_id,
                server_type="Ecs", port=backend.port, weight=100, opts=child)
        # NLB TCP listeners accept an idle timeout of 1~900 s (pulumi-alicloud 4.0.0 nlb.Listener docs).
        alicloud.nlb.Listener(
            f"{name}-nlb-tcp", load_balancer_id=lb.id, listener_protocol="TCP", listener_port=args.listener_port,
            server_group_id=group.id, idle_timeout=args.idle_timeout_s,
            listener_description=f"{args.prefix} engine port", tags=tags, opts=child)
        if args.certificate_id:
            alicloud.nlb.Listener(
                f"{name}-nlb-tls", load_balancer_id=lb.id, listener_protocol="TCPSSL", listener_port=HTTPS_PORT,
                server_group_id=group.id, idle_timeout=args.idle_timeout_s, certificate_ids=[args.certificate_id],
                listener_description=f"{args.prefix} tls", tags=tags, opts=child)
        return lb.dns_name


def listener_ports(engine_port: int, certificate_id: str | None) -> tuple[int, ...]:
    """Ports the load balancer listens on: the engine port, plus 443 when a certificate is configured."""
    return (engine_port, HTTPS_PORT) if certificate_id else (engine_port,)
