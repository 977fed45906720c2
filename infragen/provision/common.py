"""Pure helpers both clouds' provisioners share: resource names, tags carrying the plan digest,
plan-derived stack exports, and checks that rendered user-data is well formed and carries no secret.

No Pulumi resources and no cloud SDK here; nothing here makes a sizing decision.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from infragen.plan import Plan

#: Tag keys every resource carries (AWS and Alibaba both accept `:` in keys).
TAG_WORKLOAD = "infragen:workload"
TAG_DIGEST = "infragen:plan-digest"
TAG_MANAGED_BY = "infragen:managed-by"
#: The Pulumi stack that created a resource (both clouds): scopes a node's permissions and the secret names
#: to its stack.
TAG_STACK = "infragen:stack"
#: Longest name stem; leaves room for a part (`-tg-8001`) and Pulumi's 8-char random suffix within
#: the 32-character limit AWS puts on load balancer and target group names.
NAME_STEM_MAX_CHARS = 14

# Strings that look like credentials (Hugging Face user tokens start with `hf_`; OpenAI-style keys with `sk-`;
# AWS access key ids with AKIA/ASIA). Rendered user-data must reference secrets by name, never carry them.
_SECRET_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"),
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
)


class SecretLeakError(RuntimeError):
    """Rendered text carries a secret value (a bug in the renderer or the program, never user input)."""


def name_stem(plan: Plan) -> str:
    """A short, DNS-safe stem for resource names, derived from the workload name."""
    stem = re.sub(r"[^a-z0-9]+", "-", plan.workload.lower()).strip("-")
    return (stem[:NAME_STEM_MAX_CHARS].rstrip("-")) or "infragen"


#: Longest stack slug: a RAM role name (`<stem>-<slug>-node`) stays within Alibaba's 64 characters.
STACK_SLUG_MAX_CHARS = 40


def stack_slug(stack: str) -> str:
    """The stack name as a resource-name part ([a-z0-9-], at most 40 characters); a name that had to change
    (other characters, too long) gains 6 hex digits of its SHA-256, so two stacks never share a slug."""
    slug = re.sub(r"[^a-z0-9]+", "-", stack.lower()).strip("-")
    if slug == stack and len(slug) <= STACK_SLUG_MAX_CHARS:
        return slug
    digest = hashlib.sha256(stack.encode()).hexdigest()[:6]
    return f"{slug[:STACK_SLUG_MAX_CHARS - 7].strip('-')}-{digest}".lstrip("-")


def resource_name(plan: Plan, part: str) -> str:
    """Logical name of one resource: `<stem>-<part>`."""
    return f"{name_stem(plan)}-{part}"


def plan_tags(plan: Plan, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Tags for every resource: the workload, the plan digest (which plan built it) and the manager."""
    tags = {TAG_WORKLOAD: plan.workload, TAG_DIGEST: plan.digest, TAG_MANAGED_BY: "infragen"}
    if extra:
        tags |= extra
    return tags


def node_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """The tags that reach nodes through a launch template or a group's replacement trigger: without the plan
    digest, which changes with any plan change (a price, an alternative). A node is rolled when what it runs
    changes, and its user data names that (the node digest, docs/bootstrap.md)."""
    return {k: v for k, v in tags.items() if k != TAG_DIGEST}


def plan_exports(plan: Plan) -> dict[str, Any]:
    """Stack exports that come straight from the plan (the same on every cloud)."""
    return {
        "plan_digest": plan.digest,
        "cloud": plan.deployment.cloud,
        "region": plan.deployment.region,
        "instance_type": plan.deployment.instance_type,
        "replicas": plan.deployment.replicas,
        "nodes": plan.deployment.nodes,
        "monthly_cost_usd": round(plan.cost.usd_per_month, 2),
        **_bill_exports(plan),
    }


def _bill_exports(plan: Plan) -> dict[str, Any]:
    """The bill's breakdown (None = no cited price) and the cost per token, when the plan carries them."""
    out: dict[str, Any] = {}
    if plan.bill is not None:
        out["bill_usd_per_month"] = {line.item: line.usd_per_month_at_peak for line in plan.bill.lines}
        out["bill_total_usd_per_month"] = plan.bill.usd_per_month_at_peak
        out["usd_per_million_output_tokens"] = plan.bill.usd_per_million_output_tokens_at_peak
    if plan.scaling is not None:
        out["monthly_cost_at_profile_usd"] = plan.scaling.usd_per_month_at_profile
        out["replicas_min_max"] = [plan.scaling.min_replicas, plan.scaling.max_replicas]
    return out


def engine_ports(plan: Plan) -> list[int]:
    """Ports the engine instances on one node listen on (packed replicas use port, port+1, ...)."""
    return [plan.engine.port + i for i in range(plan.deployment.replicas_per_node)]


def check_user_data(text: str, *, max_bytes: int, what: str = "user-data") -> str:
    """Reject user-data that is empty, not cloud-init, too large for the cloud, or carries a credential.

    Returns the text unchanged so it can be used inline. Violations are bugs (they raise, not exit 2).
    """
    if not text.strip():
        raise ValueError(f"{what} is empty")
    first = text.lstrip().splitlines()[0]
    if not (first.startswith("#cloud-config") or first.startswith("#!") or first.startswith("Content-Type:")):
        raise ValueError(f"{what} does not start with #cloud-config, #! or a MIME header: {first[:40]!r}")
    size = len(text.encode())
    if size > max_bytes:
        raise ValueError(f"{what} is {size} bytes, over the cloud's {max_bytes}-byte limit")
    for pattern in _SECRET_PATTERNS:
        if pattern.search(text):
            raise SecretLeakError(f"{what} carries something that looks like a credential ({pattern.pattern})")
    return text


def check_secret_free(text: str, secret_values: Iterable[str], *, what: str = "user-data") -> str:
    """Raise SecretLeakError when `text` contains any of the (non-empty) secret values; returns the text."""
    for value in secret_values:
        if value and value in text:
            raise SecretLeakError(f"{what} contains a secret value; secrets must be read from the secret store")
    return text
