"""Everything around the GPUs sized to match the model: RAM, vCPUs, storage, network, boot grace period.

Rules are policy (each states its reason); the sizes come from the memory model's figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: System RAM must hold 1.5 x what the node loads (safetensors are staged through page cache while loading).
RAM_FACTOR = 1.5
#: vCPUs per GPU a vLLM worker process needs, plus per engine for the API server and scheduler (policy).
VCPUS_PER_GPU = 2
VCPUS_PER_ENGINE = 2
#: Download space: model files plus 20% (tokenizer, partial downloads) plus 20 GiB of engine cache.
STORAGE_FACTOR = 1.2
STORAGE_EXTRA_GIB = 20
#: gp3 limits (AWS EBS docs): up to 16,000 IOPS and 1,000 MB/s, 0.25 MB/s per provisioned IOPS.
GP3_MAX_IOPS = 16000
GP3_MAX_MB_PER_S = 1000
GP3_BASE_IOPS = 3000
GP3_BASE_MB_PER_S = 125
#: Alibaba ESSD minimum sizes per performance level (ESSD docs): PL1 20 GiB, PL2 461 GiB, PL3 1261 GiB.
ESSD_PL_MIN_GIB = (("PL3", 1261), ("PL2", 461), ("PL1", 20))


@dataclass(frozen=True)
class StorageChoice:
    kind: str
    required_gib: int
    nvme_devices: int
    nvme_total_gib: float
    volume_gib: int
    volume_type: str | None
    volume_iops: int | None
    volume_throughput_mb_per_s: int | None
    performance_level: str | None


def required_ram_gib(loaded_gib_per_node: float) -> float:
    return RAM_FACTOR * loaded_gib_per_node


def required_vcpus(gpus_per_node: int, engines_per_node: int) -> int:
    return VCPUS_PER_GPU * gpus_per_node + VCPUS_PER_ENGINE * engines_per_node


def select_storage(cloud: str, weights_gib: float, local_nvme_count: int, local_nvme_gib: float) -> StorageChoice:
    """Instance-store NVMe when it holds the files, else a volume provisioned to load them fast."""
    need = math.ceil(weights_gib * STORAGE_FACTOR + STORAGE_EXTRA_GIB)
    if local_nvme_count > 0 and local_nvme_gib >= need:
        return StorageChoice("instance-store", need, local_nvme_count, local_nvme_gib, 0, None, None, None, None)
    size = max(need, 50)
    if cloud == "aws":
        # Aim to read the weights in about two minutes, within gp3's limits.
        mb_per_s = min(GP3_MAX_MB_PER_S, max(GP3_BASE_MB_PER_S, math.ceil(weights_gib * 1024 / 120)))
        iops = min(GP3_MAX_IOPS, max(GP3_BASE_IOPS, 4 * mb_per_s), 500 * size)
        return StorageChoice("volume", need, 0, 0, size, "gp3", iops, mb_per_s, None)
    level = next(pl for pl, min_gib in ESSD_PL_MIN_GIB if size >= min_gib)
    return StorageChoice("volume", need, 0, 0, size, "cloud_essd", None, None, level)


#: Boot and engine install before the download starts, seconds (policy allowance; the grace period's base).
INSTALL_ALLOWANCE_S = 600
#: Loading is allowed half the download time again (the grace period's 1.5 x download; policy).
LOAD_FACTOR = 0.5
#: Grace period bounds, seconds: at least 15 minutes, at most two hours unless a slow shared link needs more.
GRACE_MIN_S = 900
GRACE_MAX_S = 7200


@dataclass(frozen=True)
class BootTime:
    """How long a new node takes before it serves: install, download, load (seconds), and the grace period."""

    install_s: int
    download_s: int
    load_s: int
    download_gbps: float
    grace_s: int

    @property
    def total_s(self) -> int:
        """The time a new replica needs before it serves: what autoscaling must plan ahead for."""
        return self.grace_s


def boot_time(weights_gib: float, network_gbps: float | None, *, download_gbps: float | None = None) -> BootTime:
    """Boot + install (10 min) + download at half the baseline bandwidth (capped at 10 Gbit/s) + load.

    `download_gbps`: a slower shared internet link the weights come through (Alibaba's NAT EIP); then the wait is
    as long as that download really takes, with no two-hour cap.
    """
    if download_gbps is not None:
        gbps = min(download_gbps, (network_gbps or 1.0) * 0.5)
    else:
        gbps = min(network_gbps or 1.0, 10.0) * 0.5
    download_s = weights_gib * 8 * 1.0737 / gbps
    grace = max(GRACE_MIN_S, INSTALL_ALLOWANCE_S + download_s * (1 + LOAD_FACTOR))
    if download_gbps is None:
        grace = min(GRACE_MAX_S, grace)
    return BootTime(INSTALL_ALLOWANCE_S, math.ceil(download_s), math.ceil(download_s * LOAD_FACTOR), round(gbps, 3),
                    int(grace))


def health_grace_s(weights_gib: float, network_gbps: float | None, *, download_gbps: float | None = None) -> int:
    """Time a new node gets before health checks count: its boot time (see `boot_time`), floored and capped."""
    return boot_time(weights_gib, network_gbps, download_gbps=download_gbps).grace_s


def pipeline_gbps(hidden_size: int, tokens_per_s: float) -> float:
    """Activations crossing one pipeline boundary (bf16 hidden state per token), Gbit/s."""
    return hidden_size * 2 * tokens_per_s * 8 / 1e9
