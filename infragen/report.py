"""Plans as text for people: the terminal summary and the markdown used in pull-request comments.

Formatting only; every figure comes from the Plan.
"""

from __future__ import annotations

from infragen.plan import Alternative, Plan

#: What an unpriced candidate shows instead of a cost (never $0).
NO_PRICE = "no price; give one with `prices:` in the workload or `infragen plan --prices FILE`"


def _money(x: float | None) -> str:
    return "n/a" if x is None else f"${x:,.0f}"


def _unpriced(a: Alternative) -> bool:
    """A candidate that lost only for want of a price (listed apart, never as $0)."""
    return a.usd_per_month is None and a.rejected_because.startswith("no ") and " price " in a.rejected_because


def _cost(plan: Plan) -> str:
    c = plan.cost
    if not c.usd_per_hour:
        return NO_PRICE
    return f"{_money(c.usd_per_month)}/month"


def _shape(tp: int, pp: int, expert_parallel: bool) -> str:
    """The TP/PP column: `4/1`, `8+EP/1` for an expert-parallel layout."""
    return f"{tp}{'+EP' if expert_parallel else ''}/{pp}"


def _rows(plan: Plan, limit: int | None = None) -> list[list[str]]:
    """The chosen plan, then the best candidate of each other priced type (the first `limit` of them)."""
    d, c = plan.deployment, plan.cost
    rows = [["CHOSEN", d.instance_type, d.region, d.engine, d.precision, _shape(d.tp, d.pp, d.expert_parallel),
             str(d.replicas),
             _money(c.usd_per_month if c.usd_per_hour else None),
             _per_mtok(c.usd_per_million_output_tokens_at_capacity), f"{plan.estimate.ttft_ms:.0f}",
             f"{plan.estimate.tpot_ms:.1f}", "cheapest meeting every constraint"]]
    for a in [a for a in plan.alternatives if not _unpriced(a)][:limit]:
        rows.append(["", a.instance_type, a.region, a.engine, a.precision, _shape(a.tp, a.pp, a.expert_parallel),
                     "-" if a.replicas is None else str(a.replicas), _money(a.usd_per_month),
                     _per_mtok(a.usd_per_million_output_tokens_at_capacity),
                     "-" if a.ttft_ms is None else f"{a.ttft_ms:.0f}", "-" if a.tpot_ms is None else f"{a.tpot_ms:.1f}",
                     a.rejected_because])
    return rows


def _per_mtok(x: float | None) -> str:
    return "-" if x is None else _per_million(x)


#: `$/1M out`: $ per 1M output tokens with the replicas at their SLO-meeting capacity (instances only).
HEADER = ["", "instance", "region", "engine", "precision", "tp/pp", "replicas", "$/month", "$/1M out", "TTFT ms",
          "TPOT ms", "why"]


def _day_lines(plan: Plan) -> list[str]:
    """The daily view (present when the workload gives a profile or an average)."""
    sc = plan.scaling
    if sc is None:
        return []
    lines = [f"Over a day: {sc.average_load_fraction:.0%} of the peak on average ({sc.time_zone}); "
             f"{_money(sc.usd_per_month_at_profile)}/month at the profile vs {_money(sc.usd_per_month_at_peak)} at a "
             f"constant peak ({sc.strategy}, {sc.average_replicas:g} replicas on average)"]
    if sc.replicas_by_hour is not None:
        lines.append("            replicas by hour 0-23: " + " ".join(str(r) for r in sc.replicas_by_hour))
    lines.append(f"            autoscaling {sc.min_replicas}-{sc.max_replicas} replicas, target "
                 f"{sc.target_requests_per_s_per_replica:.2f} req/s per replica; a new replica serves after "
                 f"{sc.boot.total_s} s (install {sc.boot.install_s} + download {sc.boot.download_s} + load "
                 f"{sc.boot.load_s} s, floored at 900 s)")
    return lines


_BILL_LABELS = {"instances": "instances", "load-balancer": "load balancer", "nat-gateway": "NAT gateway",
                "model-download": "model downloads", "block-storage": "block storage", "cross-zone": "cross-zone",
                "egress": "egress"}


def _per_million(x: float | None) -> str:
    return "n/a" if x is None else f"${x:,.2f}" if x >= 0.1 else f"${x:.4f}"


def _bill_headline(plan: Plan) -> str:
    b = plan.bill
    assert b is not None
    at_profile = "" if b.usd_per_month_at_profile is None else f", {_money(b.usd_per_month_at_profile)} at the profile"
    average = ("" if b.usd_per_million_output_tokens_at_average is None else
               f", {_per_million(b.usd_per_million_output_tokens_at_average)} at the profile's average")
    return (f"{_money(b.usd_per_month_at_peak)}/month at peak{at_profile}; "
            f"{_per_million(b.usd_per_million_output_tokens_at_peak)} per 1M output tokens at peak "
            f"({_per_million(b.usd_per_million_tokens_at_peak)} per 1M tokens){average}")


def _bill_lines(plan: Plan) -> list[str]:
    """The whole bill, one priced line per item (present when the plan carries a bill)."""
    b = plan.bill
    if b is None:
        return []
    items = " | ".join(f"{_BILL_LABELS[x.item]} {_money(x.usd_per_month_at_peak)}" for x in b.lines)
    lines = [f"Bill:       {_bill_headline(plan)}", f"            {items}"]
    if b.unpriced:
        lines.append("            unpriced (no cited price): " + ", ".join(_BILL_LABELS[x] for x in b.unpriced))
    return lines


def _spot_text(plan: Plan) -> str:
    s = plan.spot
    assert s is not None
    others = ", ".join(s.alternative_instance_types) or "none"
    return (f"{s.on_demand_base_replicas} replica(s) on demand ({s.on_demand_base_nodes} node(s), from "
            f"{s.base_basis}) + {s.spot_nodes} spot node(s): expected {_money(s.usd_per_month_expected)}/month at "
            f"peak; other same-GPU spot pools: {others}; {s.interruption_band or s.interruption_note}")


def _spot_lines(plan: Plan) -> list[str]:
    """A spot plan's on-demand floor (present for spot plans)."""
    if plan.spot is None:
        return []
    return [f"Spot:       {_spot_text(plan)}", f"            risk: {plan.spot.risk}"]


def _more(plan: Plan, limit: int | None) -> int:
    """Priced alternatives left out of the table."""
    return 0 if limit is None else max(0, sum(not _unpriced(a) for a in plan.alternatives) - limit)


def render_text(plan: Plan, rows: int | None = None) -> str:
    """The terminal summary; `rows` caps the other instance types listed (None: every one)."""
    d, e, m, c, est, s = plan.deployment, plan.engine, plan.memory, plan.cost, plan.estimate, plan.storage
    gpu = f"{d.gpus_per_node} x {d.gpu}" if d.gpu else "CPU only"
    lines = [
        f"infragen plan {plan.workload}  (digest {plan.digest})",
        "",
        f"Deployment: {d.nodes} x {d.instance_type} ({gpu}) in {d.cloud}/{d.region}, {d.replicas} replica(s), "
        f"{d.nodes_per_replica} node(s)/replica, {d.replicas_per_node} replica(s)/node",
        f"Engine:     {e.name} {e.version}, {d.precision} weights, KV {d.kv_cache_dtype}, tp={d.tp}"
        f"{' expert-parallel' if d.expert_parallel else ''} pp={d.pp}, "
        f"max_model_len {e.max_model_len}, max_num_seqs {e.max_num_seqs}",
        f"Memory/GPU: {m.device_memory_gib:.1f} GiB = weights {m.weights_gib_per_gpu:.1f} + KV "
        f"{m.kv_cache_gib_per_gpu:.1f} + overhead {m.overhead_gib_per_gpu:.1f} "
        f"(KV {m.kv_cache_bytes_per_token:,} B/token, {m.kv_cache_capacity_tokens:,} tokens per replica)",
        f"At peak:    TTFT {est.ttft_ms:.0f} ms, TPOT {est.tpot_ms:.1f} ms, E2E {est.e2e_ms / 1000:.1f} s "
        f"(±{est.relative_uncertainty:.0%}); {est.output_tokens_per_s:,.0f} output tokens/s; capacity "
        f"{est.capacity_requests_per_s:.2f} req/s per replica; utilisation {est.utilisation:.0%}",
        f"Cost:       {_cost(plan)} at {c.pricing} (on-demand {_money(c.on_demand_usd_per_month)}, "
        f"spot {_money(c.spot_usd_per_month)}); {c.price_source}",
        *_day_lines(plan),
        *_bill_lines(plan),
        *_spot_lines(plan),
        f"Storage:    {s.kind} for {s.required_gib} GiB"
        + (f" ({s.volume_gib} GiB {s.volume_type})" if s.kind == "volume" else f" ({s.nvme_devices} NVMe)"),
        f"Network:    RDMA {plan.network.rdma}, placement {plan.network.placement}, LB {plan.network.load_balancer}",
        "",
        "Why:",
        *[f"  - {x}" for x in plan.explanation],
    ]
    if plan.warnings:
        lines += ["", "Warnings:", *[f"  - {w}" for w in plan.warnings]]
    table = [HEADER, *_rows(plan, rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER) - 1)]
    lines += ["", "Candidates (the best of each instance type):"]
    for r in table:
        lines.append("  " + "  ".join(r[i].ljust(widths[i]) for i in range(len(widths))) + "  " + r[-1])
    more = _more(plan, rows)
    if more:
        lines.append(f"  ... {more} more instance types: --all lists them, --explain TYPE says why one lost")
    unpriced = [a for a in plan.alternatives if _unpriced(a)]
    if unpriced:
        lines += ["", f"Unpriced ({NO_PRICE}):",
                  *[f"  {a.instance_type} in {a.cloud}/{a.region}: {a.rejected_because}" for a in unpriced]]
    return "\n".join(lines) + "\n"


def _day_rows(plan: Plan) -> list[str]:
    sc = plan.scaling
    if sc is None:
        return []
    hours = "" if sc.replicas_by_hour is None else f"; replicas by hour {' '.join(map(str, sc.replicas_by_hour))}"
    return [f"| over a day | {_money(sc.usd_per_month_at_profile)}/month at the profile ({sc.average_load_fraction:.0%}"
            f" of the peak on average, {sc.strategy}) vs {_money(sc.usd_per_month_at_peak)} at a constant peak |",
            f"| autoscaling | {sc.min_replicas}-{sc.max_replicas} replicas, target "
            f"{sc.target_requests_per_s_per_replica:.2f} req/s per replica, boot {sc.boot.total_s} s{hours} |"]


def render_markdown(plan: Plan, rows: int | None = None) -> str:
    """Markdown for pull-request comments; `rows` caps the other instance types listed (None: every one)."""
    d, c, est = plan.deployment, plan.cost, plan.estimate
    gpu = f"{d.gpus_per_node} x {d.gpu}" if d.gpu else "CPU only"
    out = [
        f"### `{plan.workload}`: {d.nodes} x `{d.instance_type}` ({gpu}), {_cost(plan)}",
        "",
        "| | |", "|---|---|",
        f"| deployment | {d.cloud} {d.region}, {d.replicas} replica(s), tp={d.tp} pp={d.pp}, "
        f"{d.engine} {d.precision} |",
        f"| latency at peak | TTFT {est.ttft_ms:.0f} ms, TPOT {est.tpot_ms:.1f} ms (±{est.relative_uncertainty:.0%}) |",
        f"| capacity | {est.capacity_requests_per_s:.2f} req/s per replica, utilisation {est.utilisation:.0%} |",
        f"| cost | {_cost(plan)} {c.pricing}; on-demand {_money(c.on_demand_usd_per_month)}, "
        f"spot {_money(c.spot_usd_per_month)} |",
        *_day_rows(plan),
        *([f"| whole bill | {_bill_headline(plan)} |"] if plan.bill else []),
        *([f"| spot floor | {_spot_text(plan).replace('|', '/')} |"] if plan.spot else []),
        f"| digest | `{plan.digest}` |",
        "",
        "| " + " | ".join(h or "chosen" for h in HEADER) + " |",
        "|" + "---|" * len(HEADER),
        *["| " + " | ".join(x.replace("|", "/") for x in r) + " |" for r in _rows(plan, rows)],
    ]
    more = _more(plan, rows)
    if more:
        out += ["", f"{more} more instance types not shown (`infragen plan --all`)."]
    if plan.bill:
        out += ["", "| bill line | $/month at peak | at the profile | what | price |", "|---|---|---|---|---|",
                *[f"| {_BILL_LABELS[x.item]} | {_money(x.usd_per_month_at_peak)} | "
                  f"{_money(x.usd_per_month_at_profile)} | {x.quantity.replace('|', '/')} | "
                  f"{(x.unpriced or x.price_source).replace('|', '/')} |" for x in plan.bill.lines]]
    unpriced = [a for a in plan.alternatives if _unpriced(a)]
    if unpriced:
        out += ["", f"Unpriced ({NO_PRICE}): " + ", ".join(f"`{a.instance_type}` in {a.region}" for a in unpriced)]
    if plan.warnings:
        out += ["", *[f"> {w}" for w in plan.warnings]]
    return "\n".join(out) + "\n"
