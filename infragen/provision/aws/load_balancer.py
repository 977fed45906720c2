"""Load balancer component: an internet-facing ALB (or NLB) in the public subnets, one target group at the first
engine port (packed replicas: the nodes register port+1, ... on it themselves), HTTP listener, HTTPS with a
certificate.

Reads ports, health path and idle timeout from the plan; makes no sizing decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pulumi
import pulumi_aws as aws

HTTP_PORT = 80
HTTPS_PORT = 443
#: TLS policy of the HTTPS listener (TLS 1.2+; AWS's recommended policy family as of 2023).
SSL_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"


@dataclass(frozen=True)
class LoadBalancerArgs:
    """What the load balancer needs."""

    kind: Literal["alb", "nlb"]
    """Application (HTTP) or network (TCP) load balancer."""
    vpc_id: pulumi.Input[str]
    """VPC of the target groups."""
    public_subnet_ids: list[pulumi.Input[str]]
    """Public subnets (one per AZ) the load balancer lives in."""
    security_group_id: pulumi.Input[str]
    """Security group of the load balancer."""
    target_ports: tuple[int, ...]
    """Engine ports on each node; the target group's own port is the first (the others are registered by the node
    as instance + port targets, so one target group reaches any number of engines)."""
    health_path: str
    """HTTP path the health check requests."""
    idle_timeout_s: int
    """Idle timeout (streamed generations keep a connection open this long between tokens)."""
    deregistration_delay_s: int
    """How long a leaving target keeps its open streams (at least the idle timeout, within ELB's range)."""
    certificate_arn: str | None
    """ACM certificate for the HTTPS (ALB) / TLS (NLB) listener; None = plain HTTP only."""
    tags: dict[str, str]
    """Tags for every resource (plan digest included)."""


class LoadBalancer(pulumi.ComponentResource):
    """Internet-facing load balancer with one target group for every engine port."""

    def __init__(self, name: str, args: LoadBalancerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("infragen:aws:LoadBalancer", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        alb = args.kind == "alb"
        lb_kwargs: dict[str, object] = {"idle_timeout": args.idle_timeout_s} if alb else {}
        self.lb = aws.lb.LoadBalancer(
            f"{name}-lb", load_balancer_type="application" if alb else "network", internal=False,
            subnets=args.public_subnet_ids, security_groups=[args.security_group_id],
            drop_invalid_header_fields=True if alb else None, tags=args.tags, opts=child, **lb_kwargs)

        self.target_groups: list[aws.lb.TargetGroup] = []
        for port in args.target_ports[:1]:
            # The health check runs on each target's own port ("traffic-port"), so every engine is checked.
            self.target_groups.append(aws.lb.TargetGroup(
                f"{name}-tg-{port}", port=port, protocol="HTTP" if alb else "TCP", target_type="instance",
                vpc_id=args.vpc_id, deregistration_delay=args.deregistration_delay_s,
                health_check=aws.lb.TargetGroupHealthCheckArgs(
                    enabled=True, protocol="HTTP", port="traffic-port", path=args.health_path, matcher="200",
                    interval=15, timeout=5, healthy_threshold=2, unhealthy_threshold=3),
                tags=args.tags, opts=child))

        # ALB: the API key guards only vLLM's /v1 routes, so only /v1/* and the health path are forwarded (rules
        # below); everything else (/metrics, /tokenize, /invocations...) gets a 404 from the load balancer.
        forward = aws.lb.ListenerDefaultActionArgs(
            type="fixed-response", fixed_response=aws.lb.ListenerDefaultActionFixedResponseArgs(
                content_type="text/plain", message_body="not found", status_code="404"),
        ) if alb else aws.lb.ListenerDefaultActionArgs(type="forward", target_group_arn=self.target_groups[0].arn)
        tcp_timeout = {} if alb else {"tcp_idle_timeout_seconds": args.idle_timeout_s}

        self.listeners: list[aws.lb.Listener] = []
        if args.certificate_arn:
            # With TLS available, plain HTTP only redirects: the API key must not cross the internet in clear.
            self.listeners.append(aws.lb.Listener(
                f"{name}-https", load_balancer_arn=self.lb.arn, port=HTTPS_PORT, protocol="HTTPS" if alb else "TLS",
                certificate_arn=args.certificate_arn, ssl_policy=SSL_POLICY, default_actions=[forward],
                # An NLB TLS listener's idle timeout is fixed at 350 s (ELB NLB guide): only TCP takes one.
                tags=args.tags, opts=child))
            if alb:
                self.listeners.append(aws.lb.Listener(
                    f"{name}-http", load_balancer_arn=self.lb.arn, port=HTTP_PORT, protocol="HTTP",
                    default_actions=[aws.lb.ListenerDefaultActionArgs(
                        type="redirect", redirect=aws.lb.ListenerDefaultActionRedirectArgs(
                            port=str(HTTPS_PORT), protocol="HTTPS", status_code="HTTP_301"))],
                    tags=args.tags, opts=child))
            scheme = "https"
        else:
            self.listeners.append(aws.lb.Listener(
                f"{name}-http", load_balancer_arn=self.lb.arn, port=HTTP_PORT, protocol="HTTP" if alb else "TCP",
                default_actions=[forward], tags=args.tags, opts=child, **tcp_timeout))
            scheme = "http"
        if alb:
            serving = self.listeners[0]
            aws.lb.ListenerRule(
                f"{name}-api", listener_arn=serving.arn, priority=10,
                conditions=[aws.lb.ListenerRuleConditionArgs(path_pattern=aws.lb.ListenerRuleConditionPathPatternArgs(
                    values=list(api_paths(args.health_path))))],
                actions=[aws.lb.ListenerRuleActionArgs(type="forward", forward=aws.lb.ListenerRuleActionForwardArgs(
                    target_groups=[aws.lb.ListenerRuleActionForwardTargetGroupArgs(arn=tg.arn, weight=1)
                                   for tg in self.target_groups]))],
                tags=args.tags, opts=child)
        self.endpoint = pulumi.Output.concat(f"{scheme}://", self.lb.dns_name)
        self.register_outputs({"endpoint": self.endpoint, "target_group_arns": [t.arn for t in self.target_groups]})


def api_paths(health_path: str) -> tuple[str, ...]:
    """Paths the ALB forwards: the OpenAI API under /v1 (what VLLM_API_KEY guards) and the health path."""
    return ("/v1/*", health_path)


def listener_ports(kind: Literal["alb", "nlb"], certificate_arn: str | None) -> tuple[int, ...]:
    """Ports the load balancer listens on, for the security group."""
    if not certificate_arn:
        return (HTTP_PORT,)
    return (HTTP_PORT, HTTPS_PORT) if kind == "alb" else (HTTPS_PORT,)
