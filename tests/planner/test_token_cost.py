"""$ per 1M output tokens of every candidate (at its own SLO-meeting capacity and at the workload's peak), and
`infragen plan --sort token-cost`: the candidates in that order in the table and the JSON, the choice unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infragen.plan import Alternative
from infragen.present.order import order_candidates
from infragen.sizing import plan_file
from infragen.spec import load_spec
from tests.spec.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "team-chatbot.yaml"


def test_the_chosen_plan_states_both_figures_by_their_definition() -> None:
    plan, traffic = plan_file(EXAMPLE), load_spec(EXAMPLE).traffic
    c, d, est = plan.cost, plan.deployment, plan.estimate
    assert traffic.peak_requests_per_s is not None
    capacity = d.replicas * est.capacity_requests_per_s * traffic.output_tokens * 3600  # output tokens per hour
    assert c.usd_per_million_output_tokens_at_capacity == pytest.approx(c.usd_per_hour / capacity * 1e6, rel=1e-3)
    peak = traffic.peak_requests_per_s * traffic.output_tokens * 3600
    assert c.usd_per_million_output_tokens_at_peak == pytest.approx(c.usd_per_hour / peak * 1e6, rel=1e-3)
    # Capacity covers the peak (utilisation under the cap), so a token at capacity is never dearer than at peak.
    assert c.usd_per_million_output_tokens_at_capacity < c.usd_per_million_output_tokens_at_peak


def test_at_the_peak_the_order_is_the_cost_order_and_at_capacity_it_is_not() -> None:
    """Every candidate serves the same peak, so per token at peak ranks them as their monthly cost does; at its
    own capacity a candidate with room to spare (a faster GPU, replicas rounded up) can be cheaper per token
    than a cheaper fleet, and `--sort token-cost` puts it first."""
    plan = plan_file(EXAMPLE)
    priced = [a for a in plan.alternatives if a.usd_per_million_output_tokens_at_capacity is not None]
    assert len(priced) > 5 and all(a.feasible and a.usd_per_month is not None for a in priced)
    by_cost = sorted(priced, key=lambda a: a.usd_per_month or 0.0)
    by_peak = sorted(priced, key=lambda a: a.usd_per_million_output_tokens_at_peak or 0.0)
    assert [a.usd_per_month for a in by_peak] == [a.usd_per_month for a in by_cost]

    ordered = order_candidates(plan, "token-cost")
    figures = [a.usd_per_million_output_tokens_at_capacity for a in ordered.alternatives]
    known = [x for x in figures if x is not None]
    assert known == sorted(known) and figures[:len(known)] == known  # priced first, cheapest per token first
    months = [a.usd_per_month or 0.0 for a in ordered.alternatives[:len(known)]]
    assert months != sorted(months)  # some dearer fleet serves a token for less
    assert [a.instance_type for a in ordered.alternatives] != [a.instance_type for a in plan.alternatives]
    assert ordered.deployment == plan.deployment and ordered.cost == plan.cost
    assert sorted(a.instance_type for a in ordered.alternatives) == sorted(a.instance_type for a in plan.alternatives)
    assert order_candidates(plan, "cost") is plan


def test_candidates_without_a_figure_keep_their_order_after_the_others() -> None:
    def alt(itype: str, x: float | None) -> Alternative:
        return Alternative(cloud="aws", region="us-east-1", instance_type=itype, engine="vllm", precision="bf16",
                           tp=1, pp=1, replicas=None if x is None else 1, usd_per_month=None if x is None else 100.0,
                           usd_per_million_output_tokens_at_capacity=x, rejected_because="test")

    plan = plan_file(EXAMPLE).model_copy(update={"alternatives": [
        alt("g5.xlarge", None), alt("g6.xlarge", 0.5), alt("g4dn.xlarge", None), alt("g6e.xlarge", 0.2)]})
    assert [a.instance_type for a in order_candidates(plan, "token-cost").alternatives] == [
        "g6e.xlarge", "g6.xlarge", "g5.xlarge", "g4dn.xlarge"]


def test_the_cli_sorts_the_table_and_the_json() -> None:
    table = run_cli("plan", str(EXAMPLE), "--sort", "token-cost")
    assert table.code == 0, table.err
    header = next(line for line in table.out.splitlines() if "$/1M out" in line)
    assert header.split()[:9] == ["instance", "region", "engine", "precision", "tp/pp", "replicas", "$/month",
                                  "$/1M", "out"]
    result = run_cli("plan", str(EXAMPLE), "--sort", "token-cost", "--format", "json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    figures = [a["usd_per_million_output_tokens_at_capacity"] for a in doc["alternatives"]]
    known = [x for x in figures if x is not None]
    assert known == sorted(known) and figures[:len(known)] == known
    cost = json.loads(run_cli("plan", str(EXAMPLE), "--format", "json").out)
    assert cost["deployment"] == doc["deployment"] and cost["alternatives"] != doc["alternatives"]


def test_an_unknown_sort_exits_2() -> None:
    result = run_cli("plan", str(EXAMPLE), "--sort", "tokens")
    assert result.code == 2 and "'cost', 'token-cost'" in result.err
