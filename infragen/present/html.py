"""`infragen plan --format html`: one self-contained page (inline CSS and SVG, no script, nothing fetched).

The chosen deployment, every candidate's cost against latency, the fleet over a day and the bill; every figure
comes from the Plan. A Content-Security-Policy forbids any fetch, so the page shows the same offline.
"""

from __future__ import annotations

from html import escape

from infragen.plan import Alternative, Plan
from infragen.present.svg import Point, day_svg, scatter_svg

CSS = """
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:820px;color:#1d2330}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde}
table{border-collapse:collapse;width:100%;font-size:14px;table-layout:fixed;overflow-wrap:anywhere}
td,th{padding:4px 8px;border-bottom:1px solid #eef;text-align:left;vertical-align:top}
th{background:#f4f6fb} td.num{text-align:right;white-space:nowrap}
.muted{color:#667} code{background:#f4f6fb;padding:1px 4px;border-radius:3px}
svg text{font:12px system-ui,sans-serif;fill:#333} svg .axis{font-size:13px} svg .band{fill:#a33}
svg .grid{stroke:#e6e8ef;stroke-width:1} svg .pareto{fill:none;stroke:#2e7d32;stroke-width:2;stroke-dasharray:6 4}
svg .point circle,svg circle.legend{stroke:#fff;stroke-width:1.5} svg .feasible circle,svg circle.feasible{fill:#5477c4}
svg .chosen circle,svg circle.chosen{fill:#e8590c;stroke:#7a2e00;stroke-width:2} svg .chosen-label{font-weight:600}
svg .infeasible circle{fill:#c62828} svg .infeasible text{fill:#fff;font-size:10px;font-weight:700}
svg .bar{fill:#8fa8dc} svg .cost{fill:none;stroke:#e8590c;stroke-width:2.5} svg .cost-tick{fill:#b34700}
ol.infeasible li{margin:2px 0} table.kv th{width:8.5em} table.bill th:nth-child(-n+3){width:6.5em}
table.bill th:first-child{width:8.5em}
"""
#: No network, no script: the page must render the same with no connection (and never phone home).
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _money(x: float | None) -> str:
    return "n/a" if x is None else f"${x:,.0f}"


def _feasible(a: Alternative) -> bool:
    """It meets every constraint and lost on cost or latency only (the planner's own verdict)."""
    return a.feasible and a.usd_per_month is not None


def candidate_points(plan: Plan) -> list[Point]:
    """One point per candidate in the plan: the chosen deployment and every alternative it lists."""
    d, est = plan.deployment, plan.estimate
    points = [Point(f"{d.instance_type} {d.region} {d.precision} tp{d.tp}/pp{d.pp}", est.tpot_ms,
                    plan.cost.usd_per_month if plan.cost.usd_per_hour else None, "chosen",
                    f"{d.replicas} replica(s), cheapest meeting every constraint")]
    number = 0
    for a in plan.alternatives:
        label = f"{a.instance_type} {a.region} {a.precision} tp{a.tp}/pp{a.pp}"
        if _feasible(a):
            points.append(Point(label, a.tpot_ms, a.usd_per_month, "feasible", a.rejected_because))
        else:
            number += 1
            points.append(Point(label, a.tpot_ms, None, "infeasible", a.rejected_because, number))
    return points


def _table(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f"<table class=kv>{body}</table>"


def _deployment(plan: Plan) -> str:
    d, e, est, c = plan.deployment, plan.engine, plan.estimate, plan.cost
    gpu = f"{d.gpus_per_node} x {d.gpu}" if d.gpu else "CPU only"
    return _table([
        ("deployment", f"{d.nodes} x {d.instance_type} ({gpu}) in {d.cloud}/{d.region}, {d.replicas} replica(s)"),
        ("engine", f"{e.name} {e.version}, {d.precision} weights, tp={d.tp} pp={d.pp}, batch {e.max_num_seqs}, "
                   f"max_model_len {e.max_model_len}"),
        ("at peak", f"TTFT {est.ttft_ms:.0f} ms, TPOT {est.tpot_ms:.1f} ms, E2E {est.e2e_ms / 1000:.1f} s "
                    f"(±{est.relative_uncertainty:.0%}), utilisation {est.utilisation:.0%}"),
        ("cost", f"{_money(c.usd_per_month if c.usd_per_hour else None)}/month at {c.pricing}"),
        ("price source", c.price_source),
    ])


def _candidates(plan: Plan) -> str:
    points = candidate_points(plan)
    bad = [p for p in points if p.status == "infeasible"]
    listed = "".join(f"<li><b>{escape(p.label)}</b>: {escape(p.reason)}</li>" for p in bad)
    return (f"<p class=muted>{len(points)} candidates: the chosen one, the best of every other instance type the plan "
            "lists; each point's tooltip says why it lost. x: time per output token at peak.</p>"
            + scatter_svg(points, x_label="TPOT at peak (ms)")
            + (f'<p>Infeasible (numbered in the red band):</p><ol class="infeasible">{listed}</ol>' if bad else ""))


def _day(plan: Plan) -> str:
    sc, d = plan.scaling, plan.deployment
    if sc is None or sc.replicas_by_hour is None:
        return ("<p class=muted>The workload gives no hourly profile (<code>traffic.hourly_profile</code>): the fleet "
                f"is {d.replicas} replica(s) all day.</p>")
    node_usd = plan.cost.usd_per_hour / d.nodes if plan.cost.usd_per_hour else None
    per_hour = (None if node_usd is None else
                [-(-r * d.nodes_per_replica // d.replicas_per_node) * node_usd for r in sc.replicas_by_hour])
    return (f"<p>{_money(sc.usd_per_month_at_profile)}/month at the profile vs {_money(sc.usd_per_month_at_peak)} at "
            f"a constant peak ({escape(sc.strategy)}); autoscaling {sc.min_replicas}-{sc.max_replicas} replicas, a new "
            f"replica serves after {sc.boot.total_s} s.</p>"
            + day_svg(sc.replicas_by_hour, per_hour, time_zone=sc.time_zone))


def _bill(plan: Plan) -> str:
    b = plan.bill
    if b is None:
        return "<p class=muted>This plan carries no bill (made by an older infragen).</p>"
    rows = "".join(
        f"<tr><td>{escape(x.item)}</td><td class=num>{_money(x.usd_per_month_at_peak)}</td>"
        f"<td class=num>{_money(x.usd_per_month_at_profile)}</td><td>{escape(x.quantity)}</td>"
        f"<td class=muted>{escape(x.unpriced or x.price_source)}</td></tr>" for x in b.lines)
    per_token = (f"${b.usd_per_million_output_tokens_at_peak:,.4g} per 1M output tokens at peak"
                 if b.usd_per_million_output_tokens_at_peak is not None else "")
    if b.usd_per_million_output_tokens_at_average is not None:
        per_token += f", ${b.usd_per_million_output_tokens_at_average:,.4g} at the profile's average"
    return (f"<p><b>{_money(b.usd_per_month_at_peak)}/month</b> at peak"
            + ("" if b.usd_per_month_at_profile is None else f", {_money(b.usd_per_month_at_profile)} at the profile")
            + f"; {per_token}.</p><table class=bill><tr><th>line</th><th>at peak</th><th>at the profile</th>"
            f"<th>counted</th><th>price</th></tr>{rows}</table>")


def render_html(plan: Plan) -> str:
    """The report page for `plan`."""
    warnings = "".join(f"<li>{escape(w)}</li>" for w in plan.warnings)
    why = "".join(f"<li>{escape(x)}</li>" for x in plan.explanation)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>infragen plan {escape(plan.workload)}</title><style>{CSS}</style></head>
<body>
<h1>infragen plan <code>{escape(plan.workload)}</code></h1>
<p class=muted>digest {escape(plan.digest)} · infragen {escape(plan.infragen_version)} · a self-contained page: nothing
is fetched</p>
<h2>Chosen deployment</h2>{_deployment(plan)}
<ul>{why}</ul>
<h2>Candidates: cost against latency</h2>{_candidates(plan)}
<h2>Over a day</h2>{_day(plan)}
<h2>The whole bill</h2>{_bill(plan)}
{f"<h2>Warnings</h2><ul>{warnings}</ul>" if warnings else ""}
</body></html>
"""
