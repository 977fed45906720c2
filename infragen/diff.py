"""Compare two Plans (base branch vs pull request): a structured diff, rendered as markdown, a table or JSON.

Pure: reads only the Plans it is given; never plans, never reads files, never imports click, jinja2 or Pulumi.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from infragen.errors import InputError
from infragen.plan import Plan

DiffStatus = Literal["new", "removed", "changed", "unchanged"]
ValueKind = Literal["text", "count", "ms", "rate", "usd", "fraction"]

#: Leaf paths listed under "other changes" at most (the rest is counted), so one comment stays readable.
MAX_OTHER_CHANGES = 12


@dataclass(frozen=True)
class _Row:
    label: str
    kind: ValueKind
    read: Callable[[Plan], Any]


def _gpu_label(p: Plan) -> str:
    return p.deployment.gpu or "none (CPU)"


#: The summary rows, in display order: what a reviewer asks first about a deployment change.
_ROWS: tuple[_Row, ...] = (
    _Row("Cloud / region", "text", lambda p: f"{p.deployment.cloud} {p.deployment.region}"),
    _Row("Model", "text", lambda p: p.model.id),
    _Row("Instance type", "text", lambda p: p.deployment.instance_type),
    _Row("GPU", "text", _gpu_label),
    _Row("Nodes", "count", lambda p: p.deployment.nodes),
    _Row("Replicas", "count", lambda p: p.deployment.replicas),
    _Row("GPUs (total)", "count", lambda p: p.deployment.nodes * p.deployment.gpus_per_node),
    _Row("TP × PP", "text", lambda p: f"{p.deployment.tp} × {p.deployment.pp}"),
    _Row("Precision / KV cache", "text", lambda p: f"{p.deployment.precision} / {p.deployment.kv_cache_dtype}"),
    _Row("Engine", "text", lambda p: f"{p.engine.name} {p.engine.version}"),
    _Row("Max context (tokens)", "count", lambda p: p.engine.max_model_len),
    _Row("Pricing", "text", lambda p: p.deployment.pricing),
    _Row("Expected TTFT at peak", "ms", lambda p: p.estimate.ttft_ms),
    _Row("Expected TPOT at peak", "ms", lambda p: p.estimate.tpot_ms),
    _Row("Capacity (req/s, all replicas)", "rate",
         lambda p: p.estimate.capacity_requests_per_s * p.deployment.replicas),
    _Row("Utilisation at peak", "fraction", lambda p: p.estimate.utilisation),
    _Row("Monthly cost", "usd", lambda p: p.cost.usd_per_month),
    _Row("Spot: on-demand base (replicas)", "count", lambda p: p.spot.on_demand_base_replicas if p.spot else None),
    _Row("Spot: expected monthly cost", "usd", lambda p: p.spot.usd_per_month_expected if p.spot else None),
    _Row("Monthly cost at the daily profile", "usd",
         lambda p: p.scaling.usd_per_month_at_profile if p.scaling else None),
    *(_Row(f"Bill: {label}", "usd", lambda p, item=item: _bill_line(p, item)) for item, label in (
        ("load-balancer", "load balancer"), ("nat-gateway", "NAT gateway"), ("model-download", "model downloads"),
        ("block-storage", "block storage"), ("cross-zone", "cross-zone traffic"), ("egress", "egress"))),
    _Row("Whole bill at peak (month)", "usd", lambda p: p.bill.usd_per_month_at_peak if p.bill else None),
    _Row("$ per 1M output tokens at peak", "usd",
         lambda p: p.bill.usd_per_million_output_tokens_at_peak if p.bill else None),
    _Row("$ per 1M output tokens at the average", "usd",
         lambda p: p.bill.usd_per_million_output_tokens_at_average if p.bill else None),
)


def _bill_line(p: Plan, item: str) -> float | None:
    """One priced line of the plan's bill (None without a bill or a price)."""
    if p.bill is None:
        return None
    return next((x.usd_per_month_at_peak for x in p.bill.lines if x.item == item), None)


#: DeploymentPlan fields the rows above show (the others, e.g. cpu_arch, are listed under "other changes").
_DEPLOYMENT_ROWS = ("cloud", "region", "instance_type", "gpu", "nodes", "replicas", "tp", "pp", "precision",
                    "kv_cache_dtype", "pricing", "engine")


@dataclass(frozen=True)
class FieldChange:
    """One summary row: the value on each side, formatted, and the change between them."""

    label: str
    """Row name for humans (`Instance type`)."""
    kind: ValueKind
    """How the values are formatted and whether a numeric delta exists."""
    before: Any
    """Raw value in the base plan; None when the base has no plan."""
    after: Any
    """Raw value in the new plan; None when the new side has no plan."""

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def delta(self) -> float | None:
        """after - before for numeric rows with both sides present, else None."""
        if self.kind == "text" or self.before is None or self.after is None:
            return None
        return float(self.after) - float(self.before)

    @property
    def delta_pct(self) -> float | None:
        """Relative change in percent; None when not numeric, a side is missing or the base is 0."""
        d = self.delta
        if d is None or float(self.before) == 0:
            return None
        return 100.0 * d / float(self.before)


@dataclass(frozen=True)
class PlanDiff:
    """What changes between a base plan and a new plan of one workload."""

    status: DiffStatus
    """`new` (no base), `removed` (no new plan), `changed` or `unchanged` (same digest)."""
    workload: str
    """Workload name (from the new plan, else the base)."""
    base_digest: str | None
    """Digest of the base plan; None when there is none."""
    new_digest: str | None
    """Digest of the new plan; None when there is none."""
    rows: tuple[FieldChange, ...]
    """The summary rows, in display order."""
    other_changes: tuple[str, ...]
    """Dotted paths of further fields that differ (engine.argv, storage.volume_gib...), first MAX_OTHER_CHANGES."""
    other_changes_total: int
    """How many further fields differ in all."""

    def row(self, label: str) -> FieldChange:
        for r in self.rows:
            if r.label == label:
                return r
        raise KeyError(label)

    @property
    def cost(self) -> FieldChange:
        return self.row("Monthly cost")


def diff_plans(base: Plan | None, new: Plan | None) -> PlanDiff:
    """The diff from `base` to `new`; either side may be None (a new or a removed stack), not both."""
    if base is None and new is None:
        raise InputError("nothing to compare: neither a base plan nor a new plan was given")
    rows = tuple(
        c for c in (FieldChange(r.label, r.kind, r.read(base) if base else None, r.read(new) if new else None)
                    for r in _ROWS)
        if c.before is not None or c.after is not None  # a part neither plan has (no profile, no bill) is no row
    )
    other: list[str] = []
    if base is not None and new is not None:
        covered = {*(f"deployment.{f}" for f in _DEPLOYMENT_ROWS), "estimate.ttft_ms", "estimate.tpot_ms",
                   "estimate.capacity_requests_per_s",
                   "estimate.utilisation", "cost.usd_per_month", "engine.name", "engine.version",
                   "engine.max_model_len", "model.id", "bill", "scaling.usd_per_month_at_profile",
                   "spot.on_demand_base_replicas", "spot.usd_per_month_expected"}
        other = [p for p in _changed_paths(base.model_dump(mode="json", exclude={"digest"}),
                                           new.model_dump(mode="json", exclude={"digest"}))
                 if not any(p == c or p.startswith(c + ".") for c in covered)]
    if base is None:
        status: DiffStatus = "new"
    elif new is None:
        status = "removed"
    elif base.digest == new.digest:
        status = "unchanged"
    else:
        status = "changed"
    return PlanDiff(
        status=status,
        workload=(new or base).workload,  # type: ignore[union-attr]
        base_digest=base.digest if base else None,
        new_digest=new.digest if new else None,
        rows=rows,
        other_changes=tuple(other[:MAX_OTHER_CHANGES]),
        other_changes_total=len(other),
    )


def _changed_paths(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Leaf paths where two JSON trees differ; lists compare whole (argv order matters)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b)):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in a or key not in b:
                out.append(path)
            else:
                out += _changed_paths(a[key], b[key], path)
        return out
    return [] if a == b else [prefix]


# ---------------------------------------------------------------- formatting


def format_usd(usd: float) -> str:
    """`$1,234.56`; negative amounts as `-$1,234.56`."""
    sign = "-" if usd < 0 else ""
    return f"{sign}${abs(usd):,.2f}"


def format_value(kind: ValueKind, value: Any) -> str:
    """One side of a row for humans; `—` when that side has no plan."""
    if value is None:
        return "—"
    if kind == "usd":
        return format_usd(float(value))
    if kind == "ms":
        return f"{float(value):,.0f} ms"
    if kind == "rate":
        return f"{float(value):,.1f}"
    if kind == "fraction":
        return f"{100.0 * float(value):.0f}%"
    if kind == "count":
        return f"{int(value):,}"
    return str(value)


def format_change(change: FieldChange, *, pct_sep: str = " (") -> str:
    """The change column: `+$1,358.53 (+50.0%)`, `+1`, `+12 ms (+5.0%)`, `changed`; empty when equal or one-sided."""
    if not change.changed or change.before is None or change.after is None:
        return ""
    d = change.delta
    if d is None:
        return "changed"
    if change.kind == "usd":
        text = ("+" if d >= 0 else "") + format_usd(d)
    elif change.kind == "ms":
        text = f"{d:+,.0f} ms"
    elif change.kind == "fraction":
        text = f"{100.0 * d:+.0f} pts"
    elif change.kind == "count":
        text = f"{int(d):+,}"
    else:
        text = f"{d:+,.1f}"
    pct = change.delta_pct
    if pct is not None and change.kind != "fraction":
        text += f"{pct_sep}{pct:+.1f}%" + (")" if pct_sep.endswith("(") else "")
    return text


def render_cost_line(diff: PlanDiff) -> str:
    """The monthly cost in words: before → after with the delta, or the cost of a new/removed stack."""
    cost = diff.cost
    if diff.status == "new":
        return f"{format_usd(float(cost.after))}/month"
    if diff.status == "removed":
        return f"was {format_usd(float(cost.before))}/month"
    if not cost.changed:
        return f"monthly cost unchanged at {format_usd(float(cost.after))}"
    return (f"monthly cost {format_usd(float(cost.before))} → {format_usd(float(cost.after))} "
            f"({format_change(cost, pct_sep=', ')})")


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def render_diff_markdown(diff: PlanDiff, *, heading: str | None = None) -> str:
    """A markdown section: headline with the cost change, then a before/after table (changed rows in bold)."""
    lines: list[str] = []
    if heading:
        lines += [heading, ""]
    headline = {"new": "**New stack**", "removed": "**Removed stack**", "changed": "**Changed**",
                "unchanged": "**No change**"}[diff.status]
    lines.append(f"{headline} `{diff.workload}`: {render_cost_line(diff)}.")
    if diff.status == "unchanged":
        lines.append(f"The plan is identical (digest `{diff.new_digest}`).")
        return "\n".join(lines) + "\n"
    if diff.status in ("new", "removed"):
        side = "This PR" if diff.status == "new" else "Base"
        lines += ["", f"| | {side} |", "|---|---|"]
        lines += [f"| {r.label} | {_md_escape(format_value(r.kind, r.after if r.after is not None else r.before))} |"
                  for r in diff.rows]
        lines += ["", f"Plan digest: `{diff.new_digest or diff.base_digest}`."]
        return "\n".join(lines) + "\n"
    lines += ["", "| | Base | This PR | Change |", "|---|---|---|---|"]
    for row in diff.rows:
        label = f"**{row.label}**" if row.changed else row.label
        lines.append(f"| {label} | {_md_escape(format_value(row.kind, row.before))} | "
                     f"{_md_escape(format_value(row.kind, row.after))} | {_md_escape(format_change(row))} |")
    if diff.other_changes:
        more = diff.other_changes_total - len(diff.other_changes)
        listed = ", ".join(f"`{p}`" for p in diff.other_changes) + (f" and {more} more" if more else "")
        lines += ["", f"Other fields that change: {listed}."]
    digests = f"base `{diff.base_digest or '—'}` → PR `{diff.new_digest or '—'}`"
    lines += ["", f"Plan digest: {digests}."]
    return "\n".join(lines) + "\n"


def render_diff_table(diff: PlanDiff) -> str:
    """Plain-text columns for a terminal."""
    head = ("", "base", "new", "change")
    body = [(r.label, format_value(r.kind, r.before), format_value(r.kind, r.after), format_change(r))
            for r in diff.rows]
    widths = [max(len(row[i]) for row in (head, *body)) for i in range(4)]
    out = [f"{diff.workload}: {diff.status}; {render_cost_line(diff)}"]
    for row in (head, *body):
        marker = "*" if row is not head and row[3] else " "
        out.append(marker + " " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    if diff.other_changes:
        more = diff.other_changes_total - len(diff.other_changes)
        out.append("other fields that change: " + ", ".join(diff.other_changes) + (f" (+{more} more)" if more else ""))
    return "\n".join(out) + "\n"


def diff_to_dict(diff: PlanDiff) -> dict[str, Any]:
    """JSON-ready form (raw values, deltas and the formatted change per row)."""
    return {
        "status": diff.status,
        "workload": diff.workload,
        "base_digest": diff.base_digest,
        "new_digest": diff.new_digest,
        "rows": [
            {"label": r.label, "before": r.before, "after": r.after, "changed": r.changed, "delta": r.delta,
             "delta_pct": r.delta_pct, "change": format_change(r)}
            for r in diff.rows
        ],
        "monthly_cost_delta_usd": diff.cost.delta,
        "other_changes": list(diff.other_changes),
        "other_changes_total": diff.other_changes_total,
    }


__all__ = [
    "FieldChange",
    "PlanDiff",
    "diff_plans",
    "diff_to_dict",
    "format_change",
    "format_usd",
    "format_value",
    "render_cost_line",
    "render_diff_markdown",
    "render_diff_table",
]
