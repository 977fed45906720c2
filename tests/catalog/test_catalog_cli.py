"""`infragen catalog` through the real CLI boundary (exit codes and user-facing text)."""

from __future__ import annotations

import json

import pytest

from infragen.catalog import load_catalog
from infragen.cli import main
from infragen.cli.catalog_cmd import catalog_rows

REQUIRED_KEYS = {"cloud", "instance_type", "gpu", "gpu_count", "gpu_memory_gib", "vcpus", "memory_gib",
                 "local_nvme_gib", "network_gbps", "rdma", "region", "usd_per_hour", "source"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_json_rows_have_the_contract_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "--format", "json")
    assert code == 0
    rows = json.loads(out)
    assert rows and all(set(r) >= REQUIRED_KEYS for r in rows)
    # one row per instance x region price, unpriced types once with region null
    n_prices = sum(max(len(i.prices), 1) for i in load_catalog().instances)
    assert len(rows) == n_prices
    assert any(r["region"] is None and r["usd_per_hour"] is None for r in rows)


def test_gpu_filter_accepts_an_alias(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "--cloud", "aws", "--gpu", "H100", "--format", "json")
    assert code == 0
    rows = json.loads(out)
    assert {r["instance_type"] for r in rows} == {"p5.4xlarge", "p5.48xlarge"}
    assert all(r["gpu"] == "h100-sxm-80gb" for r in rows)


def test_region_filter_keeps_only_prices_there(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "--cloud", "alicloud", "--region", "cn-hangzhou", "--format", "json")
    assert code == 0
    rows = json.loads(out)
    assert rows and all(r["region"] == "cn-hangzhou" and r["usd_per_hour"] > 0 for r in rows)
    assert all(r["cloud"] == "alicloud" for r in rows)


def test_min_gpu_memory_filter(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "--min-gpu-memory-gib", "100", "--format", "json")
    assert code == 0
    rows = json.loads(out)
    assert rows and all(r["gpu_memory_gib"] >= 100 for r in rows)
    assert {"h200-141gb", "b200-180gb"} <= {r["gpu"] for r in rows}


def test_unknown_gpu_exits_2_with_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "catalog", "--gpu", "H10")
    assert code == 2 and out == ""
    assert err.startswith("Error: unknown GPU 'H10'; did you mean")
    assert "'H100'" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("args, needle", [
    (["--gpu", ""], "unknown GPU ''"),
    (["--min-gpu-memory-gib", "nan"], "--min-gpu-memory-gib"),
    (["--min-gpu-memory-gib", "inf"], "--min-gpu-memory-gib"),
])
def test_an_empty_gpu_or_a_non_finite_memory_exits_2(capsys: pytest.CaptureFixture[str], args: list[str],
                                                     needle: str) -> None:
    # both listed every instance type (or none), exit 0: an empty filter read as no filter, nan compared false
    code, out, err = run(capsys, "catalog", *args)
    assert code == 2 and out == "" and needle in err and "Traceback" not in err


def test_unknown_region_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "catalog", "--cloud", "aws", "--region", "us-east-9")
    assert code == 2 and "unknown region 'us-east-9'" in err and "us-east-1" in err


def test_bad_cloud_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "catalog", "--cloud", "gcp")
    assert code == 2 and "gcp" in err


def test_table_output_shows_prices_and_fx_note(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "--cloud", "alicloud", "--gpu", "A10", "--region", "cn-beijing")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["cloud", "instance_type", "gpu"]
    assert any("ecs.gn7i-c8g1.2xlarge" in line and "cn-beijing" in line for line in lines)
    assert "USD/CNY" in out


def test_gpus_subcommand_lists_every_accelerator(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "gpus", "--format", "json")
    assert code == 0
    ids = {a["id"] for a in json.loads(out)}
    assert ids == set(load_catalog().accelerators)
    code, out, _ = run(capsys, "catalog", "gpus")
    assert code == 0 and "h100-sxm-80gb" in out and "a10g-24gb" in out


def test_rows_are_sorted_cheapest_first_within_a_region() -> None:
    rows = catalog_rows(load_catalog(), cloud="aws", region="us-east-1")
    prices = [r["usd_per_hour"] for r in rows if r["usd_per_hour"] is not None]
    assert prices == sorted(prices)


def test_gpus_show_missing_figures_and_what_they_block(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "gpus", "--format", "json")
    assert code == 0
    by_id = {g["id"]: g for g in json.loads(out)}
    h20 = {m["figure"]: m["blocks"] for m in by_id["h20-96gb"]["missing_figures"]}
    assert h20["fp8_tflops"].startswith("nothing: fp8 prefill uses the 16-bit peak")
    gn7e = {m["figure"] for m in by_id["alibaba-gn7e-80gb"]["missing_figures"]}
    assert {"memory_bandwidth_gb_per_s", "fp16_tflops/bf16_tflops"} <= gn7e
    assert not any(m["figure"] == "memory_bandwidth_gb_per_s" for m in by_id["a10g-24gb"]["missing_figures"])
    code, out, _ = run(capsys, "catalog", "gpus")
    assert code == 0 and "missing figure: blocks" in out and "never planned" in out


def test_region_known_but_unpriced_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "catalog", "--region", "ca-west-1")
    assert code == 2 and "'ca-west-1' is a known region, but the catalog has no price there" in err
    code, _, err = run(capsys, "catalog", "--region", "eu-wset-1")
    assert code == 2 and "did you mean 'eu-west-1'" in err


def test_json_lists_every_region_a_type_is_priced_in_with_zones(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "--cloud", "aws", "--format", "json")
    assert code == 0
    rows = [r for r in json.loads(out) if r["instance_type"] == "g5.xlarge" and r["usd_per_hour"]]
    assert len({r["region"] for r in rows}) >= 15
    euw1 = next(r for r in rows if r["region"] == "eu-west-1")
    assert euw1["zones"] == ["euw1-az1", "euw1-az2", "euw1-az3"] and euw1["usd_per_hour"] == 1.123
