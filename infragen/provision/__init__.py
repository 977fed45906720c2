"""Provisioning: turn a Plan into Pulumi resources on the plan's cloud and return the stack exports.

Consumes a Plan only; makes no sizing decision and never imports the sizing engine or the CLI.
Cloud packages are imported lazily so that one cloud's SDK is loaded only when its stack runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infragen.errors import InputError
from infragen.plan import Plan
from infragen.provision.common import plan_exports

if TYPE_CHECKING:
    from infragen.provision.settings import StackSettings

__all__ = ["build_stack"]


def build_stack(plan: Plan, settings: StackSettings) -> dict[str, Any]:
    """Create every resource the plan needs on `plan.deployment.cloud`; returns the stack exports.

    The exports always hold `plan_digest`, `instance_type`, `replicas` and `monthly_cost_usd` (from the plan)
    plus whatever the cloud builder returns (at least `endpoint`).
    """
    cloud = plan.deployment.cloud
    if cloud == "aws":
        from infragen.provision.aws import build_aws

        cloud_exports = build_aws(plan, settings)
    elif cloud == "alicloud":
        from infragen.provision.alicloud import build_alicloud

        cloud_exports = build_alicloud(plan, settings)
    else:  # pragma: no cover - Plan.deployment.cloud is a closed Literal
        raise InputError(f"plan targets cloud {cloud!r}, which infragen cannot provision")
    return {**plan_exports(plan), **cloud_exports}
