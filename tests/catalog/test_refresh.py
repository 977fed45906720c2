"""`catalog refresh`: AWS against moto (DescribeInstanceTypes, DescribeSpotPriceHistory), Pricing GetProducts and
Alibaba ECS on recorded responses (tests/fixtures/recorded/README.md says how they were made)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("moto")
boto3 = pytest.importorskip("boto3")
from botocore.stub import Stubber  # noqa: E402
from moto import mock_aws  # noqa: E402

from infragen.catalog import load_catalog_dir  # noqa: E402
from infragen.catalog.refresh import aws, packaged_data_dir  # noqa: E402
from infragen.cli import main  # noqa: E402

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "recorded"
NOW = dt.datetime(2026, 8, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)


def _existing(*types: str) -> dict[str, Any]:
    data = yaml.safe_load((packaged_data_dir() / "aws.yaml").read_text(encoding="utf-8"))
    data["instances"] = [r for r in data["instances"] if r["id"] in types]
    return data


# ------------------------------------------------------------------------------------------ AWS: parsing


def test_get_products_parsing_on_a_recorded_page() -> None:
    page = json.loads((RECORDED / "aws_pricing_get_products.json").read_text())
    prices = aws.parse_get_products([page])
    # Reserved terms, the capacity-reservation row and the Windows row are all ignored
    assert prices == {("p5.48xlarge", "us-east-1"): 55.04, ("g6.xlarge", "us-east-1"): 0.8048}


def test_on_demand_filters_pin_the_plain_linux_price() -> None:
    fields = {f["Field"]: f["Value"] for f in aws.on_demand_filters("g6.xlarge", "us-west-2")}
    assert fields == {"instanceType": "g6.xlarge", "regionCode": "us-west-2", "operatingSystem": "Linux",
                      "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
                      "licenseModel": "No License required"}


# ----------------------------------------------------------------------------------- AWS: against moto


def test_describe_instance_types_from_moto(aws_env: None) -> None:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        found, missing = aws.describe_instance_types(ec2, ["p5.48xlarge", "g6.xlarge", "no-such.type"])
    assert missing == ["no-such.type"]
    spec = aws.spec_from_describe(found["p5.48xlarge"])
    assert spec["gpu"] == "h100-sxm-80gb" and spec["gpu_count"] == 8 and spec["gpu_memory_gib"] == 80
    assert (spec["rdma"], spec["efa_interfaces"], spec["network_cards"]) == ("efa", 32, 32)
    assert spec["vcpus"] == 192 and spec["memory_gib"] == 2048 and spec["local_nvme_count"] == 8
    assert spec["network_gbps"] == 3200
    g6 = aws.spec_from_describe(found["g6.xlarge"])
    assert g6["gpu"] == "l4-24gb" and g6["gpu_memory_gib"] == 22888 / 1024 and g6["rdma"] == "none"


def test_refresh_with_moto_and_a_stubbed_pricing_api(aws_env: None) -> None:
    page = json.loads((RECORDED / "aws_pricing_get_products.json").read_text())
    with mock_aws():
        pricing = boto3.client("pricing", region_name="us-east-1")
        stub = Stubber(pricing)
        for itype in ("g6.xlarge", "p5.48xlarge"):
            stub.add_response("get_products", page, {"ServiceCode": "AmazonEC2", "FormatVersion": "aws_v1",
                                                     "Filters": aws.on_demand_filters(itype, "us-east-1")})
        steps: list[tuple[str, int, int]] = []
        with stub:
            content, notes = aws.refresh_aws_file(
                _existing("g6.xlarge", "p5.48xlarge"), ec2_for_region=lambda r: boto3.client("ec2", region_name=r),
                pricing=pricing, regions=["us-east-1"], now=NOW, progress=lambda *a: steps.append(a))
        stub.assert_no_pending_responses()
    by_id = {r["id"]: r for r in content["instances"]}
    price = by_id["p5.48xlarge"]["prices"][0]
    assert price["on_demand_usd_per_hour"] == 55.04 and "GetProducts" in price["source"]
    assert price["as_of"] == "2026-08-01"
    assert price["spot_usd_per_hour"] == pytest.approx(0.00001)  # moto's constant spot price
    assert "DescribeSpotPriceHistory" in price["spot_source"]
    assert by_id["g6.xlarge"]["source"].startswith("AWS EC2 DescribeInstanceTypes (us-east-1, 2026-08-01)")
    assert steps[-1][1] == steps[-1][2]  # the progress bar reaches its end
    assert content["as_of"] == "2026-08-01"
    assert isinstance(notes, list)


def test_cli_refresh_against_moto_writes_a_loadable_file(aws_env: None, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    with mock_aws():
        main(["catalog", "refresh", "--cloud", "aws", "--region", "us-east-1", "--out", str(tmp_path),
              "--no-pricing-api"])
    out = capsys.readouterr().out
    assert f"wrote {tmp_path / 'aws.yaml'}" in out
    data = yaml.safe_load((tmp_path / "aws.yaml").read_text())
    old = yaml.safe_load((packaged_data_dir() / "aws.yaml").read_text())
    assert len(data["instances"]) == len(old["instances"])
    # on-demand kept (no Pricing API), spot from moto, specs from moto; p3 is not in moto's data: kept + noted
    p5 = next(r for r in data["instances"] if r["id"] == "p5.48xlarge")
    assert p5["prices"][0]["on_demand_usd_per_hour"] == 55.04
    assert p5["prices"][0]["spot_usd_per_hour"] == pytest.approx(0.00001)
    notes = (tmp_path / "aws.refresh-notes.txt").read_text()
    assert "p3.2xlarge: not offered in us-east-1" in notes
    # fixed-rate multi-card types keep the instance total, not the sum of their cards
    g6e = next(r for r in data["instances"] if r["id"] == "g6e.48xlarge")
    assert g6e["network_gbps"] == 400 and g6e["network_cards"] == 4
    # the written file passes the loader's checks together with the packaged files
    for name in ("accelerators.yaml", "cpus.yaml", "alicloud.yaml"):
        (tmp_path / name).write_text((packaged_data_dir() / name).read_text())
    assert len(load_catalog_dir(tmp_path).instances_for("aws")) == len(old["instances"])


def test_cli_refresh_without_credentials_is_an_input_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE",
                "AWS_CONFIG_FILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(SystemExit) as exc:
        main(["catalog", "refresh", "--cloud", "aws", "--region", "us-east-1", "--out", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: catalog refresh: aws API call failed") and "Traceback" not in err
    assert not (tmp_path / "aws.yaml").exists()


# ------------------------------------------------------------------------------------- Alibaba: recorded


class RecordedEcs:
    """Answers the two ECS calls from recorded bodies, through the SDK's own response models."""

    def __init__(self, region: str) -> None:
        self.region = region
        self.types = json.loads((RECORDED / "alicloud_describe_instance_types.json").read_text())
        self.prices = json.loads((RECORDED / "alicloud_describe_price.json").read_text())

    def describe_instance_types(self, req: Any) -> Any:
        from alibabacloud_ecs20140526 import models

        body = json.loads(json.dumps(self.types))
        body["InstanceTypes"]["InstanceType"] = [r for r in body["InstanceTypes"]["InstanceType"]
                                                 if r["InstanceTypeId"] in req.instance_types]
        return models.DescribeInstanceTypesResponse().from_map({"headers": {}, "statusCode": 200, "body": body})

    def describe_price(self, req: Any) -> Any:
        from alibabacloud_ecs20140526 import models

        assert (req.price_unit, req.resource_type, req.region_id) == ("Hour", "instance", self.region)
        body = self.prices.get(f"{req.region_id}/{req.instance_type}")
        if body is None:
            raise RuntimeError("Code: InvalidInstanceType.NotSupported")
        return models.DescribePriceResponse().from_map({"headers": {}, "statusCode": 200, "body": body})


def test_alibaba_refresh_on_recorded_responses() -> None:
    pytest.importorskip("alibabacloud_ecs20140526")
    from infragen.catalog.refresh import alicloud

    data = yaml.safe_load((packaged_data_dir() / "alicloud.yaml").read_text())
    keep = {"ecs.gn7i-c8g1.2xlarge", "ecs.gn6i-c4g1.xlarge"}
    data["instances"] = [r for r in data["instances"] if r["id"] in keep]
    content, notes = alicloud.refresh_alicloud_file(data, client_for_region=RecordedEcs,
                                                    regions=["cn-beijing", "cn-zhangjiakou"], now=NOW)
    by_id = {r["id"]: r for r in content["instances"]}
    gn7i = by_id["ecs.gn7i-c8g1.2xlarge"]
    assert (gn7i["vcpus"], gn7i["memory_gib"], gn7i["gpu"], gn7i["gpu_memory_gib"]) == (8, 30.0, "a10-24gb", 24.0)
    assert gn7i["network_gbps"] == 16.0  # 16,000,000 kbit/s
    beijing = next(p for p in gn7i["prices"] if p["region"] == "cn-beijing")
    assert beijing["on_demand_cny_per_hour"] == 9.5326 and "DescribePrice" in beijing["source"]
    gn6i = by_id["ecs.gn6i-c4g1.xlarge"]
    assert next(p for p in gn6i["prices"] if p["region"] == "cn-zhangjiakou")["on_demand_cny_per_hour"] == 10.46
    assert content["usd_per_cny"] == data["usd_per_cny"]  # the stated rate is kept, never fetched
    assert not any("->" in n for n in notes)  # recorded specs agree with the doc-derived data
