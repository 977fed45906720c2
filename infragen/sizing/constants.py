"""Loads the fitted and assumed constants of the performance model (`catalog/data/performance.yaml`).

Read once and cached; a validated, frozen pydantic object. Holds no figures itself.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from infragen.catalog.parsed import load_yaml_text
from infragen.errors import DataError

PERFORMANCE_FILE = Path(__file__).resolve().parent.parent / "catalog" / "data" / "performance.yaml"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VllmMemoryConstants(_Frozen):
    """vLLM start-up memory accounting."""

    block_size_tokens: int = Field(gt=0)
    """Tokens per KV block (vLLM default 16)."""
    max_num_seqs: int = Field(gt=0)
    """Default cap on running sequences (256)."""
    max_num_batched_tokens: int = Field(gt=0)
    """Tokens in the profiling forward pass (chunked-prefill budget)."""
    non_torch_gib: float = Field(ge=0)
    """CUDA context, cuBLAS workspaces and allocator slack per GPU, GiB."""
    cuda_graph_gib: float = Field(ge=0)
    """CUDA graph pool per GPU, GiB."""
    nccl_gib: float = Field(ge=0)
    """NCCL / custom all-reduce buffers per GPU when tp*pp > 1, GiB."""
    source: str
    """Where these figures come from."""


class MoeKernel(_Frozen):
    """One MoE layer of a step as the engine's fused-MoE kernel runs it, fitted on a timing of that kernel:
    layer_fixed_us + max(touched routed-expert bytes / (bandwidth x read_fraction), padded expert FLOPs / (tensor
    peak x compute fraction)). Touched experts follow uniform routing; padding is each touched expert's tokens
    rounded up to moe.tile_tokens."""

    read_fraction: float = Field(gt=0, le=1)
    """Fraction of the datasheet HBM bandwidth at which the kernel reads the touched experts' weights."""
    layer_fixed_us: float = Field(ge=0)
    """Time per MoE layer per step that does not scale with bytes or FLOPs (launches, pipeline fill, the
    activation, quantization and top-k sum kernels), microseconds."""
    compute_fraction: float = Field(gt=0, le=1)
    """Fraction of the 16-bit (or int8) tensor peak the expert GEMMs reach on their padded FLOPs."""
    fp8_compute_fraction: float = Field(gt=0, le=1)
    """Same for fp8 W8A8 (block-scaled) expert GEMMs, of the fp8 tensor peak."""
    measured: str
    """The timing these were fitted on (file, kernel, GPU)."""
    fitted_on: str
    """How they were fitted and how well they reproduce the timing."""


class BlockFp8Linear(_Frozen):
    """A dense linear of a block-quantized fp8 checkpoint at decode batches (<= 64 tokens), as the engine's w8a8
    block kernel and its per-token-group activation quant run it: fixed_us + per_k_ns x K (its input width per
    GPU), fitted on a timing of that kernel. The kernel walks K serially per output tile and small batches give
    few tiles, so the time follows K, not the weight bytes."""

    fixed_us: float = Field(ge=0)
    """Time per linear that does not scale with K (launches of the GEMM and the quant kernel), microseconds."""
    per_k_ns: float = Field(ge=0)
    """Time per element of K, nanoseconds."""
    measured: str
    """The timing these were fitted on (file, kernel, GPU)."""
    fitted_on: str
    """How they were fitted and how well they reproduce the timing."""


class LinearKernel(_Frozen):
    """The dense linear layers (16-bit GEMMs, per-tensor fp8 scaled_mm) as a timing of the GEMM library shows them:
    each GEMM costs fixed_us that neither its bytes nor tp divide (launch, pipeline fill, the tail wave), plus the
    larger of streaming its weights at read_fraction of the datasheet bandwidth and computing at the compute
    fraction of the tensor peak. Used instead of decode_bandwidth_fraction / prefill_compute_fraction for an
    engine's non-expert linears (prefill_compute_fraction then prices attention only)."""

    fixed_us: float = Field(ge=0)
    """Time of one GEMM that does not scale with its bytes or FLOPs, microseconds."""
    read_fraction: float = Field(gt=0, le=1)
    """Fraction of the datasheet HBM bandwidth at which a GEMM streams its weights."""
    compute_fraction: float = Field(gt=0, le=1)
    """Fraction of the 16-bit (or int8) tensor peak the GEMMs reach once compute-bound."""
    fp8_compute_fraction: float = Field(gt=0, le=1)
    """Same for fp8 W8A8 GEMMs, of the fp8 tensor peak."""
    measured: str
    """The timing these were fitted on (file, kernel library, GPU)."""
    fitted_on: str
    """How they were fitted and how well they reproduce the timing."""


class MoeLayerOps(_Frozen):
    """The parts of a MoE decoder layer outside its GEMMs, attention and expert kernel, as timed on a GPU: the
    16-bit router GEMM, a number of small kernels (norms, RoPE, KV-cache write, top-k, expert sorting) that are
    launch-bound at decode sizes, the two add-norms' bytes at prefill sizes, and MLA's absorbed decode bmms."""

    router_us: float = Field(ge=0)
    """The router GEMM ([experts, hidden], 16-bit, replicated) at decode batches, microseconds."""
    kernels_per_layer: int = Field(ge=0)
    """Small kernels a MoE layer runs besides its GEMMs, attention and expert kernel (read in the engine)."""
    kernel_us: float = Field(ge=0)
    """Time of one such kernel in a CUDA graph at decode sizes (launch-bound), microseconds."""
    norm_bandwidth_fraction: float = Field(gt=0, le=1)
    """Achieved fraction of the datasheet HBM bandwidth of residual-add + RMSNorm at prefill-sized steps."""
    mla_absorb_bmm_us: float = Field(ge=0)
    """MLA layers (kv_lora_rank): the two absorbed decode bmms (q with W_UK, the output with W_UV), microseconds."""
    measured: str
    """The timing these were derived from (files, ops, GPU)."""
    fitted_on: str
    """How they were derived (which rows, which statistic) and what the kernel count was read in."""


class LayerOps(_Frozen):
    """A dense layer's non-GEMM kernels, as a timing of them shows: causal prefill flash attention (prompt tokens x
    layers x attention_row_ns + FLOPs / (16-bit peak x attention_compute_fraction)) and the elementwise ops, each at
    its measured fraction of the bandwidth on the bytes it moves (residual add + RMSNorm twice, SiLU-mul, RoPE)."""

    attention_compute_fraction: float = Field(gt=0, le=1)
    """Fraction of the 16-bit tensor peak causal prefill attention reaches on its FLOPs."""
    attention_row_ns: float = Field(ge=0)
    """Time per prompt token per layer of prefill attention beside its FLOPs (a query block's pass over the KV
    loop runs its heads in parallel), nanoseconds."""
    norm_read_fraction: float = Field(gt=0, le=1)
    """Fraction of the datasheet bandwidth the residual add + RMSNorm reaches."""
    activation_read_fraction: float = Field(gt=0, le=1)
    """Same for SiLU-mul."""
    rope_read_fraction: float = Field(gt=0, le=1)
    """Same for the rotary embedding of q and k."""
    measured: str
    """The timing these were fitted on (file, kernels, GPU)."""
    fitted_on: str
    """How they were fitted and how well they reproduce the timing."""
    decode_floor_us: tuple[tuple[str, float], ...] = ()
    """Per GPU architecture (lower case, as accelerators.yaml names it): time one dense layer adds to every step
    beyond its GEMMs, bytes and collectives (small kernels at their launch floor, attention's fixed time, the
    step's sampling spread over the layers), microseconds. tp does not divide it. Architectures not listed take
    the largest value listed."""
    decode_floor_fitted_on: str = ""
    """Which runs decode_floor_us was fitted on, how, and what it leaves (required when it is given)."""

    @field_validator("decode_floor_us", mode="before")
    @classmethod
    def _floor_pairs(cls, v: object) -> object:
        """The data file writes a mapping; the constants stay hashable (they key the drain cache)."""
        return tuple(sorted(v.items())) if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _floor_sourced(self) -> LayerOps:
        if self.decode_floor_us and not self.decode_floor_fitted_on.strip():
            raise ValueError("layer_ops.decode_floor_us needs decode_floor_fitted_on")
        if any(v < 0 for _, v in self.decode_floor_us):
            raise ValueError("layer_ops.decode_floor_us values must be >= 0")
        return self

    def floor_us(self, architecture: str) -> float:
        """The decode floor of a layer on a GPU of `architecture` (the largest listed for one not listed)."""
        floors = dict(self.decode_floor_us)
        return floors.get(architecture.lower(), max(floors.values())) if floors else 0.0


class EngineConstants(_Frozen):
    """Efficiency of one GPU engine relative to the hardware peaks (fitted, see `fitted_on`)."""

    prefill_compute_fraction: float = Field(gt=0, le=1)
    """Sustained fraction of dense tensor peak in large matrix multiplies."""
    decode_bandwidth_fraction: float = Field(gt=0, le=1)
    """Sustained fraction of peak HBM bandwidth when streaming weights (GEMV/GEMM reads)."""
    kv_bandwidth_fraction: float = Field(gt=0, le=1)
    """Sustained fraction of peak HBM bandwidth when attention kernels read the paged KV cache."""
    moe_bandwidth_fraction: float | None = Field(default=None, gt=0, le=1)
    """Sustained fraction of peak HBM bandwidth when the fused-MoE kernel reads routed experts (engines whose
    MoE kernel is not measured; an engine gives this or `moe_kernel`)."""
    moe_kernel: MoeKernel | None = None
    """Measured behaviour of the engine's fused-MoE kernel (replaces moe_bandwidth_fraction)."""
    block_fp8_linear: BlockFp8Linear | None = None
    """Measured floor of a block-fp8 checkpoint's dense linears (engines whose block-fp8 kernel was timed)."""
    linear_kernel: LinearKernel | None = None
    """Measured per-GEMM cost of the dense linears (replaces the two fitted fractions for them; None: the
    roofline at decode_bandwidth_fraction / prefill_compute_fraction)."""
    layer_ops: LayerOps | None = None
    """Measured prefill attention and elementwise ops of dense layers (None: attention at prefill_compute_fraction,
    elementwise ops not priced)."""
    moe_layer_ops: MoeLayerOps | None = None
    """Measured router, small kernels and MLA bmms of a MoE layer (engines whose layer ops were timed)."""
    step_overhead_ms: float = Field(ge=0)
    """Fixed host-side cost of one scheduler step (scheduling, sampling, launch), ms."""
    per_seq_overhead_ms: float = Field(ge=0)
    """Host-side cost per running sequence per step (output processing, detokenisation), ms."""
    per_layer_overhead_us: float = Field(ge=0)
    """Kernel-launch / synchronisation cost per layer per step, microseconds."""
    overlapped_host_us_per_seq: float = Field(default=0.0, ge=0)
    """Host work per running sequence per step that runs beside the GPU's (output processing, detokenisation and
    streaming in another thread or process): a step takes at least this x its sequences, microseconds; tp does
    not divide it. 0: not measured for the engine (the step is the GPU's)."""
    fitted_on: str
    """Which calibration rows determined the fitted fields, and how."""
    first_token_overhead_ms: float = Field(default=0.0, ge=0)
    """Time a client waits for its first token beyond the engine's steps (HTTP request and response, prompt
    tokenisation, streaming the first chunk), ms; added to TTFT only: it occupies no GPU step."""
    first_token_source: str = ""
    """Where first_token_overhead_ms was measured (required when it is not 0)."""

    @model_validator(mode="after")
    def _first_token_sourced(self) -> EngineConstants:
        if self.first_token_overhead_ms and not self.first_token_source.strip():
            raise ValueError("first_token_overhead_ms needs first_token_source (where it was measured)")
        return self

    @model_validator(mode="after")
    def _one_moe_model(self) -> EngineConstants:
        if (self.moe_bandwidth_fraction is None) == (self.moe_kernel is None):
            raise ValueError("give exactly one of moe_bandwidth_fraction and moe_kernel")
        return self


class InterconnectConstants(_Frozen):
    """Collective-communication model."""

    def allreduce_latency_s(self, link: Literal["nvlink", "pcie"], gpus: int) -> float:
        """Small-message all-reduce time over `link` among `gpus` GPUs (next larger measured count)."""
        table = self.allreduce_latency_us[link]
        counts = sorted(table)
        at = next((n for n in counts if n >= gpus), counts[-1])
        return table[at] * 1e-6

    allreduce_latency_us: dict[Literal["nvlink", "pcie"], dict[int, float]]
    """Time of one small-message all-reduce by link kind and GPU count, microseconds (measured; a count not
    listed takes the next larger one listed, else the largest)."""
    link_efficiency: float = Field(gt=0, le=1)
    """Achieved fraction of the per-direction NVLink bandwidth in all-reduce."""
    pcie_link_efficiency: float = Field(gt=0, le=1)
    """Achieved fraction of the per-direction PCIe bandwidth in all-reduce (host bridges, no P2P on many boards)."""
    pcie_gb_per_s_default: float = Field(gt=0)
    """Per-direction PCIe Gen4 x16 bandwidth used when a PCIe GPU lists none, GB/s."""
    cross_node_latency_us: float = Field(ge=0)
    """Latency of one pipeline hop between nodes (RDMA or TCP), microseconds."""
    source: str
    """Where these figures come from."""


class MoeTile(_Frozen):
    """One row of the fused-MoE kernel's M tile by batch size."""

    max_batch_tokens: int | None = Field(default=None, gt=0)
    """Largest batch (tokens in the step) this row covers; None = every larger batch."""
    tile_tokens: int = Field(gt=0)
    """Rows of one expert GEMM tile (BLOCK_SIZE_M): an expert's tokens are padded up to a multiple of it."""


class MoeConstants(_Frozen):
    """Mixture-of-experts kernel facts."""

    tile_tokens: list[MoeTile]
    """By batch size, ascending; the last row has no max_batch_tokens."""
    source: str
    """Where the tiles were read."""


class WeightKernel(_Frozen):
    """What the pinned llama.cpp's CPU kernels for one GGUF weight type reach (fitted, see the cpu section)."""

    generation_weights_per_cycle_per_core: float | None = Field(default=None, gt=0)
    """Weights one core multiplies per clock cycle in the matrix-vector kernel (a step of one generating slot): a
    compute floor under the bandwidth time; None: none measured (bandwidth-bound)."""
    prompt_flops_factor: float = Field(default=1.0, gt=0, le=4)
    """The batched (matrix-matrix) kernels' rate as a multiple of prompt_flops_fraction's FP32 rate (1: that rate).
    Above 1 where int8 dot products beat FP32 FMAs: a 256-bit VNNI vpdpbusd does 32 int8 multiply-adds, an FMA 8,
    so 4 is the bound."""


class WeightKernelSet(_Frozen):
    """The pinned llama.cpp's kernel rates on one class of CPU, per GGUF weight type (`precision` names)."""

    arch: str
    simd_all: list[str]
    """SIMD features (CpuModel.simd names) the CPU must have."""
    simd_none: list[str] = Field(default_factory=list)
    """SIMD features it must not have (they select other kernels)."""
    microarchitectures: list[str] = Field(default_factory=list)
    """Core designs the set is limited to: case-insensitive substrings of CpuModel.microarchitecture (the catalog's
    names, or the probe's 'family F model M'); empty: any CPU with the SIMD features. The same instructions run at
    different rates per cycle on different cores (Zen 5 executes 512-bit FMAs at full width, Zen 4 in two halves)."""
    types: dict[str, WeightKernel]
    fitted_on: str
    """Rows, source, and why these kernels run there."""


class CpuConstants(_Frozen):
    """llama.cpp on CPUs (fitted, see `fitted_on`)."""

    generation_bandwidth_fraction: float = Field(gt=0, le=1)
    """Sustained fraction of peak DRAM bandwidth in token generation."""
    per_thread_bandwidth_gb_per_s: float = Field(gt=0)
    """Bandwidth one thread can pull (generation is thread-limited below saturation), GB/s."""
    prompt_flops_fraction: float = Field(gt=0, le=1)
    """Sustained fraction of the FP32 SIMD peak in prompt processing (int8 dot products included)."""
    default_memory_channels_share: float = Field(gt=0, le=1)
    """Share of a socket's bandwidth assumed for a VM using the whole socket."""
    measured_bandwidth_fraction: float = Field(gt=0, le=1)
    """Fraction of a measured (hardware probe) read bandwidth token generation sustains."""
    fitted_on: str
    """Rows used."""
    weight_kernels: list[WeightKernelSet] = Field(default_factory=list)
    """Per-type kernel rates of the pinned llama.cpp by CPU class; the first set whose arch and SIMD match applies
    (a CPU matching none, or a type a set does not list, is modelled by the bandwidth/FP32 terms alone)."""


class UncertaintyBand(_Frozen):
    """Relative error band of one regime."""

    relative: float = Field(gt=0)
    """Band as a fraction (0.2 = +/-20 %)."""
    rows: int = Field(ge=0)
    """Calibration rows behind it (0 = no rows: a prior)."""
    derived: str
    """How the band was derived."""


class ConfidenceFactor(_Frozen):
    """The latency factor of one regime at a confidence."""

    factor: float = Field(ge=1)
    """Multiplier on predicted latencies (1 = the estimate as it is)."""
    rows: int = Field(ge=0)
    """Calibration rows behind it (0 = a prior)."""


class SloConfidenceFactors(_Frozen):
    """How much to inflate predicted latencies for the planner to meet the SLOs at a confidence (workload
    `slo_confidence`); p50 is the estimate itself (the model taken as the median)."""

    p90: dict[str, ConfidenceFactor]
    """Per regime: the 90th percentile of measured/predicted time over its calibration rows."""
    derived: str
    """How the factors were derived, and the command that prints them."""


class SchedulerTier(_Frozen):
    """One row of vLLM's batch defaults: GPUs with at least this much memory (and not excepted) get these."""

    min_gpu_memory_gib: float = Field(ge=0)
    """Smallest total memory of one GPU, GiB, for this tier."""
    except_gpus: list[str] = []
    """Accelerator ids vLLM keeps out of this tier whatever their memory."""
    max_num_seqs: int = Field(gt=0)
    """Default --max-num-seqs of `vllm serve` on such a GPU."""
    max_num_batched_tokens: int = Field(gt=0)
    """Default --max-num-batched-tokens of `vllm serve` on such a GPU."""


class SchedulerDefaults(_Frozen):
    """What `vllm serve` batches by default when the flags are not given (first matching tier wins)."""

    engine_version: str
    """The vLLM release these were read from."""
    tiers: list[SchedulerTier]
    """Tiers in the order vLLM tests them."""
    source: str
    """Where in the release they were read."""


class PerformanceConstants(_Frozen):
    """Everything in performance.yaml."""

    schema_version: int
    """File schema version."""
    source: str
    """Provenance of the file."""
    as_of: str
    """Date of the last fit."""
    vllm_memory: VllmMemoryConstants
    """vLLM memory accounting."""
    engines: dict[str, EngineConstants]
    """Per-engine efficiencies (vllm, tensorrt-llm)."""
    interconnect: InterconnectConstants
    """Collective model."""
    moe: MoeConstants
    """Fused-MoE kernel tiles."""
    cpu: CpuConstants
    """CPU model."""
    trtllm_ceiling_factor: float = Field(gt=1)
    """vLLM predictions are capped at this factor over the TensorRT-LLM-engine prediction."""
    uncertainty: dict[str, UncertaintyBand]
    """Bands per regime."""
    slo_confidence: SloConfidenceFactors
    """Latency factors per regime at the p90 confidence."""
    vllm_scheduler_defaults: SchedulerDefaults
    """`vllm serve` batch defaults per GPU (what `estimate --rate` assumes unless told)."""


#: Constants used instead of the file while a fit is running (benchmarks/accuracy.py --fit); empty otherwise.
OVERRIDE: list[PerformanceConstants] = []


def load_constants(path: Path = PERFORMANCE_FILE) -> PerformanceConstants:
    """The model's constants: performance.yaml, read and validated once (or the fit's override)."""
    if OVERRIDE:
        return OVERRIDE[-1]
    return _load(path)


@lru_cache(maxsize=4)
def _load(path: Path) -> PerformanceConstants:
    try:
        raw = load_yaml_text(path.read_text(encoding="utf-8"))
        return PerformanceConstants.model_validate(raw)
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise DataError(f"{path}: {exc}") from exc
