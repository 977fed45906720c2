"""Inline SVG charts for the HTML report: the candidates' cost against latency, and the fleet over a day.

Standard library only (no plotting package: the report loads fast and fetches nothing). Every text is escaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Literal

Status = Literal["chosen", "feasible", "infeasible"]
WIDTH, HEIGHT = 760, 440
LEFT, RIGHT, TOP, BOTTOM = 78, 24, 56, 52
#: Height of the band at the top of the scatter where infeasible candidates sit (they have no cost).
BAND = 30


@dataclass(frozen=True)
class Point:
    """One candidate: its latency (x), monthly cost (y; None when it has none) and why it lost."""

    label: str
    latency_ms: float | None
    usd_per_month: float | None
    status: Status
    reason: str
    number: int = 0
    """Index in the infeasible list under the chart (0 for feasible ones)."""


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 2.5, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def _money(x: float) -> str:
    return f"${x:,.0f}" if x >= 10 or x == 0 else f"${x:,.2f}"


def pareto(points: list[Point]) -> list[Point]:
    """Feasible priced points no other beats on both cost and latency, by increasing latency."""
    priced = sorted((p for p in points if p.status != "infeasible" and p.usd_per_month is not None
                     and p.latency_ms is not None), key=lambda p: (p.latency_ms, p.usd_per_month))
    front: list[Point] = []
    for p in priced:
        if not front or (p.usd_per_month or 0) < (front[-1].usd_per_month or 0):
            front.append(p)
    return front


def scatter_svg(points: list[Point], *, x_label: str) -> str:
    """Cost (log scale when it spans a decade) against latency; chosen highlighted, Pareto frontier drawn,
    infeasible candidates numbered in a band on top (their reasons are listed under the chart)."""
    xs = [p.latency_ms for p in points if p.latency_ms is not None] or [1.0]
    ys = [p.usd_per_month for p in points if p.usd_per_month is not None and p.status != "infeasible"] or [1.0]
    x_hi = max(xs) * 1.08
    y_lo, y_hi = min(ys), max(ys)
    log = y_hi / max(y_lo, 1e-9) > 8
    if log:
        y_lo, y_hi = 10 ** math.floor(math.log10(y_lo)), 10 ** math.ceil(math.log10(y_hi))
    else:
        y_lo, y_hi = 0.0, y_hi * 1.1
    plot_top = TOP + BAND

    def sx(v: float) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * v / x_hi

    def sy(v: float) -> float:
        if log:
            frac = (math.log10(v) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo))
        else:
            frac = (v - y_lo) / (y_hi - y_lo)
        return HEIGHT - BOTTOM - (HEIGHT - BOTTOM - plot_top) * frac

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" id="candidates-chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
           f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="cost against latency of every candidate">',
           f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
           f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{BAND - 6}" fill="#fdecea"/>',
           f'<text x="{LEFT + 6}" y="{TOP + 16}" class="band">infeasible: '
           + ("numbered, reasons listed under the chart" if any(p.status == "infeasible" for p in points)
              else "none among the candidates listed") + "</text>"]
    for t in _ticks(0, x_hi):
        out.append(f'<line x1="{sx(t):.1f}" y1="{plot_top}" x2="{sx(t):.1f}" y2="{HEIGHT - BOTTOM}" class="grid"/>'
                   f'<text x="{sx(t):.1f}" y="{HEIGHT - BOTTOM + 18}" class="tick" text-anchor="middle">{t:g}</text>')
    y_ticks = ([10 ** e for e in range(round(math.log10(y_lo)), round(math.log10(y_hi)) + 1)] if log
               else _ticks(y_lo, y_hi))
    for t in y_ticks:
        out.append(f'<line x1="{LEFT}" y1="{sy(t):.1f}" x2="{WIDTH - RIGHT}" y2="{sy(t):.1f}" class="grid"/>'
                   f'<text x="{LEFT - 6}" y="{sy(t) + 4:.1f}" class="tick" text-anchor="end">{_money(t)}</text>')
    out.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 12}" class="axis" text-anchor="middle">'
               f'{escape(x_label)}</text>')
    out.append(f'<text x="16" y="{(plot_top + HEIGHT - BOTTOM) / 2}" class="axis" text-anchor="middle" '
               f'transform="rotate(-90 16 {(plot_top + HEIGHT - BOTTOM) / 2})">$/month{" (log scale)" if log else ""}'
               '</text>')
    front = pareto(points)
    if len(front) > 1:
        path = " ".join(f"{sx(p.latency_ms or 0):.1f},{sy(p.usd_per_month or 1):.1f}" for p in front)
        out.append(f'<polyline points="{path}" class="pareto"/>')
    for p in sorted(points, key=lambda p: p.status == "chosen"):  # the chosen point drawn last, on top
        tip = escape(f"{p.label}: {p.reason}")
        x = sx(p.latency_ms) if p.latency_ms is not None else WIDTH - RIGHT - 12
        attrs = f'class="point {p.status}" data-label="{escape(p.label)}"'
        if p.status == "infeasible":
            y = TOP + BAND / 2 + 4
            out.append(f'<g {attrs}><title>{tip}</title><circle cx="{x:.1f}" cy="{y:.1f}" r="8"/>'
                       f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle">{p.number}</text></g>')
            continue
        y = sy(p.usd_per_month) if p.usd_per_month is not None else plot_top
        r = 9 if p.status == "chosen" else 6
        right = x > LEFT + (WIDTH - LEFT - RIGHT) * 0.55  # label on the side with room
        label = (f'<text x="{x - 12 if right else x + 12:.1f}" y="{y - 10:.1f}" class="chosen-label" '
                 f'text-anchor="{"end" if right else "start"}">chosen: {escape(p.label)}</text>'
                 if p.status == "chosen" else "")
        out.append(f'<g {attrs}><title>{tip}</title><circle cx="{x:.1f}" cy="{y:.1f}" r="{r}"/>{label}</g>')
    legend = [("chosen", "chosen"), ("feasible", "feasible, dearer"), ("pareto", "Pareto frontier")]
    for i, (cls, text) in enumerate(legend):
        lx = LEFT + i * 170
        mark = (f'<line x1="{lx}" y1="20" x2="{lx + 18}" y2="20" class="pareto"/>' if cls == "pareto" else
                f'<circle cx="{lx + 9}" cy="20" r="6" class="legend {cls}"/>')
        out.append(f'{mark}<text x="{lx + 24}" y="24" class="tick">{text}</text>')
    out.append("</svg>")
    return "\n".join(out)


def day_svg(replicas_by_hour: list[int], usd_per_hour: list[float] | None, *, time_zone: str) -> str:
    """Replicas per hour as bars, and the fleet's cost per hour as a line on the right axis."""
    top_r = max(replicas_by_hour) or 1
    top_usd = max(usd_per_hour) if usd_per_hour else 0.0
    inner_w, inner_h = WIDTH - LEFT - 70, HEIGHT - TOP - BOTTOM
    bar_w = inner_w / 24

    def y_r(v: float) -> float:
        return HEIGHT - BOTTOM - inner_h * v / (top_r * 1.1)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" id="day-chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
           f'height="{HEIGHT}" role="img" aria-label="replicas and cost by hour">',
           f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>']
    for t in _ticks(0, top_r * 1.1):
        if t != int(t):
            continue
        out.append(f'<line x1="{LEFT}" y1="{y_r(t):.1f}" x2="{LEFT + inner_w}" y2="{y_r(t):.1f}" class="grid"/>'
                   f'<text x="{LEFT - 6}" y="{y_r(t) + 4:.1f}" class="tick" text-anchor="end">{t:g}</text>')
    for h, r in enumerate(replicas_by_hour):
        x = LEFT + h * bar_w
        out.append(f'<g class="hour"><title>hour {h}: {r} replica(s)</title><rect x="{x + 2:.1f}" y="{y_r(r):.1f}" '
                   f'width="{bar_w - 4:.1f}" height="{HEIGHT - BOTTOM - y_r(r):.1f}" class="bar"/></g>')
        if h % 3 == 0:
            out.append(f'<text x="{x + bar_w / 2:.1f}" y="{HEIGHT - BOTTOM + 18}" class="tick" '
                       f'text-anchor="middle">{h}</text>')
    if usd_per_hour and top_usd > 0:
        def y_c(v: float) -> float:
            return HEIGHT - BOTTOM - inner_h * v / (top_usd * 1.1)

        pts = " ".join(f"{LEFT + (h + 0.5) * bar_w:.1f},{y_c(v):.1f}" for h, v in enumerate(usd_per_hour))
        out.append(f'<polyline points="{pts}" class="cost"/>')
        for t in _ticks(0, top_usd * 1.1):
            out.append(f'<text x="{LEFT + inner_w + 6}" y="{y_c(t) + 4:.1f}" class="tick cost-tick">'
                       f'{_money(t)}/h</text>')
    out.append(f'<text x="{LEFT + inner_w / 2}" y="{HEIGHT - 12}" class="axis" text-anchor="middle">hour of the day '
               f'({escape(time_zone)})</text>')
    out.append(f'<text x="16" y="{HEIGHT / 2}" class="axis" text-anchor="middle" '
               f'transform="rotate(-90 16 {HEIGHT / 2})">replicas</text>')
    out.append(f'<rect x="{LEFT}" y="14" width="14" height="12" class="bar"/><text x="{LEFT + 20}" y="24" '
               'class="tick">replicas</text><line x1="{0}" y1="20" x2="{1}" y2="20" class="cost"/>'
               .replace("{0}", str(LEFT + 110)).replace("{1}", str(LEFT + 128))
               + f'<text x="{LEFT + 134}" y="24" class="tick">cost per hour</text>')
    out.append("</svg>")
    return "\n".join(out)
