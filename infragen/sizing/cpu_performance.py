"""CPU speed model for llama.cpp: prompt processing bound by SIMD FLOPs, generation by DRAM bandwidth and threads.

Pure arithmetic on CpuModel figures; a missing figure raises MissingFigureError (never guessed).
"""

from __future__ import annotations

from dataclasses import dataclass

from infragen.catalog.records import CpuModel
from infragen.errors import MissingFigureError
from infragen.sizing.constants import WeightKernel, load_constants
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
    arch: str = "x86_64"
    simd: tuple[str, ...] = ()
    clock_hz: float = 0.0
    """Sustained clock of each thread's core (per-cycle kernel rates)."""
    microarchitecture: str = ""
    """CpuModel.microarchitecture (which kernel set's per-cycle rates apply)."""


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
        arch=str(cpu.arch),
        simd=tuple(cpu.simd),
        clock_hz=clock_ghz * GIGA,
        microarchitecture=str(cpu.microarchitecture),
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


def weight_kernel(s: CpuSetup, weight_type: str | None) -> WeightKernel | None:
    """The pinned llama.cpp's kernel figures for `weight_type` on this CPU (performance.yaml cpu.weight_kernels).

    The first kernel set whose arch, SIMD features and (where it names them) core designs match the CPU's applies:
    the kernels ggml-cpu picks depend on the features (repack.cpp repacks Q4_0 into q4_0_8x8 on any AVX2 CPU but
    Q8_0 only on ARM and RISC-V; AVX-512 builds run 512-bit F16 GEMMs and VNNI int8 dot products; an AMX CPU runs
    the same kernels, since infragen's nodes compile AMX out, at its own rates), their rate per cycle on the core
    design. None: no set or no figures for the
    type (the bandwidth/FP32 terms alone), or `weight_type` None (other llama.cpp builds).
    """
    if weight_type is None:
        return None
    have = set(s.simd)
    design = s.microarchitecture.lower()
    for kernels in load_constants().cpu.weight_kernels:
        if s.arch == kernels.arch and have.issuperset(kernels.simd_all) and not have.intersection(kernels.simd_none) \
                and (not kernels.microarchitectures or any(m.lower() in design for m in kernels.microarchitectures)):
            return kernels.types.get(weight_type)
    return None


def prompt_s(s: CpuSetup, active_params: float, tokens: int, attn_flops: float = 0.0,
             weight_type: str | None = None) -> float:
    """Prompt processing time: 2 x active params x tokens (+ attention) at the sustained SIMD rate (of the
    weight type's kernels: `weight_type` None is the model without them, as for other llama.cpp builds)."""
    c = load_constants().cpu
    k = weight_kernel(s, weight_type)
    rate = s.flops_per_s * c.prompt_flops_fraction * (k.prompt_flops_factor if k else 1.0)
    return (2.0 * active_params * tokens + attn_flops) / rate


def generation_step_s(
    s: CpuSetup, weight_bytes: float, active_params: float, kv_bytes_read: float, batch: float,
    weight_type: str | None = None,
) -> float:
    """One generation step for `batch` slots: weights streamed once, each slot's KV read, and the compute.

    Compute: the batch's FLOPs at the prompt rate (the weight type's batched kernels: llamafile's sgemm takes two
    rows or more, the repacked q4_0_8x8 GEMM four), and never less than one row through the type's matrix-vector
    kernel where its rate is known (a lone slot runs it; more slots share a GEMM, which costs less per row; two or
    three Q4_0 rows, which ggml runs through that kernel one by one, are taken at the GEMM rate: monotone in the
    batch, as the planner's bisection needs). A mean batch below one (the load model's) still runs one GEMV: the
    step that decodes a request carries that request."""
    c = load_constants().cpu
    t_memory = (weight_bytes + kv_bytes_read) / effective_bandwidth(s)
    k = weight_kernel(s, weight_type)
    t_compute = 2.0 * active_params * batch / (s.flops_per_s * c.prompt_flops_fraction
                                               * (k.prompt_flops_factor if k else 1.0))
    if k is not None and k.generation_weights_per_cycle_per_core and s.clock_hz and batch > 0:
        t_compute = max(t_compute, active_params / (s.threads * s.clock_hz * k.generation_weights_per_cycle_per_core))
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
    weight_type: str | None = None
    """GGUF type of the weights (weight_kernel)."""


def server_step_s(s: ServerStepSetup, decode_seqs: float, decode_ctx: float, prompt_tokens: float,
                  prompt_ctx: float) -> float:
    """One llama-server step: `decode_seqs` slots generating one token each plus `prompt_tokens` of a prompt.

    llama-server (tools/server/server-context.cpp update_slots) puts the generating slots' tokens in the batch
    first and then prompt tokens up to --batch-size, and decodes them as one batch: the weights are streamed once
    for all of them, so the step is the longer of that memory time and the batch's compute (the prompt tokens
    at prompt_s's rate, attention included). With no prompt tokens this is generation_step_s; with no decoding
    slots, prompt_s (when compute-bound).
    """
    kv_read = decode_seqs * decode_ctx + (prompt_ctx if prompt_tokens > 0 else 0.0)
    decode = generation_step_s(s.cpu, s.weight_bytes, s.active_params, kv_read * s.kv_bytes_per_token,
                               decode_seqs, s.weight_type) if decode_seqs > 0 else 0.0
    if prompt_tokens <= 0:
        return decode
    t_memory = (s.weight_bytes + kv_read * s.kv_bytes_per_token) / effective_bandwidth(s.cpu)
    attn = s.attn_flops_per_token_pair * prompt_tokens * prompt_ctx
    t_compute = prompt_s(s.cpu, s.active_params, 0, 2.0 * s.active_params * (decode_seqs + prompt_tokens) + attn,
                         s.weight_type)
    return max(t_memory, t_compute, decode)
