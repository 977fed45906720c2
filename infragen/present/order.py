"""The order of a plan's candidates (`infragen plan --sort`): by monthly cost, as planned, or by what a million output
tokens cost on each at its own SLO-meeting capacity. A view: the chosen deployment stays the cheapest."""

from __future__ import annotations

from typing import Literal

from infragen.plan import Alternative, Plan

Sort = Literal["cost", "token-cost"]
SORTS: tuple[Sort, ...] = ("cost", "token-cost")


def order_candidates(plan: Plan, by: Sort) -> Plan:
    """`plan` with its alternatives in `by` order. `cost` is the planner's own order (feasible by monthly cost,
    then the rest by how close they came); `token-cost` puts the candidates with a $/1M output tokens at capacity
    first, cheapest first, and keeps the others after them in cost order (the sort is stable)."""
    if by == "cost":
        return plan

    def key(item: tuple[int, Alternative]) -> tuple[bool, float, int]:
        i, a = item
        x = a.usd_per_million_output_tokens_at_capacity
        return x is None, x or 0.0, i

    ordered = [a for _, a in sorted(enumerate(plan.alternatives), key=key)]
    return plan.model_copy(update={"alternatives": ordered})
