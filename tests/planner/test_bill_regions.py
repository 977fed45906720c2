"""AWS bills outside us-east-1: each line priced at its region's cited figure, or listed unpriced (never $0).

The expected figures are the sources' own (services.yaml's generated block): iammanis/ec2-vps@0147287
_data/rates.json for NAT, gp3 and egress (AWS pricing-page feeds of 2026-09-03 / 2026-08-31), infracost@0ee89cf's
data_transfer golden for cross-zone ($20.00 per 2,000 GB), infracost@e9ce629's Elastic Beanstalk golden for the
eu-west-1 NLB ($18.40 per 730 h, $150.00 per 34.2465 LCU-months), yeo/ec2.shop@74c9fd8's EBS feed for eu-central-2.
"""

from __future__ import annotations

import re

import pytest

from infragen.catalog.refresh import services as refresh
from infragen.catalog.services import load_service_prices
from infragen.plan import BillLine, BillPlan, Plan
from infragen.report import render_text
from infragen.sizing import bill
from infragen.spec import TrafficSpec
from tests.plan_factory import make_plan

#: region -> (NAT $/h, NAT $/GB, gp3 $/GB-mo, gp3 $/IOPS-mo, gp3 $/MB/s-mo, cross-zone $/GB, egress $/GB)
SOURCED = {
    "eu-west-1": (0.048, 0.048, 0.088, 0.0055, 45.056 / 1024, 0.01, 0.09),
    "ap-northeast-1": (0.062, 0.062, 0.096, 0.006, 49.152 / 1024, 0.01, 0.114),
    "ap-southeast-2": (0.059, 0.059, 0.096, 0.006, 49.152 / 1024, 0.01, 0.114),
    "sa-east-1": (0.093, 0.093, 0.152, 0.0095, 77.824 / 1024, 0.01, 0.15),
    "ap-south-1": (0.056, 0.056, 0.0912, 0.0057, 46.6944 / 1024, 0.01, 1119.23 / 10240),
}
TRAFFIC = TrafficSpec(peak_requests_per_s=10, prompt_tokens=1000, output_tokens=500)


def _in(region: str, load_balancer: str = "alb") -> Plan:
    base = make_plan("single", "aws")  # 2 x g6e.xlarge, 60 GiB gp3 at 16,000 IOPS and 1,000 MB/s per node
    return base.model_copy(update={
        "deployment": base.deployment.model_copy(update={"region": region}),
        "network": base.network.model_copy(update={"load_balancer": load_balancer}),
    })


def _lines(plan: Plan) -> tuple[BillPlan, dict[str, BillLine]]:
    b = bill.select_bill(plan, TRAFFIC, load_service_prices())
    return b, {x.item: x for x in b.lines}


@pytest.mark.parametrize("region", sorted(SOURCED))
def test_nat_storage_transfer_lines_use_the_regions_sourced_figures(region: str) -> None:
    nat_h, nat_gb, gb_mo, iops_mo, mbps_mo, cross, egress = SOURCED[region]
    plan = _in(region)
    b, lines = _lines(plan)
    nodes, s = plan.deployment.nodes, plan.storage
    weights_gb = plan.model.weights_gib * 2**30 / 1e9
    assert lines["nat-gateway"].usd_per_month_at_peak == pytest.approx(nat_h * 730, abs=0.01)
    assert lines["model-download"].usd_per_month_at_peak == pytest.approx(nat_gb * weights_gb * nodes, abs=0.01)
    assert lines["cross-zone"].usd_per_month_at_peak == pytest.approx(2 * cross * weights_gb * nodes / 2, abs=0.01)
    per_node = ((s.root_volume_gib + s.volume_gib) * gb_mo + (16000 - 3000) * iops_mo + (1000 - 125) * mbps_mo)
    assert lines["block-storage"].usd_per_month_at_peak == pytest.approx(per_node * nodes, abs=0.01)
    assert lines["egress"].usd_per_month_at_peak == pytest.approx(egress * 10 * 32_000 * 730 * 3600 / 1e9, abs=0.01)
    for item in ("nat-gateway", "model-download", "cross-zone", "block-storage", "egress"):
        assert not lines[item].unpriced and "as of 20" in lines[item].price_source
    # No source found states an ALB price outside us-east-1: the default balancer stays n/a, not $0.
    assert b.unpriced == ["load-balancer"] and lines["load-balancer"].usd_per_month_at_peak is None
    assert "load balancer n/a" in render_text(plan.model_copy(update={"bill": b}))


def test_an_nlb_in_eu_west_1_is_priced_from_infracosts_golden() -> None:
    plan = _in("eu-west-1", "nlb")
    b, lines = _lines(plan)
    unit = load_service_prices().capacity_unit("aws", "nlb")
    assert unit is not None
    rps, in_flight_s = 10, plan.estimate.e2e_ms / 1000
    lcu = max(rps / unit.new_connections_per_s, rps * in_flight_s / unit.active_connections,
              rps * 64_000 * 3600 / 1e9 / unit.gb_per_hour)
    assert lines["load-balancer"].usd_per_month_at_peak == pytest.approx((0.0252 + 0.006 * lcu) * 730, abs=0.01)
    assert b.unpriced == []


def test_a_region_no_source_covers_stays_unpriced_never_zero() -> None:
    """mx-central-1: EC2 is priced there, no stored source states its service prices."""
    plan = _in("mx-central-1")
    b, lines = _lines(plan)
    services = ["load-balancer", "nat-gateway", "model-download", "cross-zone", "block-storage", "egress"]
    assert b.unpriced == services
    for item in services:
        assert lines[item].usd_per_month_at_peak is None
        assert lines[item].unpriced.startswith("no price in services.yaml")
    text = render_text(plan.model_copy(update={"bill": b}))
    assert "NAT gateway n/a" in text and "egress n/a" in text and "block storage n/a" in text


def test_a_partly_covered_region_prices_what_its_source_states() -> None:
    """eu-central-2: only the 2024 EBS feed covers it (gp3 0.1142 / 0.007 / 58.4909 per GiB/s); NAT stays n/a."""
    plan = _in("eu-central-2")
    b, lines = _lines(plan)
    per_node = (plan.storage.root_volume_gib + 60) * 0.1142 + 13000 * 0.007 + 875 * round(58.4909 / 1024, 6)
    assert lines["block-storage"].usd_per_month_at_peak == pytest.approx(per_node * 2, abs=0.01)
    assert "yeo/ec2.shop@74c9fd8" in lines["block-storage"].price_source
    assert {"nat-gateway", "egress", "cross-zone", "load-balancer"} <= set(b.unpriced)


def test_every_aws_row_has_a_commit_or_document_and_a_date() -> None:
    rows = [r for r in load_service_prices().rows if r.cloud == "aws"]
    assert len(rows) > 80
    for r in rows:
        assert re.fullmatch(r"20\d\d-\d\d-\d\d", r.as_of), r
        assert re.search(r"[\w.-]+/[\w.-]+@[0-9a-f]{7}", r.source) or r.item == "s3-gateway-gb", r.source


def test_the_generated_rows_are_what_the_refresh_script_writes() -> None:
    text = (refresh.DATA / refresh.SERVICES_FILE).read_text(encoding="utf-8")
    assert refresh.build() == text, "run python -m infragen.catalog.refresh.services and review the diff"
    doc = refresh.DOC.read_text(encoding="utf-8")
    assert refresh.updated_doc(doc, refresh.render_doc_table(text, refresh.aws_regions())) == doc


def test_sources_agree_wherever_they_overlap() -> None:
    """The 2024 EBS feed, the 2026 ec2-vps rates, infracost's goldens and the hand-cited us-east-1 rows state the same
    price for every (region, item) two of them cover: a transcription slip would show here."""
    found = refresh.quotes()
    hand = refresh.hand_prices((refresh.DATA / refresh.SERVICES_FILE).read_text(encoding="utf-8"))
    assert refresh.disagreements(found, hand) == []
    overlapping = {(q.region, q.item) for q in found if sum(1 for o in found if (o.region, o.item) ==
                                                            (q.region, q.item)) > 1}
    assert len(overlapping) > 80  # gp3 x 23 regions in two feeds, egress x 22 in two, us-east-1 against hand rows


def test_newest_source_wins_and_hand_rows_are_kept() -> None:
    q = refresh.Quote
    found = [q("eu-west-1", "nat-hour", 0.048, "2026-09-03", "new"), q("eu-west-1", "nat-hour", 0.05, "2024-01-01",
                                                                        "old"),
             q("us-east-1", "nat-hour", 0.045, "2026-09-03", "new"), q("xx-none-1", "nat-hour", 0.1, "2026-09-03", "x")]
    picked = refresh.chosen(sorted(found, key=lambda x: x.as_of, reverse=True), {("us-east-1", "nat-hour"): 0.045},
                            ["eu-west-1", "us-east-1"])
    assert picked == [found[0]]
    assert refresh.disagreements(found, {}) == ["eu-west-1 nat-hour: [0.048, 0.05]"]


def test_infracost_golden_lines_become_rows() -> None:
    golden = (" aws_data_transfer.eu-west-1\n"
              " ├─ Intra-region data transfer      2,000  GB   $20.00  * \n"
              " └─ Outbound data transfer to Internet (first 10TB)  10,240  GB  $921.60  * \n"
              " aws_elastic_beanstalk_environment.x\n"
              " └─ aws_loadbalancer\n"
              "    ├─ Network load balancer     730  hours   $18.40    \n"
              "    └─ Load balancer capacity units   Monthly cost depends on usage: $4.38 per LCU\n")
    rows = refresh.infracost_rows("g", golden)
    assert [r[2:6] for r in rows] == [["eu-west-1", "Intra-region data transfer", "cross-zone-gb", "2,000"],
                                      ["eu-west-1", "Outbound data transfer to Internet (first 10TB)", "egress-gb",
                                       "10,240"],
                                      ["x", "Network load balancer", "nlb-hour", "730"]]
