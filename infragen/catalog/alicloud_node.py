"""Alibaba node setup facts (data in alicloud_node.yaml): driver per engine release, in-VPC mirrors, eRDMA NCCL.

Reads data only; the planner decides what a plan gets (`select_*` below are lookups, not policy).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from infragen.catalog.parsed import data_dir


@dataclass(frozen=True)
class GpuDriverRow:
    """How the first boot installs the driver for one CUDA major.minor (Alibaba's script, or Ubuntu's archive)."""

    cuda: str
    """CUDA major.minor the row serves (runtimes of the same major with a lower or equal minor run on it)."""
    driver_version: str
    """NVIDIA driver, e.g. `550.127.08` (ubuntu-archive: the build seen in the archive; apt takes the current one)."""
    source: str
    """Where the row was read."""
    method: str = "alibaba-auto-install"
    """`alibaba-auto-install` (Alibaba's script) or `ubuntu-archive` (Ubuntu's packages of the server branch)."""
    cuda_version: str | None = None
    """alibaba-auto-install: CUDA toolkit the script installs alongside, e.g. `12.4.1`."""
    cudnn_version: str | None = None
    """alibaba-auto-install: cuDNN the script installs alongside."""
    ubuntu_drivers_id: str | None = None
    """ubuntu-archive: the driver `ubuntu-drivers install --gpgpu` takes (`nvidia:580-server`)."""
    packages: tuple[str, ...] = ()
    """ubuntu-archive: packages installed after it (the utilities, nvidia-smi)."""
    fabric_manager_package: str | None = None
    """ubuntu-archive: Fabric Manager of the branch, installed on nodes with NVSwitch."""


@dataclass(frozen=True)
class AlicloudNodeData:
    """The parsed data file."""

    engine_cuda: dict[str, dict[str, str]]
    """engine -> version -> CUDA major.minor of its PyPI wheels."""
    gpu_drivers: tuple[GpuDriverRow, ...]
    """Driver rows, any order."""
    installer_script: str
    """Auto-install script name (`auto_install_v4.0.sh`)."""
    installer_path: str
    """Its path under the region's `source-address`."""
    erdma_installer_url: str
    """Alibaba's eRDMA stack installer (run with `--egs`), used when the driver does not come from the script."""
    pip_index_url: str
    """In-VPC PyPI mirror."""
    pip_trusted_host: str
    """Host pip must trust (the mirror is plain HTTP)."""
    erdma_nccl_env: dict[str, str]
    """NCCL variables for multi-node replicas over eRDMA."""
    nat_eip_bandwidth_mbit_s: int
    """Bandwidth of the one NAT EIP every node downloads through."""
    erdma_mtu: int
    """MTU eRDMA interfaces need for NCCL's LL128 without jumbo frames (1400)."""
    erdma_jumbo_mtu: int
    """... and with jumbo frames (8500)."""
    system_image_name_regex: dict[str, str]
    """cpu arch -> name regex of the stock system image (newest match) nodes boot without infragen:imageId."""
    real_name_regions: frozenset[str]
    """Regions (Chinese mainland) where ECS needs the account's real-name verification."""
    sales_gated_families: dict[str, str]
    """family -> how to get it (contact sales, ticket): families ECS sells only on request."""
    source_builds: str
    """Where an engine built on the node comes from: `pypi-sdist` (its PyPI sdist through the mirror) or `git`."""


@cache
def load_alicloud_node() -> AlicloudNodeData:
    """The data file, parsed once."""
    text = (data_dir() / "alicloud_node.yaml").read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return AlicloudNodeData(
        engine_cuda={engine: {str(v): str(row["cuda"]) for v, row in versions.items()}
                     for engine, versions in data["engine_cuda"].items()},
        gpu_drivers=tuple(_driver_row(r) for r in data["gpu_drivers"]),
        installer_script=str(data["installer"]["script"]),
        installer_path=str(data["installer"]["path"]),
        erdma_installer_url=str(data["erdma_installer"]["url"]),
        pip_index_url=str(data["pip_index_url"]),
        pip_trusted_host=str(data["pip_trusted_host"]),
        erdma_nccl_env={str(k): str(v) for k, v in data["erdma_nccl_env"].items()},
        nat_eip_bandwidth_mbit_s=int(data["nat_eip"]["bandwidth_mbit_s"]),
        erdma_mtu=int(data["erdma_mtu"]["default"]),
        erdma_jumbo_mtu=int(data["erdma_mtu"]["jumbo"]),
        system_image_name_regex={str(k): str(v) for k, v in data["system_image_name_regex"].items()},
        real_name_regions=frozenset(str(r) for r in data["real_name_regions"]),
        sales_gated_families={str(k): str(v["how"]) for k, v in data["sales_gated_families"].items()},
        source_builds=str(data["source_builds"]),
    )


def _driver_row(r: dict[str, Any]) -> GpuDriverRow:
    def opt(key: str) -> str | None:
        return None if r.get(key) is None else str(r[key])

    row = GpuDriverRow(cuda=str(r["cuda"]), driver_version=str(r["driver_version"]), source=str(r["source"]),
                       method=str(r["method"]), cuda_version=opt("cuda_version"), cudnn_version=opt("cudnn_version"),
                       ubuntu_drivers_id=opt("ubuntu_drivers_id"),
                       packages=tuple(str(p) for p in r.get("packages", ())),
                       fabric_manager_package=opt("fabric_manager_package"))
    needs = {"alibaba-auto-install": ("cuda_version", "cudnn_version"), "ubuntu-archive": ("ubuntu_drivers_id",)}
    if row.method not in needs or any(getattr(row, key) is None for key in needs[row.method]):
        raise ValueError(f"alicloud_node.yaml: driver row for CUDA {row.cuda}: method {row.method!r} needs "
                         f"{needs.get(row.method, sorted(needs))}")
    return row


def select_gpu_driver(data: AlicloudNodeData, engine: str, version: str) -> GpuDriverRow | None:
    """The driver row for an engine release: same CUDA major, lowest minor >= the wheels'; None when unknown."""
    cuda = data.engine_cuda.get(engine, {}).get(version)
    if cuda is None:
        return None
    major, minor = (int(p) for p in cuda.split("."))
    fits = [r for r in data.gpu_drivers
            if int(r.cuda.split(".")[0]) == major and int(r.cuda.split(".")[1]) >= minor]
    return min(fits, key=lambda r: int(r.cuda.split(".")[1]), default=None)
