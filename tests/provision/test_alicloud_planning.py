"""What the planner puts in Alibaba plans for the nodes: the driver row for the engine's CUDA, the in-VPC mirror,
ModelScope weights, the shared NAT EIP in the download wait, eRDMA NCCL variables. Data read from alicloud_node.yaml;
tiny hand-made data where the rule itself is tested."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from infragen.catalog.alicloud_node import GpuDriverRow, load_alicloud_node, select_gpu_driver
from infragen.catalog.engines import pinned_release
from infragen.errors import DataError
from infragen.sizing import plan_file
from infragen.sizing.bootstrap import download_warning, select_bootstrap, select_engine_source
from infragen.sizing.resources import health_grace_s
from tests.spec.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
ALI_GPU_EXAMPLES = ["ali-chat-7b", "ali-70b", "ali-multinode"]


def _row(cuda: str) -> GpuDriverRow:
    return GpuDriverRow(cuda=cuda, driver_version=f"d{cuda}", cuda_version=cuda + ".0", cudnn_version="9", source="t")


def test_driver_row_follows_cuda_minor_version_compatibility() -> None:
    data = replace(load_alicloud_node(), gpu_drivers=(_row("12.8"), _row("12.4"), _row("11.8")),
                   engine_cuda={"vllm": {"a": "12.4", "b": "12.6", "c": "12.9", "d": "13.0"}})
    assert select_gpu_driver(data, "vllm", "a").driver_version == "d12.4"  # type: ignore[union-attr]
    assert select_gpu_driver(data, "vllm", "b").driver_version == "d12.8"  # type: ignore[union-attr]
    assert select_gpu_driver(data, "vllm", "c") is None  # no 12.x row new enough
    assert select_gpu_driver(data, "vllm", "d") is None  # another major
    assert select_gpu_driver(data, "vllm", "unknown") is None


def test_the_pinned_vllm_gets_a_cuda_13_driver_from_the_ubuntu_archive() -> None:
    """vLLM 0.34.0's torch 2.14.0 wheel needs CUDA 13.0 (cuda-toolkit 13.0.3): an R580 driver, which no recorded
    Alibaba auto-install triple offers, comes from Ubuntu's server branch packages; eRDMA from Alibaba's installer."""
    boot, warnings = select_bootstrap(cloud="alicloud", engine="vllm", engine_version="0.34.0", gpu_count=8,
                                      erdma=True, nodes=2, weights_source="modelscope", hf_endpoint=None)
    assert not warnings and boot is not None and (d := boot.gpu_driver) is not None
    assert d.method == "ubuntu-archive" and d.driver_version.startswith("580.")
    assert d.ubuntu_drivers_id == "nvidia:580-server" and d.packages == ["nvidia-utils-580-server"]
    assert d.fabric_manager_package == "nvidia-fabricmanager-580"
    assert d.erdma and d.erdma_installer_url == "http://mirrors.cloud.aliyuncs.com/erdma/env_setup.sh"
    assert d.cuda_version is None and d.installer is None  # nothing of Alibaba's script
    single, _ = select_bootstrap(cloud="alicloud", engine="vllm", engine_version="0.34.0", gpu_count=1,
                                 erdma=False, nodes=1, weights_source="modelscope", hf_endpoint=None)
    assert single is not None and single.gpu_driver is not None and single.gpu_driver.erdma_installer_url is None
    # The older pin keeps Alibaba's script.
    old, _ = select_bootstrap(cloud="alicloud", engine="vllm", engine_version="0.7.3", gpu_count=1,
                              erdma=False, nodes=1, weights_source="modelscope", hf_endpoint=None)
    assert old is not None and old.gpu_driver is not None and old.gpu_driver.method == "alibaba-auto-install"


def test_a_driver_plan_missing_what_its_method_runs_is_refused() -> None:
    from pydantic import ValidationError

    from infragen.plan import GpuDriverPlan

    with pytest.raises(ValidationError, match="needs cuda_version, cudnn_version, installer, installer_path"):
        GpuDriverPlan(driver_version="550.127.08")
    with pytest.raises(ValidationError, match="needs erdma_installer_url"):
        GpuDriverPlan(driver_version="580.159.03", method="ubuntu-archive", ubuntu_drivers_id="nvidia:580-server",
                      erdma=True)
    with pytest.raises(ValidationError):
        GpuDriverPlan(driver_version="580.1", method="ubuntu-archive", ubuntu_drivers_id="nvidia:580; reboot")


def test_sales_gated_families_are_flagged_in_the_plan() -> None:
    """gn8v is sold on request only (Alibaba's GPU instance-family page): the plan says so; gn7i carries no flag."""
    _, warnings = select_bootstrap(cloud="alicloud", engine="vllm", engine_version="0.34.0", gpu_count=8,
                                   erdma=True, nodes=2, weights_source="modelscope", hf_endpoint=None,
                                   family="gn8v")
    assert any("gn8v family only on request" in w and "contact Alibaba Cloud sales" in w for w in warnings)
    _, plain = select_bootstrap(cloud="alicloud", engine="vllm", engine_version="0.34.0", gpu_count=1, erdma=False,
                                nodes=1, weights_source="modelscope", hf_endpoint=None, family="gn7i")
    assert not any("on request" in w for w in plain)
    plan = plan_file(ROOT / "examples" / "ali-multinode.yaml")
    family = plan.deployment.instance_type.split(".")[1].split("-")[0]
    assert family in load_alicloud_node().sales_gated_families
    assert any(f"{family} family only on request" in w for w in plan.warnings)


def test_every_pinned_engine_release_has_its_cuda_recorded() -> None:
    from infragen.catalog.engines import VLLM_VERSION

    assert VLLM_VERSION in load_alicloud_node().engine_cuda["vllm"], "add the new vLLM's CUDA to alicloud_node.yaml"


def test_an_engine_without_a_driver_row_gets_a_warning_and_no_install_step() -> None:
    data = replace(load_alicloud_node(), engine_cuda={"vllm": {"9.9": "14.0"}})  # a CUDA no row serves
    boot, warnings = select_bootstrap(cloud="alicloud", engine="vllm", engine_version="9.9", gpu_count=8,
                                      erdma=True, nodes=2, weights_source="modelscope", hf_endpoint=None, data=data)
    assert boot is not None and boot.gpu_driver is None and boot.pip_index_url
    assert len(warnings) == 1 and "infragen:imageId" in warnings[0]
    aws, _ = select_bootstrap(cloud="aws", engine="vllm", engine_version="0.7.3", gpu_count=8, erdma=False,
                              nodes=2, weights_source="huggingface", hf_endpoint=None)
    assert aws is None, "AWS plans keep no bootstrap part (and their digests)"


def test_llama_cpp_on_alibaba_comes_from_the_pinned_sdist_through_the_mirror() -> None:
    """Issue 17: the cloud's data says where built engines come from (alicloud_node.yaml source_builds), the
    engine's data what is pinned (engines.yaml sdist): the plan carries both, AWS keeps the git clone."""
    release = pinned_release("llama.cpp")
    assert release.sdist is not None and release.commit
    boot, _ = select_bootstrap(cloud="alicloud", engine="llama.cpp", engine_version=release.version, gpu_count=0,
                               erdma=False, nodes=1, weights_source="huggingface", hf_endpoint=None)
    assert boot is not None and boot.engine_source is not None
    source = boot.engine_source
    assert source.index_url == boot.pip_index_url == load_alicloud_node().pip_index_url
    assert (source.package, source.version, source.file, source.sha256, source.tree) == (
        release.sdist.package, release.sdist.version, release.sdist.file, release.sdist.sha256, release.sdist.tree)
    assert source.commit == release.commit and f"b{source.build_number}" == release.version
    vllm, _ = select_bootstrap(cloud="alicloud", engine="vllm", engine_version=pinned_release("vllm").version,
                               gpu_count=1, erdma=False, nodes=1, weights_source="modelscope", hf_endpoint=None)
    assert vllm is not None and vllm.engine_source is None, "vLLM installs wheels"
    # The cloud's data decides, not the cloud's name: a node data file saying git keeps the clone.
    git, _ = select_bootstrap(cloud="alicloud", engine="llama.cpp", engine_version=release.version, gpu_count=0,
                              erdma=False, nodes=1, weights_source="huggingface", hf_endpoint=None,
                              data=replace(load_alicloud_node(), source_builds="git"))
    assert git is not None and git.engine_source is None
    aws, _ = select_bootstrap(cloud="aws", engine="llama.cpp", engine_version=release.version, gpu_count=0,
                              erdma=False, nodes=1, weights_source="huggingface", hf_endpoint=None)
    assert aws is None
    plan = plan_file(ROOT / "examples" / "ali-cpu-edge.yaml")
    assert plan.bootstrap is not None and plan.bootstrap.engine_source == source


def test_an_sdist_pin_without_its_release_tag_and_commit_is_a_data_error() -> None:
    release = pinned_release("llama.cpp")
    with pytest.raises(DataError, match="b<number>"):
        select_engine_source(replace(release, commit=None), release.version, "http://mirror.example/simple/")
    with pytest.raises(DataError, match="planned"):
        select_engine_source(release, "b1", "http://mirror.example/simple/")


@pytest.mark.parametrize("name", ALI_GPU_EXAMPLES)
def test_mainland_examples_install_the_driver_and_download_from_modelscope(name: str) -> None:
    plan = plan_file(ROOT / "examples" / f"{name}.yaml")
    boot = plan.bootstrap
    assert boot is not None
    row = select_gpu_driver(load_alicloud_node(), "vllm", plan.engine.version)
    assert row is not None, f"no driver row for vLLM {plan.engine.version}: GPU examples would need infragen:imageId"
    assert boot.gpu_driver is not None and boot.gpu_driver.driver_version == row.driver_version
    assert boot.gpu_driver.method == row.method and not any("infragen:imageId" in w for w in plan.warnings)
    assert boot.gpu_driver.erdma == (plan.network.rdma == "erdma")
    assert boot.pip_index_url == "http://mirrors.cloud.aliyuncs.com/pypi/simple/"
    assert plan.model.weights_source == "modelscope" and "://" not in plan.model.weights_uri
    assert plan.engine.argv[2].startswith(plan.storage.mount_path + "/"), "vLLM serves the downloaded directory"
    # All nodes download through one NAT EIP: each gets its share, and the load wait covers that download.
    assert boot.download_mbit_s == round(200 / plan.deployment.nodes, 1)
    download_s = plan.model.weights_gib * 1.0737 * 8e3 / boot.download_mbit_s
    assert plan.network.health_check_grace_s >= download_s
    if plan.network.rdma == "erdma":
        env = plan.engine.env
        assert env["NCCL_IB_HCA"] == "erdma" and env["NCCL_SOCKET_IFNAME"] == "eth0"
        assert "NCCL_NET_GDR_LEVEL" not in env, "GPUDirect RDMA must not be disabled"


def test_hours_of_shared_download_are_flagged_with_oss_staging() -> None:
    plan = plan_file(ROOT / "examples" / "ali-multinode.yaml")
    (warning,) = [w for w in plan.warnings if "NAT EIP" in w]
    assert "oss://" in warning and " h " in warning
    assert download_warning(10, 200, 1) is None  # 10 GiB at 200 Mbit/s: minutes, no warning
    assert health_grace_s(760, 3200, download_gbps=0.0667) > 7200, "the shared-EIP wait is not capped at 2 h"


def test_modelscope_and_hf_endpoint_in_a_workload(tmp_path: Path) -> None:
    good = tmp_path / "w.yaml"
    good.write_text("model: qwen2-7b\nweights: modelscope://qwen/Qwen2-7B-Instruct\ncloud: alicloud\n"
                    "hf_endpoint: https://hf-mirror.example/\ntraffic: {peak_requests_per_s: 1, prompt_tokens: 256, "
                    "output_tokens: 64}\n")
    plan = plan_file(good)
    assert plan.model.weights_source == "modelscope" and plan.model.weights_uri == "qwen/Qwen2-7B-Instruct"
    assert plan.bootstrap is not None and plan.bootstrap.hf_endpoint == "https://hf-mirror.example/"
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("https://hf-mirror.example/", "https://x.example/$(reboot)"))
    result = run_cli("validate", str(bad))
    assert result.code == 2 and "hf_endpoint" in result.out + result.err
