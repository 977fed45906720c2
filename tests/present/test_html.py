"""The HTML report: self-contained (nothing fetched), one chart point per candidate, the day and the bill; and in a
real headless Chromium: the page renders, the chart has one point per candidate, the screenshot is not blank."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from infragen.plan import Plan
from infragen.present.html import render_html
from infragen.present.mermaid import cost_chart
from infragen.present.svg import Point, pareto
from infragen.sizing import plan_file
from tests.present.png import decode_png
from tests.render.support import tool
from tests.spec.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def daily() -> Plan:
    return plan_file(ROOT / "examples" / "daily-chatbot.yaml")


def _points(page: str) -> list[str]:
    return re.findall(r'<g class="point (chosen|feasible|infeasible)"', page)


def test_one_point_per_candidate_and_the_chosen_one_once(daily: Plan) -> None:
    page = render_html(daily)
    points = _points(page)
    assert len(points) == 1 + len(daily.alternatives) and points.count("chosen") == 1
    assert 'id="day-chart"' in page and page.count('class="hour"') == 24
    assert "The whole bill" in page and "per 1M output tokens" in page


def test_nothing_is_fetched(daily: Plan) -> None:
    page = render_html(daily)
    assert "<script" not in page and "src=" not in page and "href=" not in page and "url(" not in page
    assert "@import" not in page
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"] * 2  # the SVG namespace only
    assert "default-src 'none'" in page


def test_infeasible_candidates_are_numbered_with_their_reason() -> None:
    points = [Point("a", 30, 100, "chosen", "x"), Point("b", 20, 300, "feasible", "costs more"),
              Point("c", 50, 200, "feasible", "costs more"), Point("d", None, None, "infeasible", "TTFT 900 ms", 1)]
    assert [p.label for p in pareto(points)] == ["b", "a"]  # c is beaten by a on both axes; d has no cost
    from infragen.present.svg import scatter_svg

    svg = scatter_svg(points, x_label="TPOT")
    assert svg.count('class="point infeasible"') == 1 and "d: TTFT 900 ms" in svg and 'class="pareto"' in svg


def test_text_from_the_plan_is_escaped(daily: Plan) -> None:
    hostile = daily.model_copy(update={"warnings": ["<img src=x onerror=alert(1)>"]})
    page = render_html(hostile)
    assert "<img" not in page and "&lt;img src=x" in page


def test_cli_writes_the_page_with_out(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    r = run_cli("plan", str(ROOT / "examples" / "team-chatbot.yaml"), "--format", "html", "--out", str(out))
    assert r.code == 0 and r.out == ""
    page = out.read_text()
    assert page.startswith("<!doctype html>") and len(_points(page)) >= 2
    r = run_cli("plan", str(ROOT / "examples" / "team-chatbot.yaml"), "--format", "html")
    assert r.code == 0 and r.out.startswith("<!doctype html>")


def test_html_rendering_stays_off_the_planning_import_path() -> None:
    code = ("import sys, infragen.cli.plan_cmd, infragen.sizing; "
            "print(any(m.startswith(('infragen.present', 'pulumi')) for m in sys.modules))")
    r = subprocess.run([__import__("sys").executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False"


def test_mermaid_chart_has_a_bar_per_priced_candidate(daily: Plan) -> None:
    chart = cost_chart(daily)
    assert chart.startswith("```mermaid\nxychart-beta") and chart.rstrip().endswith(("```", "drawn."))
    bars = re.search(r"bar \[([^\]]*)\]", chart)
    names = re.search(r"x-axis \[([^\]]*)\]", chart)
    assert bars and names
    priced = 1 + sum(a.usd_per_month is not None for a in daily.alternatives)
    assert len(bars.group(1).split(",")) == len(names.group(1).split(",")) == min(priced, 10)
    assert f'"{daily.deployment.instance_type}*"' in chart


# ---------------------------------------------------------------- a real browser


def _chromium(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = tool("chromium")
    return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--no-first-run", "--disable-extensions", f"--user-data-dir={cwd / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def test_chromium_renders_the_page_with_one_point_per_candidate(tmp_path: Path, daily: Plan) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(daily))
    r = _chromium(["--dump-dom", page.as_uri()], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    # The DOM Chromium built (not our source text): the SVG parsed, one group per candidate, each with a circle.
    assert "<svg" in dom and 'id="candidates-chart"' in dom
    assert len(_points(dom)) == 1 + len(daily.alternatives)
    assert len(re.findall(r'<g class="point [a-z]+"[^>]*><title>[^<]*</title><circle', dom)) == len(_points(dom))


def test_chromium_screenshot_is_not_blank(tmp_path: Path, daily: Plan) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(daily))
    shot = tmp_path / "shot.png"
    r = _chromium(["--window-size=800,1000", f"--screenshot={shot}", page.as_uri()], tmp_path)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    width, height, rows = decode_png(shot.read_bytes())
    assert (width, height) == (800, 1000)
    colours = {row[i:i + 3] for row in rows[::7] for i in range(0, len(row), 4 * 9)}
    assert len(colours) > 20, f"{len(colours)} colours: the page looks blank"
    # The chosen point's orange (#e8590c) is on screen: the chart itself rendered, not only the text.
    assert any(abs(c[0] - 0xE8) < 24 and abs(c[1] - 0x59) < 24 and abs(c[2] - 0x0C) < 24
               for row in rows for c in (row[i:i + 3] for i in range(0, len(row), 4)))


def test_the_pr_comment_carries_the_cost_chart(daily: Plan) -> None:
    from infragen.ci_report import AffectedStack, PlanOutcome, StackConfig, StackReport, render_comment
    from infragen.diff import diff_plans

    config = StackConfig(name="chat", config_path="stacks/Pulumi.chat.yaml", workload="examples/daily-chatbot.yaml",
                         plan_file=None)
    report = StackReport(AffectedStack("chat", config, config, ("examples/daily-chatbot.yaml",)),
                         PlanOutcome(plan=daily), PlanOutcome(plan=daily), diff=diff_plans(daily, daily))
    comment = render_comment([report])
    assert "```mermaid\nxychart-beta" in comment and f'"{daily.deployment.instance_type}*"' in comment
