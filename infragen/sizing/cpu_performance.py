"""CPU speed model for llama.cpp: prompt processing bound by SIMD FLOPs, generation by DRAM bandwidth and threads.

Pure arithmetic on CpuModel figures; a missing figure raises MissingFigureError (never guessed).
"""

from __future__ import annotations

from dataclasses import dataclass

from infragen.catalog.records import CpuModel
from infragen.errors import MissingFigureError
from infragen.sizing.constants import load_constants
from infragen.units import GIGA


@dataclass(frozen=True)
class CpuSetup:
    """One CPU host as llama.cpp uses it."""

    threads: int
    """Worker threads (one per physical core)."""
    bandwidth_bytes_per_s: float
    """Peak DRAM bandwidth available to this host (its share of the socket), bytes/s."""
    flops_per_s: float
    """FP32 SIMD peak of the threads used, FLOP/s."""
    notes: tuple[str, ...] = ()
    bandwidth_measured: bool = False
    """True when `bandwidth_bytes_per_s` was measured on the machine (hardware probe), not a datasheet peak."""


def cpu_setup(
    cpu: CpuModel,
    physical_cores: int,
    *,
    sockets: int = 1,
    threads: int | None = None,
    measured_bandwidth_gb_per_s: float | None = None,
) -> CpuSetup:
    """Bandwidth and SIMD peak for `physical_cores` cores of `cpu` (threads default to the cores).

    A measured bandwidth (all of the host's cores reading at once) replaces the datasheet peak and its share.
    """
    measured = measured_bandwidth_gb_per_s is not None
    missing = [
        name
        for name, value in (
            ("memory_bandwidth_gb_per_s", measured_bandwidth_gb_per_s or cpu.memory_bandwidth_gb_per_s),
            ("fp32_flops_per_cycle_per_core", cpu.fp32_flops_per_cycle_per_core),
            ("sustained_clock_ghz", cpu.sustained_clock_ghz),
        )
        if value is None
    ]
    if missing:
        raise MissingFigureError(
            f"CPU {cpu.id}: the data lacks {', '.join(missing)}, so llama.cpp speed cannot be estimated",
            fix="add the sourced figure to infragen/catalog/data/cpus.yaml, or pass --hardware with it",
        )
    bandwidth_gb_per_s = float(cpu.memory_bandwidth_gb_per_s or 0.0)
    flops_per_cycle = float(cpu.fp32_flops_per_cycle_per_core or 0.0)
    clock_ghz = float(cpu.sustained_clock_ghz or 0.0)
    notes: list[str] = []
    cores_per_socket = getattr(cpu, "cores_per_socket", None)
    socket_bw = bandwidth_gb_per_s * GIGA
    if cores_per_socket:
        share = min(1.0, physical_cores / (cores_per_socket * sockets)) * sockets
    else:
        share = float(sockets) * load_constants().cpu.default_memory_channels_share
        notes.append(f"cores per socket of {cpu.id} not in the data: assumed the whole socket's bandwidth")
    used = threads if threads is not None else physical_cores
    if measured:
        notes = [f"memory bandwidth measured on the machine: {measured_bandwidth_gb_per_s:g} GB/s "
                 "(hardware probe), not the datasheet peak"]
    return CpuSetup(
        threads=used,
        bandwidth_bytes_per_s=float(measured_bandwidth_gb_per_s) * GIGA if measured else socket_bw * share,
        flops_per_s=used * flops_per_cycle * clock_ghz * GIGA,
        notes=tuple(notes),
        bandwidth_measured=measured,
    )


def effective_bandwidth(s: CpuSetup) -> float:
    """Bandwidth generation sustains: a fraction of the peak, or what the threads can pull, whichever is less.

    A measured bandwidth already includes what the host's cores can pull: only its own fraction applies.
    """
    c = load_constants().cpu
    if s.bandwidth_measured:
        return c.measured_bandwidth_fraction * s.bandwidth_bytes_per_s
    thread_limit = s.threads * c.per_thread_bandwidth_gb_per_s * GIGA
    return min(c.generation_bandwidth_fraction * s.bandwidth_bytes_per_s, thread_limit)


def prompt_s(s: CpuSetup, active_params: float, tokens: int, attn_flops: float = 0.0) -> float:
    """Prompt processing time: 2 x active params x tokens (+ attention) at the sustained SIMD rate."""
    c = load_constants().cpu
    return (2.0 * active_params * tokens + attn_flops) / (s.flops_per_s * c.prompt_flops_fraction)


def generation_step_s(
    s: CpuSetup, weight_bytes: float, active_params: float, kv_bytes_read: float, batch: int
) -> float:
    """One generation step for `batch` slots: weights streamed once, each slot's KV read, compute floor."""
    c = load_constants().cpu
    t_memory = (weight_bytes + kv_bytes_read) / effective_bandwidth(s)
    t_compute = 2.0 * active_params * batch / (s.flops_per_s * c.prompt_flops_fraction)
    return max(t_memory, t_compute)


@dataclass(frozen=True)
class ServerStepSetup:
    """What one llama-server step costs on a CPU host: the model's bytes and FLOPs on `cpu` (hashable, cached)."""

    cpu: CpuSetup
    weight_bytes: float
    active_params: float
    kv_bytes_per_token: float
    attn_flops_per_token_pair: float
    """FLOPs of one token attending one other, over every layer (QK^T and PV)."""


def server_step_s(s: ServerStepSetup, decode_seqs: float, decode_ctx: float, prompt_tokens: float,
                  prompt_ctx: float) -> float:
    """One llama-server step: `decode_seqs` slots generating one token each plus `prompt_tokens` of a prompt.

    llama-server (tools/server/server-context.cpp update_slots) puts the generating slots' tokens in the batch
    first and then prompt tokens up to --batch-size, and decodes them as one batch: the weights are streamed once
    for all of them, so the step is the longer of that memory time and the batch's compute (the prompt tokens
    at prompt_s's rate, attention included). With no prompt tokens this is generation_step_s; with no decoding
    slots, prompt_s (when compute-bound).
    """
    c = load_constants().cpu
    kv_read = decode_seqs * decode_ctx + (prompt_ctx if prompt_tokens > 0 else 0.0)
    t_memory = (s.weight_bytes + kv_read * s.kv_bytes_per_token) / effective_bandwidth(s.cpu)
    flops = 2.0 * s.active_params * (decode_seqs + prompt_tokens) + s.attn_flops_per_token_pair * prompt_tokens * \
        prompt_ctx
    t_compute = flops / (s.cpu.flops_per_s * c.prompt_flops_fraction)
    return max(t_memory, t_compute)
