"""Stack settings read from Pulumi config (`infragen:*` keys): which workload or plan, secrets, network options.

Reads config only; never plans, never creates resources. Secret values stay pulumi Outputs (never plain str).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from infragen.errors import InputError

CONFIG_NAMESPACE = "infragen"
#: Who may reach the load balancer when `infragen:allowedCidrs` is not set: anyone (it is a public API).
DEFAULT_ALLOWED_CIDRS: tuple[str, ...] = ("0.0.0.0/0",)
#: VPC address space when `infragen:vpcCidr` is not set (a private RFC 1918 /16).
DEFAULT_VPC_CIDR = "10.40.0.0/16"


@dataclass(frozen=True)
class StackSettings:
    """What one stack's config says, resolved and validated."""

    project_root: Path
    """Directory of Pulumi.yaml; workload and plan paths are relative to it."""
    workload_path: Path | None
    """Workload file to plan (`infragen:workload`), absolute; None when a plan file is pinned instead."""
    plan_path: Path | None
    """Reviewed plan JSON to deploy as is (`infragen:planFile`), absolute; None = plan the workload."""
    hf_token: pulumi.Output[str]
    """Hugging Face token (`infragen:hfToken`, secret config); stored only in the cloud's secret store."""
    api_key: pulumi.Output[str]
    """API key clients must send (`infragen:apiKey`, secret config); stored only in the cloud's secret store."""
    certificate_arn: str | None = None
    """TLS certificate for the HTTPS listener (`infragen:certificateArn`); None = HTTP listener only."""
    allowed_cidrs: tuple[str, ...] = DEFAULT_ALLOWED_CIDRS
    """Client networks allowed to reach the load balancer (`infragen:allowedCidrs`)."""
    vpc_cidr: str = DEFAULT_VPC_CIDR
    """Address space of the VPC (`infragen:vpcCidr`)."""


def load_settings(project_root: Path, config: pulumi.Config | None = None) -> StackSettings:
    """Read and check the `infragen:*` stack config (call inside a Pulumi program)."""
    cfg = config if config is not None else pulumi.Config(CONFIG_NAMESPACE)
    workload = cfg.get("workload")
    plan_file = cfg.get("planFile")
    if not workload and not plan_file:
        raise InputError(
            "stack config sets neither infragen:workload nor infragen:planFile",
            fix="pulumi config set infragen:workload examples/team-chatbot.yaml",
        )
    plan_path = _existing(project_root, plan_file, "infragen:planFile") if plan_file else None
    workload_path = None if plan_path else _existing(project_root, workload, "infragen:workload")
    return StackSettings(
        project_root=project_root,
        workload_path=workload_path,
        plan_path=plan_path,
        hf_token=_require_secret(cfg, "hfToken"),
        api_key=_require_secret(cfg, "apiKey"),
        certificate_arn=cfg.get("certificateArn") or None,
        allowed_cidrs=parse_cidrs(cfg.get_object("allowedCidrs"), "infragen:allowedCidrs", DEFAULT_ALLOWED_CIDRS),
        vpc_cidr=parse_vpc_cidr(cfg.get("vpcCidr") or DEFAULT_VPC_CIDR),
    )


def parse_cidrs(value: Any, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """A list of IPv4 CIDRs (or one CIDR string), normalised; `default` when unset."""
    if value is None:
        return default
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise InputError(f"{key}: expected a non-empty list of CIDRs such as [\"203.0.113.0/24\"], got {value!r}")
    out: list[str] = []
    for item in items:
        try:
            out.append(str(ipaddress.IPv4Network(str(item), strict=False)))
        except ValueError as exc:
            raise InputError(f"{key}: {item!r} is not an IPv4 CIDR ({exc})") from None
    return tuple(out)


def parse_vpc_cidr(value: str) -> str:
    """The VPC CIDR: an IPv4 private network between /16 and /20 (room for the subnets)."""
    try:
        net = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise InputError(f"infragen:vpcCidr: {value!r} is not an IPv4 network ({exc})") from None
    if not net.is_private or not 16 <= net.prefixlen <= 20:
        raise InputError(f"infragen:vpcCidr: {value} must be a private network between /16 and /20",
                         fix="pulumi config set infragen:vpcCidr 10.40.0.0/16")
    return str(net)


def _existing(root: Path, rel: str | None, key: str) -> Path:
    path = (root / str(rel)).resolve()
    if not path.is_file():
        raise InputError(f"{key}: {rel} does not exist (paths are relative to {root})")
    return path


def _require_secret(cfg: pulumi.Config, key: str) -> pulumi.Output[str]:
    value = cfg.get_secret(key)
    if value is None:
        raise InputError(
            f"stack config lacks the secret infragen:{key}",
            fix=f"pulumi config set --secret infragen:{key} <value>",
        )
    return value
