"""What a node needs besides the engine (driver install, mirrors, engine source, download bandwidth), as a plan part.

Pure: reads the node-setup data (catalog) and the candidate; no cloud call. Alibaba rows only today: AWS images
(the Deep Learning AMIs) carry the driver and reach PyPI, Hugging Face and llama.cpp's git host directly.
"""

from __future__ import annotations

import re

from infragen.catalog.alicloud_node import AlicloudNodeData, load_alicloud_node, select_gpu_driver
from infragen.catalog.engines import EngineRelease, pinned_release
from infragen.errors import DataError
from infragen.plan import BootstrapPlan, GpuDriverPlan, SourceArchivePlan

#: Weight sources fetched over the internet (through the NAT gateway on Alibaba), not from an in-region store.
INTERNET_SOURCES = frozenset({"huggingface", "modelscope"})


def select_bootstrap(*, cloud: str, engine: str, engine_version: str, gpu_count: int, erdma: bool, nodes: int,
                     weights_source: str, hf_endpoint: str | None, family: str | None = None,
                     data: AlicloudNodeData | None = None,
                     release: EngineRelease | None = None) -> tuple[BootstrapPlan | None, list[str]]:
    """The plan's bootstrap part (None when the defaults serve) and the warnings that go with it."""
    warnings: list[str] = []
    if cloud != "alicloud":
        return (BootstrapPlan(hf_endpoint=hf_endpoint) if hf_endpoint else None), warnings
    node = data or load_alicloud_node()
    gated = node.sales_gated_families.get(family or "")
    if gated:
        warnings.append(f"Alibaba sells the {family} family only on request ({gated}): make sure the account has it "
                        "before deploying (`infragen preflight` shows whether its zones sell it to you)")
    driver = None
    if gpu_count > 0:
        row = select_gpu_driver(node, engine, engine_version)
        if row is None:
            warnings.append(f"no driver install is known for {engine} {engine_version}'s CUDA "
                            "(infragen/catalog/data/alicloud_node.yaml); the nodes need an image with the NVIDIA "
                            "driver (infragen:imageId)")
        elif row.method == "ubuntu-archive":
            driver = GpuDriverPlan(driver_version=row.driver_version, method="ubuntu-archive",
                                   ubuntu_drivers_id=row.ubuntu_drivers_id, packages=list(row.packages),
                                   fabric_manager_package=row.fabric_manager_package, erdma=erdma,
                                   erdma_installer_url=node.erdma_installer_url if erdma else None)
        else:
            driver = GpuDriverPlan(driver_version=row.driver_version, cuda_version=row.cuda_version,
                                   cudnn_version=row.cudnn_version, installer=node.installer_script,
                                   installer_path=node.installer_path, erdma=erdma)
    download = None
    if weights_source in INTERNET_SOURCES:
        # Every node downloads at first boot through the one NAT EIP: they share its bandwidth.
        download = round(node.nat_eip_bandwidth_mbit_s / max(1, nodes), 1)
    source = None
    if node.source_builds == "pypi-sdist":
        source = select_engine_source(release or pinned_release(engine), engine_version, node.pip_index_url)
    return BootstrapPlan(gpu_driver=driver, pip_index_url=node.pip_index_url, pip_trusted_host=node.pip_trusted_host,
                         hf_endpoint=hf_endpoint, download_mbit_s=download,
                         erdma_mtus=[node.erdma_mtu, node.erdma_jumbo_mtu] if erdma else [],
                         engine_source=source), warnings


def select_engine_source(release: EngineRelease, engine_version: str, index_url: str) -> SourceArchivePlan | None:
    """The pinned release's source as its PyPI sdist from `index_url`; None for an engine installed from wheels
    (no `sdist` in engines.yaml: vLLM)."""
    archive = release.sdist
    if archive is None:
        return None
    tag = re.fullmatch(r"b([0-9]+)", engine_version)
    if release.version != engine_version or not release.commit or tag is None:
        raise DataError(f"engines.yaml: the {release.engine} sdist pin needs the release tag b<number> and its commit "
                        f"(pinned {release.version!r}, commit {release.commit!r}; planned {engine_version!r})")
    return SourceArchivePlan(index_url=index_url, package=archive.package, version=archive.version,
                             file=archive.file, sha256=archive.sha256, tree=archive.tree, commit=release.commit,
                             build_number=int(tag.group(1)))


def download_warning(weights_gib: float, download_mbit_s: float | None, nodes: int) -> str | None:
    """A warning when the shared internet download alone takes an hour or more."""
    if download_mbit_s is None:
        return None
    hours = weights_gib * 1.0737 * 8e3 / download_mbit_s / 3600
    if hours < 1:
        return None
    return (f"{weights_gib:.0f} GiB of weights reach each of {nodes} node(s) at {download_mbit_s:g} Mbit/s (one "
            f"shared NAT EIP): about {hours:.1f} h before serving; stage them in OSS (weights: oss://bucket/prefix, "
            "read over the internal network) to load in minutes")


def erdma_nccl_env(data: AlicloudNodeData | None = None) -> dict[str, str]:
    """NCCL variables for multi-node replicas over eRDMA (GPUDirect RDMA left on)."""
    return dict((data or load_alicloud_node()).erdma_nccl_env)
