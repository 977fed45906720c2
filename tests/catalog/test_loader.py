"""Loader behaviour on tiny catalogs: query API, and rejection of bad data files with file- and field-named errors."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from infragen.catalog import (
    Accelerator,
    CpuModel,
    InstanceType,
    RegionPrice,
    catalog_from_records,
    load_catalog_dir,
)
from infragen.errors import DataError, UnknownNameError

GPU = Accelerator(id="l4-24gb", display_name="NVIDIA L4", vendor="nvidia", architecture="Ada", memory_gib=24,
                  interconnect="pcie", source="test", aliases=["L4"])
CPU = CpuModel(id="graviton4", display_name="AWS Graviton4", vendor="aws", arch="arm64",
               microarchitecture="Neoverse V2", source="test")


def _price(region: str, usd: float) -> RegionPrice:
    return RegionPrice(region=region, on_demand_usd_per_hour=usd, source="test", as_of="2026-01-01")


def _inst(**kw: Any) -> InstanceType:
    base: dict[str, Any] = {"id": "g6.xlarge", "cloud": "aws", "family": "g6", "gpu": "l4-24gb", "gpu_count": 1,
                            "gpu_memory_gib": 22.35, "vcpus": 4, "memory_gib": 16, "source": "test",
                            "prices": [_price("us-east-1", 0.8048)]}
    base.update(kw)
    return InstanceType(**base)


def test_tiny_catalog_queries() -> None:
    cpu_box = _inst(id="c8g.2xlarge", family="c8g", gpu=None, gpu_count=0, gpu_memory_gib=None, cpu="graviton4",
                    cpu_arch="arm64", prices=[_price("us-west-2", 0.3)])
    cat = catalog_from_records([GPU], [CPU], [_inst(), cpu_box])
    assert cat.accelerator("l4").id == "l4-24gb"
    assert cat.instance("g6.xlarge").gpu == "l4-24gb"
    assert [i.id for i in cat.instances_for("aws", "us-west-2")] == ["c8g.2xlarge"]
    assert len(cat.instances_for("aws")) == 2 and cat.instances_for("alicloud") == ()
    assert cat.regions("aws") == ["us-east-1", "us-west-2"]
    assert cat.cpu("graviton4").arch == "arm64"


def test_unknown_instance_type_suggests_close_names() -> None:
    cat = catalog_from_records([GPU], [CPU], [_inst()])
    with pytest.raises(UnknownNameError) as err:
        cat.instance("g6.xlarg")
    assert "did you mean 'g6.xlarge'" in err.value.message
    with pytest.raises(UnknownNameError):
        cat.instances_for("gcp")


def test_records_are_checked_across_each_other() -> None:
    with pytest.raises(DataError, match="unknown accelerator 'h100-sxm-80gb'"):
        catalog_from_records([GPU], [CPU], [_inst(gpu="h100-sxm-80gb")])
    with pytest.raises(DataError, match="gpu and gpu_count disagree"):
        catalog_from_records([GPU], [CPU], [_inst(gpu_count=0)])
    with pytest.raises(DataError, match=r"duplicate instance type id 'g6\.xlarge'"):
        catalog_from_records([GPU], [CPU], [_inst(), _inst()])
    with pytest.raises(DataError, match="unknown CPU model 'epyc-9999'"):
        catalog_from_records([GPU], [CPU], [_inst(cpu="epyc-9999")])
    with pytest.raises(DataError, match="rdma='efa' but efa_interfaces=0"):
        catalog_from_records([GPU], [CPU], [_inst(rdma="efa")])
    with pytest.raises(DataError, match="32 EFA interfaces on 1 network cards"):
        catalog_from_records([GPU], [CPU], [_inst(rdma="efa", efa_interfaces=32)])
    with pytest.raises(DataError, match="a region appears twice"):
        catalog_from_records([GPU], [CPU], [_inst(prices=[_price("us-east-1", 1), _price("us-east-1", 2)])])


# ------------------------------------------------------------------------------------------ files on disk

FILES: dict[str, dict[str, Any]] = {
    "accelerators.yaml": {"schema_version": 1, "source": "t", "as_of": "2026-01-01",
                          "accelerators": [GPU.model_dump(exclude_defaults=True)]},
    "cpus.yaml": {"schema_version": 1, "source": "t", "as_of": "2026-01-01",
                  "cpus": [CPU.model_dump(exclude_defaults=True)]},
    "aws.yaml": {"schema_version": 1, "source": "t", "as_of": "2026-01-01", "cloud": "aws",
                 "instances": [_inst().model_dump(exclude_defaults=True)]},
    "alicloud.yaml": {"schema_version": 1, "source": "t", "as_of": "2026-01-01", "cloud": "alicloud",
                      "usd_per_cny": 0.14, "fx_source": "test rate",
                      "instances": [{"id": "ecs.gn7i-c8g1.2xlarge", "cloud": "alicloud", "family": "gn7i",
                                     "source": "t", "prices": [{"region": "cn-beijing",
                                                                "on_demand_cny_per_hour": 10.0,
                                                                "source": "t", "as_of": "2024-10-10"}]}]},
}


def _write(tmp_path: Path, files: dict[str, dict[str, Any]]) -> Path:
    for name, data in files.items():
        (tmp_path / name).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return tmp_path


def test_good_directory_loads_and_converts_cny(tmp_path: Path) -> None:
    cat = load_catalog_dir(_write(tmp_path, FILES))
    price = cat.instance("ecs.gn7i-c8g1.2xlarge").prices[0]
    assert price.on_demand_usd_per_hour == pytest.approx(1.4)
    assert cat.usd_per_cny == 0.14 and cat.fx_source == "test rate"


def _broken(tmp_path: Path, name: str, mutate: Any) -> Path:
    files = copy.deepcopy(FILES)
    mutate(files[name])
    return _write(tmp_path, files)


def test_negative_price_names_file_and_field(tmp_path: Path) -> None:
    def mutate(d: dict[str, Any]) -> None:
        d["instances"][0]["prices"][0]["on_demand_usd_per_hour"] = -1

    with pytest.raises(DataError) as err:
        load_catalog_dir(_broken(tmp_path, "aws.yaml", mutate))
    assert "aws.yaml" in err.value.message
    assert "instances[0].prices[0].on_demand_usd_per_hour" in err.value.message
    assert "greater than 0" in err.value.message


def test_unknown_field_suggests_the_right_one(tmp_path: Path) -> None:
    def mutate(d: dict[str, Any]) -> None:
        d["accelerators"][0]["memory_gb"] = 24

    with pytest.raises(DataError) as err:
        load_catalog_dir(_broken(tmp_path, "accelerators.yaml", mutate))
    assert "accelerators.yaml" in err.value.message and "accelerators[0].memory_gb: unknown field" in err.value.message


def test_missing_source_is_rejected(tmp_path: Path) -> None:
    def mutate(d: dict[str, Any]) -> None:
        del d["cpus"][0]["source"]

    with pytest.raises(DataError, match=r"cpus\.yaml: cpus\[0\]\.source: .*(required|missing)"):
        load_catalog_dir(_broken(tmp_path, "cpus.yaml", mutate))


def test_alibaba_needs_the_rate(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="usd_per_cny and fx_source are required"):
        load_catalog_dir(_broken(tmp_path, "alicloud.yaml", lambda d: d.pop("usd_per_cny")))


def test_alibaba_written_usd_must_agree_with_the_rate(tmp_path: Path) -> None:
    def wrong_usd(d: dict[str, Any]) -> None:
        d["instances"][0]["prices"][0]["on_demand_usd_per_hour"] = 3.0

    with pytest.raises(DataError, match=r"disagrees with 10.0 CNY x 0.14"):
        load_catalog_dir(_broken(tmp_path, "alicloud.yaml", wrong_usd))


def test_instance_in_the_wrong_cloud_file(tmp_path: Path) -> None:
    def mutate(d: dict[str, Any]) -> None:
        d["instances"][0]["cloud"] = "alicloud"

    with pytest.raises(DataError, match=r"instances of another cloud in the aws file: g6\.xlarge"):
        load_catalog_dir(_broken(tmp_path, "aws.yaml", mutate))


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"accelerators\.yaml: file not found"):
        load_catalog_dir(tmp_path)
    _write(tmp_path, FILES)
    (tmp_path / "cpus.yaml").write_text("cpus: [unclosed\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"cpus\.yaml: malformed YAML"):
        load_catalog_dir(tmp_path)


def test_wrong_schema_version(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="schema_version"):
        load_catalog_dir(_broken(tmp_path, "aws.yaml", lambda d: d.update(schema_version=2)))


def test_importing_the_package_loads_nothing() -> None:
    import subprocess
    import sys

    code = "import infragen.catalog as c; print(c.loader.load_catalog.cache_info().currsize)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0"
