"""`infragen preflight`: check, before `pulumi up`, that a cloud account can take a plan (quotas, zones, image,
secrets, certificate) and say what to request. One backend per cloud, imported only when its plan is checked.

Reads the plan and the stack config and calls the cloud's read-only APIs; never imports Pulumi or the
provisioner, never creates anything, never reads a secret value.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from infragen.errors import InfragenError, InputError
from infragen.plan import Plan

__all__ = ["BACKENDS", "Check", "PreflightFailed", "PreflightTarget", "render_checks", "run_preflight"]

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    """The outcome of one check."""

    name: str
    """Short kebab-case name (`vcpu-quota`, `zones`, `image`...)."""
    status: Status
    """ok; warn (deploys, but look); fail (`pulumi up` would fail or not serve)."""
    detail: str
    """What was found, with the figures."""
    fix: str | None = None
    """What to run or request when the status is not ok."""


@dataclass(frozen=True)
class PreflightTarget:
    """What is checked: a plan and, when a stack was named, that stack's config."""

    plan: Plan
    """The plan the stack deploys."""
    source: str
    """What the user named (stack name or file), for messages."""
    stack: str | None = None
    """Stack name, None when a plan or workload file was named directly."""
    config: Mapping[str, Any] = field(default_factory=dict)
    """The stack file's `config:` mapping as written (`infragen:certificateArn`...); secret values stay
    encrypted (`{"secure": ...}`) and are only tested for presence."""

    def setting(self, key: str) -> Any:
        """An `infragen:<key>` config value, or None."""
        return self.config.get(f"infragen:{key}")

    def has_secret(self, key: str) -> bool:
        """True when `infragen:<key>` is set as an encrypted (secret) value."""
        value = self.setting(key)
        return isinstance(value, dict) and bool(value.get("secure"))

    def secret_config_checks(self) -> list[Check]:
        """A named stack must hold the HF token and API key as secret config (both clouds' programs read them)."""
        if self.stack is None:
            return []
        missing = [k for k in ("hfToken", "apiKey") if not self.has_secret(k)]
        if not missing:
            return []
        return [Check("secrets", "fail", f"stack {self.stack} lacks secret config "
                      + ", ".join(f"infragen:{k}" for k in missing),
                      fix="; ".join(f"pulumi config set --stack {self.stack} --secret infragen:{k} ..."
                                    for k in missing))]


#: cloud -> (module, function). A backend is `function(target, clients) -> list[Check]`; `clients` is the
#: backend's own test seam (None = the real SDK with the default credentials).
BACKENDS: dict[str, tuple[str, str]] = {
    "aws": ("infragen.preflight.aws", "check_aws"),
    "alicloud": ("infragen.preflight.alicloud", "check_alicloud"),
}

Backend = Callable[[PreflightTarget, Any], list[Check]]


class PreflightFailed(InfragenError):
    """At least one check failed: the deployment would not come up as planned (exit status 3)."""

    exit_code = 3


def run_preflight(target: PreflightTarget, *, clients: Any = None) -> list[Check]:
    """Run every check of the plan's cloud; returns them in order (never raises for a failed check)."""
    cloud = target.plan.deployment.cloud
    entry = BACKENDS.get(cloud)
    if entry is None:
        raise InputError(f"{target.source}: infragen preflight has no checks for cloud {cloud!r} yet",
                         hint=f"clouds with checks: {', '.join(sorted(BACKENDS))}")
    backend: Backend = getattr(importlib.import_module(entry[0]), entry[1])
    return backend(target, clients)


def render_checks(target: PreflightTarget, checks: list[Check]) -> str:
    """A plain-text report: one line per check, its fix indented below."""
    plan = target.plan
    lines = [f"infragen preflight {target.source}  (plan {plan.digest}: {plan.deployment.nodes} x "
             f"{plan.deployment.instance_type} in {plan.deployment.cloud}/{plan.deployment.region})", ""]
    width = max((len(c.name) for c in checks), default=0)
    for c in checks:
        lines.append(f"  {c.status.upper():4}  {c.name:{width}}  {c.detail}")
        if c.fix and c.status != "ok":
            lines.append(f"  {'':4}  {'':{width}}  -> {c.fix}")
    failed = sum(c.status == "fail" for c in checks)
    warned = sum(c.status == "warn" for c in checks)
    lines += ["", f"{len(checks)} checks: {failed} failed, {warned} warnings"]
    return "\n".join(lines)
