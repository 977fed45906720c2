"""Builds the `Hardware` one replica runs on: from a catalog instance, a bare GPU count, or an on-prem YAML file.

Reads only the catalog it is given (and, for --hardware, the user's file); decides nothing about fit or speed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infragen.catalog.records import Accelerator, CpuModel, InstanceType
from infragen.errors import InputError
from infragen.sizing.types import Hardware

if TYPE_CHECKING:
    from infragen.catalog import Catalog


def hardware_from_instance(instance: InstanceType, catalog: Catalog) -> Hardware:
    """One node of a catalog instance type (its GPUs as the cloud exposes them, its CPU if sourced)."""
    acc = catalog.accelerator(instance.gpu) if instance.gpu else None
    cpu = catalog.cpus.get(instance.cpu) if instance.cpu else None
    return Hardware(
        name=instance.id,
        accelerator=acc,
        gpu_count=instance.gpu_count if acc else 0,
        # the driver's total (what vLLM sizes its cache from) beats the cloud API's listing where both exist
        gpu_memory_gib=acc.usable_memory_gib if acc and acc.driver_memory_mib else instance.gpu_memory_gib,
        cpu=cpu,
        vcpus=instance.vcpus,
        memory_gib=instance.memory_gib,
        network_gbps=instance.network_gbps,
        rdma=instance.rdma,
        physical_cores=getattr(instance, "physical_cores", None),
        cpu_sockets=getattr(instance, "cpu_sockets", None) or 1,
    )


def hardware_from_gpu(accelerator: Accelerator, count: int) -> Hardware:
    """`count` GPUs of one model in one node, memory as the driver reports it (else the label; no CPU figures)."""
    if count < 1:
        raise InputError(f"--gpus must be at least 1 (got {count})")
    return Hardware(
        name=f"{count} x {accelerator.id}",
        accelerator=accelerator,
        gpu_count=count,
        gpu_memory_gib=None,
        cpu=None,
        vcpus=None,
        memory_gib=None,
        network_gbps=None,
        rdma="none",
    )


class MeasuredFigures(BaseModel):
    """Figures measured on the machine itself (`infragen hardware probe` writes them); they win over datasheets."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, allow_inf_nan=False)

    memory_bandwidth_gb_per_s: float = Field(gt=0, le=100_000)
    """DRAM read bandwidth all cores reach together, GB/s (10^9 bytes/s) - a measurement, not the datasheet peak.
    The llama.cpp model takes `cpu.measured_bandwidth_fraction` of it (performance.yaml), not the 0.65 it applies
    to a datasheet peak."""
    copy_bandwidth_gb_per_s: float | None = Field(default=None, gt=0, le=100_000)
    """memcpy rate counting read + write bytes, GB/s (for the record; the model does not use it)."""
    wall_clock_read_bandwidth_gb_per_s: float | None = Field(default=None, gt=0, le=100_000)
    """The read rate by wall clock; far below the CPU-clock figure means the machine was busy (for the record)."""
    processes: int | None = Field(default=None, ge=1, le=100_000)
    """Processes that read at once (one per physical core)."""
    buffer_mib: int | None = Field(default=None, ge=1, le=10**9)
    """Bytes streamed in all, MiB."""
    method: str = Field(default="", max_length=1000)
    """How it was measured."""
    as_of: str = Field(default="", max_length=40)
    """Date of the measurement."""


class HardwareFile(BaseModel):
    """An on-prem machine described in YAML (`--hardware FILE.yaml`), same fields as a catalog entry."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, allow_inf_nan=False)

    name: str = "on-prem"
    """Description shown in the output."""
    gpu: str | Accelerator | None = None
    """A catalog GPU name/alias, or a full accelerator record (id, display_name, memory_gib, ...); None = CPU only."""
    gpu_count: int = Field(default=0, ge=0, le=1024)
    """GPUs in the machine."""
    gpu_memory_gib: float | None = Field(default=None, gt=0, le=100_000)
    """Usable memory per GPU, GiB (None = the driver-reported total where sourced, else the label)."""
    cpu: str | CpuModel | None = None
    """A catalog CPU id, or a full CPU record (simd, fp32_flops_per_cycle_per_core, memory_bandwidth_gb_per_s...)."""
    vcpus: int | None = Field(default=None, gt=0, le=100_000)
    """Logical CPUs."""
    physical_cores: int | None = Field(default=None, gt=0, le=100_000)
    """Physical cores (llama.cpp threads); None = vcpus / threads_per_core."""
    cpu_sockets: int = Field(default=1, ge=1, le=64)
    """Sockets (bandwidth scales with them)."""
    memory_gib: float | None = Field(default=None, gt=0, le=1_000_000)
    """System RAM, GiB."""
    network_gbps: float | None = Field(default=None, gt=0, le=100_000)
    """Network bandwidth, Gbit/s."""
    rdma: Literal["none", "efa", "erdma"] = "none"
    """RDMA fabric."""
    measured: MeasuredFigures | None = None
    """Measured figures (`infragen hardware probe`); None = datasheet figures only."""


def _pydantic_lines(exc: ValidationError, where: str) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        lines.append(f"{where}: {loc}: {err['msg']}")
    return "\n".join(lines)


def load_hardware_file(path: Path, catalog: Catalog) -> Hardware:
    """Read and validate an on-prem hardware YAML; InputError (exit 2) on any problem."""
    from infragen.safe_load import load_yaml_file

    raw = load_yaml_file(Path(path), what="hardware file")  # bounded: size, values, aliases, depth, unique keys
    return hardware_from_document(raw, catalog, where=str(path))


def hardware_from_document(raw: object, catalog: Catalog, *, where: str) -> Hardware:
    """Validate a parsed hardware document; InputError naming `where` and the field on any problem."""
    path = where
    if not isinstance(raw, dict):
        raise InputError(f"{path}: a hardware file is a mapping (name, gpu, gpu_count, cpu, vcpus, memory_gib...)")
    try:
        spec = HardwareFile.model_validate(raw)
    except ValidationError as exc:
        raise InputError(_pydantic_lines(exc, str(path))) from None
    acc = catalog.accelerator(spec.gpu) if isinstance(spec.gpu, str) else spec.gpu
    cpu = catalog.cpu(spec.cpu) if isinstance(spec.cpu, str) else spec.cpu
    if acc is not None and spec.gpu_count == 0:
        raise InputError(f"{path}: gpu_count: a GPU is named, so give how many (>= 1)")
    if acc is None and spec.gpu_count:
        raise InputError(f"{path}: gpu: gpu_count is {spec.gpu_count} but no GPU is named")
    return Hardware(
        name=spec.name,
        accelerator=acc,
        gpu_count=spec.gpu_count,
        gpu_memory_gib=spec.gpu_memory_gib,
        cpu=cpu,
        vcpus=spec.vcpus,
        memory_gib=spec.memory_gib,
        network_gbps=spec.network_gbps,
        rdma=spec.rdma,
        physical_cores=spec.physical_cores,
        cpu_sockets=spec.cpu_sockets,
        measured_memory_bandwidth_gb_per_s=spec.measured.memory_bandwidth_gb_per_s if spec.measured else None,
    )
