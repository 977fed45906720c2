"""Regions, family filters and your own prices through the real CLI: each error says why, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infragen.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out + err


def workload(tmp_path: Path, example: str = "team-chatbot", **changes: object) -> Path:
    data = yaml.safe_load((ROOT / "examples" / f"{example}.yaml").read_text(encoding="utf-8"))
    data.update(changes)
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_unknown_region_is_exit_2_with_did_you_mean_and_the_known_regions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    code, text = run(capsys, command, str(workload(tmp_path, regions=["eu-wset-1"])))
    assert code == 2
    assert "unknown region 'eu-wset-1'; did you mean 'eu-west-1'" in text
    assert "known regions: aws: af-south-1," in text and "us-west-2" in text
    code, text = run(capsys, command, str(workload(tmp_path, regions=["zz-east-1"])))
    assert code == 2 and "regions[0]: unknown region 'zz-east-1'" in text


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_known_region_without_prices_names_the_priced_regions_and_the_override(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    code, text = run(capsys, command, str(workload(tmp_path, regions=["ca-west-1"])))
    assert code == 2
    assert "'ca-west-1' is a known region, but the catalog has no price for any instance type there" in text
    assert "priced regions: " in text and "us-east-1" in text
    assert "`prices:` in the workload" in text and "--prices FILE" in text


def test_family_filter_matching_nothing_gets_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run(capsys, "validate", str(workload(tmp_path, instance_families={"allow": ["g6x"]})))
    assert code == 2
    assert "instance_families.allow[0]: unknown instance family 'g6x'; did you mean" in text and "'g6e'" in text
    assert "known instance families: c7a," in text  # the hint's plural ("familys" before)


def test_your_price_plans_an_unpriced_region_and_the_plan_records_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump({"prices": [{"instance_type": "g6e.xlarge", "region": "ca-west-1",
                                                  "on_demand_usd_per_hour": 2.5, "note": "quote Q-1"}]}))
    path = workload(tmp_path, regions=["ca-west-1"])
    code, text = run(capsys, "plan", str(path), "--prices", str(prices), "--format", "json")
    assert code == 0, text
    assert '"region": "ca-west-1"' in text and "your price" in text and "quote Q-1" in text
    assert "priced with your own price for g6e.xlarge in ca-west-1" in text
    # the same price in the workload's own `prices:` field
    inline = workload(tmp_path, regions=["ca-west-1"],
                      prices=[{"instance_type": "g6e.xlarge", "region": "ca-west-1", "on_demand_usd_per_hour": 2.5}])
    code, text = run(capsys, "plan", str(inline))
    assert code == 0 and "$12,775/month" in text and "your price" in text


def test_a_price_for_an_unknown_type_or_region_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad_type = workload(tmp_path, prices=[{"instance_type": "g6e.xlarg", "region": "us-east-1",
                                           "on_demand_usd_per_hour": 1.0}])
    code, text = run(capsys, "plan", str(bad_type))
    assert code == 2 and "prices[0].instance_type: unknown instance type 'g6e.xlarg'; did you mean 'g6e.xlarge'" in text
    bad_region = workload(tmp_path, prices=[{"instance_type": "g6e.xlarge", "region": "us-east-9",
                                             "on_demand_usd_per_hour": 1.0}])
    code, text = run(capsys, "plan", str(bad_region))
    assert code == 2 and "prices[0].region: unknown aws region 'us-east-9'" in text
    no_price = workload(tmp_path, prices=[{"instance_type": "g6e.xlarge", "region": "us-east-1"}])
    code, text = run(capsys, "validate", str(no_price))
    assert code == 2 and "give at least one of on_demand_usd_per_hour" in text


def test_unpriced_candidates_never_show_as_zero_dollars(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = workload(tmp_path, "ali-70b", allow_unpriced=True, instance_families={"allow": ["gn8v"]}, regions=[])
    code, text = run(capsys, "plan", str(path))
    assert code == 0, text
    assert "$0" not in text
    assert "no price; give one with `prices:` in the workload or `infragen plan --prices FILE`" in text


def test_h20_plans_in_fp8_with_a_quoted_price(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # gn8v (H20) is sales-gated: no stored list prices it, so only a user's quote makes it plannable
    path = tmp_path / "h20.yaml"
    path.write_text(yaml.safe_dump({
        "model": "qwen2-7b", "precision": ["fp8"],
        "traffic": {"peak_requests_per_s": 5, "prompt_tokens": 1024, "output_tokens": 256},
        "slo": {"ttft_p99_ms": 2000, "tpot_ms": 60}, "cloud": "alicloud", "regions": ["cn-beijing"],
        "instance_families": {"allow": ["gn8v"]},
        "prices": [{"instance_type": "ecs.gn8v.4xlarge", "region": "cn-beijing", "on_demand_cny_per_hour": 40.0,
                    "note": "quote Q-17"}]}))
    code, text = run(capsys, "plan", str(path), "--format", "json")
    assert code == 0, text
    assert '"instance_type": "ecs.gn8v.4xlarge"' in text and '"precision": "fp8"' in text
    assert "your price" in text and "quote Q-17" in text
    without = yaml.safe_load(path.read_text())
    del without["prices"]
    path.write_text(yaml.safe_dump(without))
    code, text = run(capsys, "plan", str(path))
    assert code == 2 and "instance_families.allow ['gn8v'] has no priced instance type in cn-beijing" in text
