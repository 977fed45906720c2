"""The whole bill and the cost per million tokens: cited prices, exact arithmetic, unpriced lines listed, views."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infragen.catalog.services import FREE_ITEMS, ITEMS, load_service_prices
from infragen.diff import diff_plans, render_diff_markdown
from infragen.report import render_markdown, render_text
from infragen.sizing import bill, plan_file
from infragen.spec import TrafficSpec
from tests.plan_factory import make_plan
from tests.spec.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]


def test_every_service_price_is_cited_and_dated() -> None:
    prices = load_service_prices()
    assert prices.rows and {r.item for r in prices.rows} <= ITEMS
    for row in prices.rows:
        assert row.usd > 0 or row.item in FREE_ITEMS
        assert len(row.source) > 20 and row.as_of[:2] == "20" and row.regions
    for cloud, lb in (("aws", "alb"), ("aws", "nlb"), ("alicloud", "alb")):
        unit = prices.capacity_unit(cloud, lb)
        assert unit is not None and unit.source


def test_node_zones_match_the_aws_stack_layout() -> None:
    from infragen.provision.aws.layout import AZ_COUNT

    assert bill.NODE_ZONES == AZ_COUNT


def test_aws_bill_lines_are_exact_arithmetic_on_cited_prices() -> None:
    plan = make_plan("single", "aws")  # g6e-style single-GPU replicas, us-east-1, ALB
    traffic = TrafficSpec(peak_requests_per_s=10, prompt_tokens=1000, output_tokens=500)
    b = bill.select_bill(plan, traffic, load_service_prices())
    lines = {x.item: x for x in b.lines}
    assert list(lines) == ["instances", "load-balancer", "nat-gateway", "model-download", "cross-zone",
                           "block-storage", "egress"]
    assert b.unpriced == [] and b.usd_per_month_at_profile is None
    assert lines["instances"].usd_per_month_at_peak == plan.cost.usd_per_month
    assert lines["nat-gateway"].usd_per_month_at_peak == pytest.approx(0.045 * 730)
    # 10 req/s x (32 x 1000 + 64 x 500) bytes x 3600 s = 2.304 GB/h -> 2.304 LCU (above 10/25 and in-flight/3000)
    assert b.request_bytes == 32_000 and b.response_bytes == 32_000
    lcu = max(10 / 25, 10 * plan.estimate.e2e_ms / 1000 / 3000, 10 * 64_000 * 3600 / 1e9)
    assert lines["load-balancer"].usd_per_month_at_peak == pytest.approx((0.0225 + 0.008 * lcu) * 730, abs=0.01)
    gb = plan.model.weights_gib * 2**30 / 1e9
    nodes = plan.deployment.nodes
    assert lines["model-download"].usd_per_month_at_peak == pytest.approx(0.045 * gb * nodes, abs=0.01)
    assert lines["cross-zone"].usd_per_month_at_peak == pytest.approx(2 * 0.01 * gb * nodes / 2, abs=0.01)
    egress_gb = 10 * 32_000 * 730 * 3600 / 1e9
    assert lines["egress"].usd_per_month_at_peak == pytest.approx(0.09 * egress_gb, abs=0.01)
    total = sum(x.usd_per_month_at_peak or 0 for x in b.lines)
    assert b.usd_per_month_at_peak == pytest.approx(total, abs=0.02)
    out_tokens = 10 * 500 * 730 * 3600
    assert b.usd_per_million_output_tokens_at_peak == pytest.approx(total / out_tokens * 1e6, rel=1e-3)
    assert b.usd_per_million_tokens_at_peak == pytest.approx(total / (out_tokens * 3) * 1e6, rel=1e-3)
    for x in b.lines[1:]:  # the instances line cites the catalog (here the factory's fixture)
        assert "as of" in x.price_source


def test_s3_weights_on_aws_come_through_the_gateway_endpoint_not_the_nat() -> None:
    """The AWS stack routes S3 through a free gateway endpoint (provision/aws/network.py): no NAT or zone charge."""
    plan = make_plan("single", "aws")
    s3 = plan.model_copy(update={"model": plan.model.model_copy(
        update={"weights_source": "s3", "weights_uri": "s3://bucket/models/m"})})
    traffic = TrafficSpec(peak_requests_per_s=10)
    via_nat = {x.item: x for x in bill.select_bill(plan, traffic, load_service_prices()).lines}
    lines = {x.item: x for x in bill.select_bill(s3, traffic, load_service_prices()).lines}
    assert via_nat["model-download"].usd_per_month_at_peak > 0  # huggingface: through the NAT
    for item in ("model-download", "cross-zone"):
        assert lines[item].usd_per_month_at_peak == 0 and not lines[item].unpriced
        assert "gateway endpoint" in lines[item].quantity and "no additional charge" in lines[item].price_source
    assert lines["nat-gateway"].usd_per_month_at_peak == via_nat["nat-gateway"].usd_per_month_at_peak


def test_a_response_size_sets_the_egress() -> None:
    plan = make_plan("single", "aws")
    small = bill.select_bill(plan, TrafficSpec(peak_requests_per_s=10, response_bytes=1000), load_service_prices())
    big = bill.select_bill(plan, TrafficSpec(peak_requests_per_s=10, response_bytes=4000), load_service_prices())
    egress = [next(x for x in b.lines if x.item == "egress").usd_per_month_at_peak for b in (small, big)]
    assert egress == [pytest.approx(0.09 * 10 * n * 730 * 3600 / 1e9, abs=0.005) for n in (1000, 4000)]


def test_lines_without_a_cited_price_are_listed_never_zero() -> None:
    plan = make_plan("single", "alicloud")
    b = bill.select_bill(plan, TrafficSpec(peak_requests_per_s=5), load_service_prices())
    lines = {x.item: x for x in b.lines}
    assert "egress" in b.unpriced and lines["egress"].usd_per_month_at_peak is None
    assert lines["egress"].unpriced.startswith("no price in services.yaml")
    assert lines["nat-gateway"].usd_per_month_at_peak == pytest.approx(0.034 * 730)  # cn-hangzhou
    text = render_text(plan.model_copy(update={"bill": b}))
    assert "unpriced (no cited price):" in text and "egress n/a" in text


def test_an_unpriced_load_balancer_is_not_shown_as_zero() -> None:
    """AWS regions outside those services.yaml prices have no ALB hour/LCU price: the line is n/a, not $0."""
    base = make_plan("single", "aws")
    plan = base.model_copy(update={"deployment": base.deployment.model_copy(update={"region": "eu-west-1"})})
    b = bill.select_bill(plan, TrafficSpec(peak_requests_per_s=5), load_service_prices())
    lb = {x.item: x for x in b.lines}["load-balancer"]
    assert "load-balancer" in b.unpriced and lb.usd_per_month_at_peak is None
    assert "load balancer n/a" in render_text(plan.model_copy(update={"bill": b}))


def test_the_daily_example_bill_is_cheaper_at_the_profile_and_shows_everywhere() -> None:
    plan = plan_file(ROOT / "examples" / "daily-chatbot.yaml")
    b = plan.bill
    assert b is not None and b.usd_per_month_at_profile is not None
    assert b.usd_per_month_at_profile < b.usd_per_month_at_peak
    assert b.usd_per_million_output_tokens_at_average is not None and b.usd_per_million_output_tokens_at_peak
    # Scale-ups relaunch nodes every day: the profile downloads the weights more often than the steady peak fleet.
    downloads = next(x for x in b.lines if x.item == "model-download")
    assert (downloads.usd_per_month_at_profile or 0) > (downloads.usd_per_month_at_peak or 0)
    doc = json.loads(plan.to_json())
    assert doc["bill"]["usd_per_month_at_peak"] == b.usd_per_month_at_peak
    assert "Bill:" in render_text(plan) and "per 1M output tokens" in render_text(plan)
    md = render_markdown(plan)
    assert "| bill line |" in md and "| egress |" in md
    r = run_cli("plan", str(ROOT / "examples" / "daily-chatbot.yaml"), "--format", "json")
    assert r.code == 0 and "usd_per_million_output_tokens_at_peak" in r.out


def test_diff_shows_the_bill_breakdown_and_cost_per_token() -> None:
    base = plan_file(ROOT / "examples" / "team-chatbot.yaml")
    new = plan_file(ROOT / "examples" / "daily-chatbot.yaml")
    d = diff_plans(base, new)
    labels = [r.label for r in d.rows]
    for label in ("Bill: load balancer", "Bill: egress", "Whole bill at peak (month)",
                  "$ per 1M output tokens at peak", "Monthly cost at the daily profile"):
        assert label in labels
    md = render_diff_markdown(d)
    assert "Bill: NAT gateway" in md and "bill." not in md.split("Other fields")[-1].split("Plan digest")[0]
    # A plan without a bill (an old plan file) shows no empty bill rows against another without one.
    old = base.model_copy(update={"bill": None})
    assert all(not r.label.startswith("Bill:") for r in diff_plans(old, old).rows)


def test_stack_exports_carry_the_bill_breakdown() -> None:
    from infragen.provision.common import plan_exports

    plan = plan_file(ROOT / "examples" / "daily-chatbot.yaml")
    exports = plan_exports(plan)
    assert plan.bill is not None and plan.scaling is not None
    assert exports["bill_usd_per_month"]["egress"] == next(x.usd_per_month_at_peak for x in plan.bill.lines
                                                          if x.item == "egress")
    assert exports["bill_total_usd_per_month"] == plan.bill.usd_per_month_at_peak
    assert exports["usd_per_million_output_tokens"] == plan.bill.usd_per_million_output_tokens_at_peak
    assert exports["replicas_min_max"] == [plan.scaling.min_replicas, plan.scaling.max_replicas]
