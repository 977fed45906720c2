"""Alibaba Cloud load balancer component: an Internet ALB (or NLB) in front of the serving nodes.

Listens on 80 (HTTP) and, with a certificate, 443 (HTTPS; 80 then redirects there), like the AWS program; an ALB
forwards only `/v1/*` (which vLLM's API key guards) and the health path, and answers 404 to everything else.
Forwards to the engine ports the layout lists. Makes no decision about how many backends there are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pulumi
import pulumi_alicloud as alicloud

HTTP_PORT = 80
HTTPS_PORT = 443
#: Paths a client may reach through an ALB: the OpenAI API (vLLM's --api-key guards only /v1) and the health path.
API_PATH = "/v1/*"


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
    """Engine port of the first instance (kept for the NLB health check; clients use 80/443)."""
    backends: Sequence[Backend] | None
    """Engine instances to forward to; None = the server group's members are managed by ESS (replica groups)."""
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
    server_group_id: pulumi.Output[str]
    listeners: list[pulumi.Resource]

    def __init__(self, name: str, args: LoadBalancerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("infragen:alicloud:LoadBalancer", name, None, opts)
        self.listeners = []
        self.listener_ports = listener_ports(args.kind, args.certificate_id)
        if args.kind == "alb":
            self.dns_name = self._alb(name, args)
        else:
            self.dns_name = self._nlb(name, args)
        scheme = "https" if args.certificate_id else "http"
        self.endpoint = pulumi.Output.concat(scheme, "://", self.dns_name)
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
            servers=None if args.backends is None else [
                alicloud.alb.ServerGroupServerArgs(server_id=b.instance_id, server_type="Ecs", port=b.port,
                                                   weight=100, description=f"engine :{b.port}")
                for b in args.backends],
            tags=tags,
            # ESS adds and removes the replica groups' nodes: the program must not undo that on the next update.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["servers"] if args.backends is None else None))
        self.server_group_id = group.id
        # A listener's default action can only forward (provider: "Value: ForwardGroup"); rules below decide.
        forward = [alicloud.alb.ListenerDefaultActionArgs(
            type="ForwardGroup",
            forward_group_config=alicloud.alb.ListenerDefaultActionForwardGroupConfigArgs(
                server_group_tuples=[alicloud.alb.ListenerDefaultActionForwardGroupConfigServerGroupTupleArgs(
                    server_group_id=group.id)]))]
        # request_timeout bounds a whole response; streamed generations need as long as the idle timeout.
        http = alicloud.alb.Listener(
            f"{name}-alb-http", load_balancer_id=lb.id, listener_protocol="HTTP", listener_port=HTTP_PORT,
            idle_timeout=args.idle_timeout_s, request_timeout=args.idle_timeout_s, default_actions=forward,
            listener_description=f"{args.prefix} http", tags=tags, opts=child)
        self.listeners.append(http)
        if args.certificate_id:
            https = alicloud.alb.Listener(
                f"{name}-alb-https", load_balancer_id=lb.id, listener_protocol="HTTPS", listener_port=HTTPS_PORT,
                idle_timeout=args.idle_timeout_s, request_timeout=args.idle_timeout_s, default_actions=forward,
                certificates=alicloud.alb.ListenerCertificatesArgs(certificate_id=args.certificate_id),
                listener_description=f"{args.prefix} https", tags=tags, opts=child)
            self.listeners.append(https)
            self._api_rules(f"{name}-alb-https", https, group.id, args.health_path)
            # Plain HTTP only redirects: the API key never crosses the internet in clear text.
            alicloud.alb.Rule(
                f"{name}-alb-http-redirect", listener_id=http.id, priority=1, rule_name=f"{args.prefix}-to-https",
                rule_conditions=[_paths(["/*"])],
                rule_actions=[alicloud.alb.RuleRuleActionArgs(
                    order=1, type="Redirect", redirect_config=alicloud.alb.RuleRuleActionRedirectConfigArgs(
                        protocol="HTTPS", port=str(HTTPS_PORT), http_code="301"))],
                opts=child)
        else:
            self._api_rules(f"{name}-alb-http", http, group.id, args.health_path)
        return lb.dns_name

    def _api_rules(self, name: str, listener: alicloud.alb.Listener, group_id: pulumi.Input[str],
                   health_path: str) -> None:
        """Forward `/v1/*` and the health path; 404 for everything else (/metrics, /docs, ... stay private)."""
        child = pulumi.ResourceOptions(parent=self)
        alicloud.alb.Rule(
            f"{name}-api", listener_id=listener.id, priority=1, rule_name="api-and-health",
            rule_conditions=[_paths([API_PATH, health_path])],
            rule_actions=[alicloud.alb.RuleRuleActionArgs(
                order=1, type="ForwardGroup", forward_group_config=alicloud.alb.RuleRuleActionForwardGroupConfigArgs(
                    server_group_tuples=[alicloud.alb.RuleRuleActionForwardGroupConfigServerGroupTupleArgs(
                        server_group_id=group_id)]))],
            opts=child)
        alicloud.alb.Rule(
            f"{name}-not-found", listener_id=listener.id, priority=2, rule_name="everything-else",
            rule_conditions=[_paths(["/*"])],
            rule_actions=[alicloud.alb.RuleRuleActionArgs(
                order=1, type="FixedResponse", fixed_response_config=alicloud.alb.RuleRuleActionFixedResponseConfigArgs(
                    content="not found", content_type="text/plain", http_code="404"))],
            opts=child)

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
        self.server_group_id = group.id
        for i, backend in enumerate(args.backends or ()):
            alicloud.nlb.ServerGroupServerAttachment(
                f"{name}-nlb-server-{i}", server_group_id=group.id, server_id=backend.instance_id,
                server_type="Ecs", port=backend.port, weight=100, opts=child)
        # NLB TCP listeners accept an idle timeout of 1~900 s (pulumi-alicloud 4.0.0 nlb.Listener docs). Layer 4:
        # no path filter, so an NLB forwards every path (docs/alicloud.md); with a certificate only TLS is offered.
        if not args.certificate_id:
            self.listeners.append(alicloud.nlb.Listener(
                f"{name}-nlb-tcp", load_balancer_id=lb.id, listener_protocol="TCP", listener_port=HTTP_PORT,
                server_group_id=group.id, idle_timeout=args.idle_timeout_s,
                listener_description=f"{args.prefix} http", tags=tags, opts=child))
        else:
            self.listeners.append(alicloud.nlb.Listener(
                f"{name}-nlb-tls", load_balancer_id=lb.id, listener_protocol="TCPSSL", listener_port=HTTPS_PORT,
                server_group_id=group.id, idle_timeout=args.idle_timeout_s, certificate_ids=[args.certificate_id],
                listener_description=f"{args.prefix} tls", tags=tags, opts=child))
        return lb.dns_name


def listener_ports(kind: str, certificate_id: str | None) -> tuple[int, ...]:
    """Ports the load balancer listens on: 80, plus 443 with a certificate (an NLB then offers TLS on 443 only:
    it cannot redirect)."""
    if not certificate_id:
        return (HTTP_PORT,)
    return (HTTPS_PORT,) if kind == "nlb" else (HTTP_PORT, HTTPS_PORT)


def _paths(values: list[str]) -> alicloud.alb.RuleRuleConditionArgs:
    return alicloud.alb.RuleRuleConditionArgs(type="Path",
                                              path_config=alicloud.alb.RuleRuleConditionPathConfigArgs(values=values))
