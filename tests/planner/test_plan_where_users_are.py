"""Issue #14's done-when: workloads pinned to the regions users ask for plan with the region's own price, g5 (A10G)
serves a 7-8B model, and every price the plan shows comes from that region's row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from infragen.catalog import load_catalog
from infragen.cli import main

ROOT = Path(__file__).resolve().parents[2]


def plan_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], example: str, **changes: object) -> dict:
    data = yaml.safe_load((ROOT / "examples" / f"{example}.yaml").read_text(encoding="utf-8"))
    data.update(changes)
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    try:
        main(["plan", str(path), "--format", "json"])
    except SystemExit as exc:
        out, err = capsys.readouterr()
        raise AssertionError(f"exit {exc.code}: {err}") from None
    out, _ = capsys.readouterr()
    plan: dict = json.loads(out)
    return plan


def region_price(cloud: str, itype: str, region: str) -> float:
    inst = load_catalog().instance(itype)
    assert inst is not None and inst.cloud == cloud
    row = next(p for p in inst.prices if p.region == region)
    usd = row.on_demand_usd_per_hour
    return usd if usd is not None else row.on_demand_cny_per_hour * load_catalog().usd_per_cny


@pytest.mark.parametrize(("example", "cloud", "region"), [
    ("team-chatbot", "aws", "eu-west-1"), ("team-chatbot", "aws", "ap-northeast-1"),
    ("team-chatbot", "aws", "ap-southeast-2"),
    ("ali-chat-7b", "alicloud", "cn-shanghai"), ("ali-chat-7b", "alicloud", "cn-hongkong")])
def test_a_workload_pinned_to_a_region_plans_with_that_regions_price(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], example: str, cloud: str, region: str) -> None:
    plan = plan_json(tmp_path, capsys, example, regions=[region])
    chosen = plan["deployment"]
    assert (chosen["cloud"], chosen["region"]) == (cloud, region)
    hourly = region_price(cloud, chosen["instance_type"], region)
    assert plan["cost"]["usd_per_hour"] == pytest.approx(chosen["nodes"] * hourly, rel=1e-3)
    assert "your price" not in plan["cost"]["price_source"]  # a listed price, not an override


def test_g5_plans_an_a10g_deployment_for_an_8b_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_json(tmp_path, capsys, "team-chatbot", model="llama-3.1-8b", precision=["bf16"], weights=None,
                     instance_families={"allow": ["g5"]}, regions=["us-east-1"])
    chosen = plan["deployment"]
    assert chosen["instance_type"].startswith("g5.")
    assert chosen["gpu"] == load_catalog().instance(chosen["instance_type"]).gpu == "a10g-24gb"
    assert chosen["precision"] == "bf16"


def test_h20_with_a_quoted_price_is_planned_in_the_cheaper_precision(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """gn8v (H20) has no listed price: a quote makes it plannable, and given fp8 or bf16 the planner picks the
    cheaper of the two plans, with the quote recorded as the price source. (fp8 was the cheaper until the measured
    linear kernel, 2026-12-04: the catalog's H20 has no fp8 TFLOPS, so fp8 runs weight-only at the fitted roofline
    while bf16 runs at the measured cuBLAS rate.)"""
    kw = dict(weights=None, regions=["cn-beijing"], instance_families={"allow": ["gn8v"]}, min_replicas=1,
              prices=[{"instance_type": "ecs.gn8v.4xlarge", "region": "cn-beijing", "on_demand_cny_per_hour": 40.0,
                       "note": "quote Q-17"}])
    alone = {p: plan_json(tmp_path, capsys, "ali-chat-7b", precision=[p], **kw)["cost"]["usd_per_month"]
             for p in ("fp8", "bf16")}
    plan = plan_json(tmp_path, capsys, "ali-chat-7b", precision=["fp8", "bf16"], **kw)
    chosen = plan["deployment"]
    assert (chosen["instance_type"], chosen["gpu"]) == ("ecs.gn8v.4xlarge", "h20-96gb")
    assert plan["cost"]["usd_per_month"] == pytest.approx(min(alone.values()))
    assert alone[chosen["precision"]] == pytest.approx(min(alone.values()))
    assert "your price" in plan["cost"]["price_source"] and "quote Q-17" in plan["cost"]["price_source"]
    assert plan["cost"]["usd_per_hour"] == pytest.approx(chosen["nodes"] * 40.0 * load_catalog().usd_per_cny, rel=1e-3)
