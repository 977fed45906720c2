"""A compact mermaid `xychart-beta` of the monthly cost per candidate, for pull-request comments (GitHub renders
mermaid code blocks). Text only; every label is reduced to characters mermaid's quoted strings accept."""

from __future__ import annotations

import re

from infragen.plan import Plan

#: Bars at most (the chosen one plus the cheapest others), so the chart stays legible in a comment.
MAX_BARS = 10
_UNSAFE = re.compile(r'[^A-Za-z0-9 ._/*-]')


def _label(text: str) -> str:
    return _UNSAFE.sub("", text)[:28]


def cost_chart(plan: Plan) -> str:
    """```mermaid block: one bar per priced candidate (the chosen one marked *); '' when nothing is priced."""
    bars = [(f"{plan.deployment.instance_type}*", plan.cost.usd_per_month if plan.cost.usd_per_hour else None)]
    bars += [(a.instance_type, a.usd_per_month) for a in plan.alternatives]
    priced = [(name, usd) for name, usd in bars if usd is not None][:MAX_BARS]
    if not priced or bars[0][1] is None:
        return ""
    left_out = len(bars) - len(priced)
    top = max(usd for _, usd in priced)
    names = ", ".join(f'"{_label(n)}"' for n, _ in priced)
    values = ", ".join(f"{usd:.0f}" for _, usd in priced)
    lines = ["```mermaid", "xychart-beta",
             f'    title "{_label(plan.workload)}: USD per month per candidate (* chosen)"',
             f"    x-axis [{names}]", f'    y-axis "USD per month" 0 --> {top * 1.1:.0f}', f"    bar [{values}]", "```"]
    if left_out:
        lines.append(f"{left_out} more candidate(s) without a cost (infeasible or unpriced) are not drawn.")
    return "\n".join(lines) + "\n"
