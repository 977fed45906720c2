"""GPU speed model: roofline step times for prefill and decode, TP all-reduce, PP stages, MoE expert reads.

Plain float arithmetic on a prepared, hashable `GpuSetup`; constants come from performance.yaml.
Nothing here decides whether a setup fits in memory (memory.py) or builds user-facing results (estimate.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from infragen.architecture import ModelArchitecture
from infragen.catalog.records import Accelerator
from infragen.errors import MissingFigureError
from infragen.sizing.constants import EngineConstants, LayerOps, LinearKernel, MoeKernel, load_constants
from infragen.sizing.memory import head_dim, param_groups, weight_bytes_per_gpu
from infragen.units import GIGA, TERA

#: Architectures with fp8 tensor cores in hardware (vLLM runs W8A8 FP8 there; weight-only FP8 Marlin elsewhere).


@dataclass(frozen=True)
class GpuSetup:
    """Everything the step-time equations need for one replica, precomputed once per layout."""

    engine: str
    tp: int
    pp: int
    nodes: int
    num_layers: int
    hidden_size: int
    attn_flops_per_token_ctx: float
    """FLOPs per (query token x context token) summed over layers (QK^T and PV), whole model."""
    dense_flops_per_token: float
    """2 x active matmul parameters (experts at top-k), whole model."""
    weight_bytes_dense_gpu: float
    """Non-expert weight bytes one GPU reads per step."""
    expert_bytes_gpu: float
    """All routed-expert bytes on one GPU (a step reads a batch-dependent share)."""
    num_experts: int
    experts_per_token: int
    kv_bytes_per_token_gpu: float
    """KV bytes per cached token on one GPU (its layers, its heads)."""
    peak_flops: float
    """Dense tensor peak of one GPU for the compute precision, FLOP/s."""
    bandwidth_bytes_per_s: float
    """Peak HBM bandwidth of one GPU, bytes/s."""
    link_bytes_per_s: float
    """Per-direction GPU-to-GPU bandwidth, bytes/s."""
    allreduce_latency_s: float
    cross_node_hop_s: float
    activation_bytes: float
    """Bytes per element of activations exchanged (2: bf16/fp16)."""
    expert_flops_per_pair: float = 0.0
    """FLOPs of one token through one routed expert, summed over MoE layers, whole model (2 x its weights)."""
    moe_tile_tokens: tuple[tuple[int, int], ...] = ()
    """Fused-MoE kernel's M tile by batch size: (largest batch tokens, tile rows); the last row has no limit."""
    moe_layers_stage: float = 0.0
    """MoE layers on one pipeline stage."""
    shared_experts: int = 0
    """Always-active shared experts per MoE layer (counted in expert_bytes_gpu)."""
    moe_activation_bytes_per_pair: float = 0.0
    """HBM bytes one routed (token, expert) pair's intermediate tensors cost one GPU per MoE layer: the gate-up
    output (2N/tp), the activation (N/tp) and the expert's output (hidden), each written by one kernel and read
    by the next (16-bit): 2 x 2 x (3N/tp + hidden)."""
    fp8_tensor_math: bool = False
    """The GEMMs run on fp8 tensor cores (fp8 W8A8); False for 16-bit, int8 and weight-only fp8 (Marlin)."""
    block_fp8_linear_floor_s: float = 0.0
    """Least time of one stage's dense linears in a decode step when they are block-fp8 (a block-quantized
    checkpoint on fp8 tensor cores, an engine with engines.<engine>.block_fp8_linear); 0 otherwise."""
    linears_stage: float = 0.0
    """Non-expert GEMMs one pipeline stage launches per step (layers x linears_per_layer): each pays the
    engine's linear_kernel.fixed_us."""
    layer_ops_bytes_per_token: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Bytes one token moves on one GPU through a stage's residual add + RMSNorm (twice), SiLU-mul and RoPE
    (elementwise_bytes_per_token x layers), for dense models; zeros for MoE models (their non-expert terms are the
    MoE model's)."""
    attention_peak_flops: float = 0.0
    """16-bit tensor peak of one GPU (attention runs in 16-bit whatever the weights), FLOP/s."""
    lm_head_flops_per_token: float = 0.0
    """2 x the LM head's weights: in dense_flops_per_token, but a prompt token does not run it (vLLM computes
    logits for the last prompt position only); the measured-linear path leaves it out for prompt tokens."""
    linears_measured: bool = False
    """The linears run the kernels engines.<engine>.linear_kernel was timed on: 16-bit GEMMs, or per-tensor fp8
    W8A8 on fp8 tensor cores. Weight-only int4 / fp8 (Marlin), int8 W8A8 and block-fp8 keep the fitted roofline."""
    moe_layer_ops_fixed_s: float = 0.0
    """One stage's MoE-layer parts outside the GEMMs, attention and experts that do not grow with the step's tokens
    (router GEMM, launch-bound small kernels, MLA's absorbed bmms: engines.<engine>.moe_layer_ops); 0 otherwise."""
    moe_layer_ops_s_per_token: float = 0.0
    """Seconds per token in the step of those parts: the MoE layers' two residual-add + RMSNorm passes."""
    expert_parallel: int = 1
    """Expert-parallel size (vllm serve --enable-expert-parallel): the tp group's GPUs each hold whole routed
    experts, ceil(E / tp) on the busiest; 1 = the experts are tp-sharded like the other linears."""
    layer_floor_s: float = 0.0
    """One stage's layers' decode floor (engines.<engine>.layer_ops.decode_floor_us for the GPU's architecture x
    layers, MoE layers too: they have the dense layer's attention, norms and share of sampling): time every step
    pays that tp does not divide; 0 for engines without it."""
    expert_share_gpu: float = 1.0
    """Share of every routed (token, expert) pair's FLOPs one GPU of a stage computes: 1/tp when the experts are
    tp-sharded, ceil(E / EP) / E on the busiest rank under expert parallelism (whole experts, its pairs only)."""

    @property
    def routed_expert_bytes_gpu(self) -> float:
        """Routed-expert bytes on one GPU of a stage (expert_bytes_gpu less the tp-sharded shared experts)."""
        routed = self.num_experts * self.expert_share_gpu
        shared = self.shared_experts / self.tp
        return self.expert_bytes_gpu * routed / (routed + shared) if routed else 0.0


@dataclass(frozen=True)
class GpuFigures:
    """The hashable subset of an Accelerator record the speed model reads (records hold lists: unhashable)."""

    id: str
    architecture: str
    memory_bandwidth_gb_per_s: float | None
    fp16_tflops: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    int8_tops: float | None
    interconnect: str
    interconnect_gb_per_s: float | None
    compute_power_scale: float = 1.0
    """Share of the tensor peak a power-capped card sustains (Accelerator.compute_power_scale)."""


def gpu_figures(acc: Accelerator) -> GpuFigures:
    return GpuFigures(
        id=acc.id,
        architecture=acc.architecture,
        memory_bandwidth_gb_per_s=acc.memory_bandwidth_gb_per_s,
        fp16_tflops=acc.fp16_tflops,
        bf16_tflops=acc.bf16_tflops,
        fp8_tflops=acc.fp8_tflops,
        int8_tops=acc.int8_tops,
        interconnect=acc.interconnect,
        interconnect_gb_per_s=acc.interconnect_gb_per_s,
        compute_power_scale=acc.compute_power_scale,
    )


def compute_peak_tflops(acc: GpuFigures, precision: str) -> tuple[float, str]:
    """Tensor peak used by prefill: fp8 only where the GPU has fp8; int8 W8A8 on int8 units; else 16-bit."""
    if precision == "fp8" and acc.fp8_tflops is not None:
        return acc.fp8_tflops, "fp8"
    if precision == "int8" and acc.int8_tops is not None:
        return acc.int8_tops, "int8"
    peak = acc.bf16_tflops or acc.fp16_tflops
    if peak is None:
        raise MissingFigureError(f"{acc.id}: no fp16/bf16 tensor TFLOPS in the GPU data; cannot estimate prefill speed")
    return peak, "fp16"


@lru_cache(maxsize=4096)
def gpu_setup(
    model: ModelArchitecture,
    acc: GpuFigures,
    precision: str,
    kv_bytes_per_token_gpu: float,
    engine: str,
    tp: int,
    pp: int,
    nodes: int,
    fp8_scope: str = "all-linear",
    expert_parallel: bool = False,
) -> GpuSetup:
    """Precompute the per-layout figures (cached on hashable inputs). `expert_parallel`: vLLM's
    --enable-expert-parallel with one engine (dp 1): the MoE layers' routed experts are placed whole on the tp
    group's GPUs (EP size = tp) instead of sharded; attention, dense layers and shared experts stay tp-sharded.
    At tp 1 vLLM does not turn it on (FusedMoEParallelConfig.make: use_ep needs dp x pcp x tp > 1)."""
    c = load_constants()
    g = param_groups(model)
    nh = model.num_attention_heads
    if model.kv_lora_rank is not None:
        qk_dim = (model.qk_nope_head_dim or head_dim(model)) + (model.qk_rope_head_dim or 0)
        v_dim = model.v_head_dim or head_dim(model)
    else:
        qk_dim = v_dim = head_dim(model)
    attn_flops = 2.0 * nh * (qk_dim + v_dim) * model.num_layers
    dense_flops = 2.0 * g.active()
    weights_gpu = weight_bytes_per_gpu(model, precision, tp, pp, fp8_scope)
    layers_per_stage = math.ceil(model.num_layers / pp)
    ep = tp if expert_parallel and g.moe_layers and tp > 1 else 1
    expert_share = 1.0 / tp
    if g.moe_layers:
        from infragen.sizing.memory import linear_bytes_per_weight

        one_expert = g.moe_experts_per_layer / (model.num_experts + model.num_shared_experts)
        expert_pair_flops = 2.0 * one_expert * g.moe_layers
        three_n = expert_pair_flops / (2.0 * g.moe_layers * model.hidden_size)  # w13 + w2 rows of one expert
        if ep > 1:
            # vLLM 0.34.0 fused_moe/expert_map_manager.py: E // EP experts a rank, the remainder to the low ranks;
            # the busiest rank holds (and sets the step's time with) ceil(E / EP) whole experts and computes the
            # pairs routed to them; each of its pairs writes whole-expert intermediates (3N) and a hidden output
            local = math.ceil(model.num_experts / ep)
            expert_share = local / model.num_experts
            expert_gpu = (local + model.num_shared_experts / tp) * one_expert * linear_bytes_per_weight(precision)
            pair_bytes = 2.0 * 2.0 * (three_n + model.hidden_size) * expert_share
        else:
            expert_gpu = g.moe_experts_per_layer * linear_bytes_per_weight(precision) / tp
            pair_bytes = 2.0 * 2.0 * (three_n / tp + model.hidden_size)
        expert_gpu *= layers_per_stage * (g.moe_layers / g.num_layers)
        # weight_bytes_per_gpu counts every expert tp-sliced: that is what comes off it to leave the dense part
        expert_tp_gpu = g.moe_experts_per_layer * linear_bytes_per_weight(precision) / tp * (
            layers_per_stage * g.moe_layers / g.num_layers)
    else:
        expert_gpu = expert_tp_gpu = expert_pair_flops = pair_bytes = 0.0
    if acc.memory_bandwidth_gb_per_s is None:
        raise MissingFigureError(f"{acc.id}: no memory bandwidth in the GPU data; cannot estimate decode speed")
    peak, peak_kind = compute_peak_tflops(acc, precision)
    ec = engine_constants(engine)
    block = ec.block_fp8_linear
    floor = 0.0
    if block is not None and peak_kind == "fp8" and model.weight_block_size is not None:
        attn, mlp, shared = block_fp8_linear_widths(model, tp)
        moe_share = g.moe_layers / g.num_layers if g.moe_layers else 0.0
        per_layer = [(attn + mlp, 1.0 - moe_share), (attn + shared, moe_share)]
        floor = sum(share * sum(block.fixed_us + block.per_k_ns * 1e-3 * k for k in ks) * 1e-6
                    for ks, share in per_layer) * layers_per_stage
    linears_measured = precision in ("bf16", "fp16") or (peak_kind == "fp8" and model.weight_block_size is None)
    # the router is one of the linears linear_kernel prices when it prices them (linears_per_layer)
    router_priced = ec.linear_kernel is not None and linears_measured
    ops_fixed, ops_per_token = moe_layer_ops_s(engine, model, acc, layers_per_stage,
                                               layers_per_stage * g.moe_layers / g.num_layers if g.moe_layers else 0.0,
                                               router_priced)
    ops = ec.layer_ops
    ic = c.interconnect
    # A ring all-reduce moves 2 (n-1)/n of the message per GPU at the link's achieved bus bandwidth, plus the
    # small-message time measured for that link and GPU count (performance.yaml: interconnect).
    if acc.interconnect == "nvlink" and acc.interconnect_gb_per_s:
        link = acc.interconnect_gb_per_s / 2 * GIGA * ic.link_efficiency
        latency = ic.allreduce_latency_s("nvlink", max(tp, 2))
    else:
        link = (acc.interconnect_gb_per_s / 2 if acc.interconnect_gb_per_s else ic.pcie_gb_per_s_default) * GIGA
        link *= ic.pcie_link_efficiency
        latency = ic.allreduce_latency_s("pcie", max(tp, 2))
    return GpuSetup(
        engine=engine,
        tp=tp,
        pp=pp,
        nodes=nodes,
        num_layers=model.num_layers,
        hidden_size=model.hidden_size,
        attn_flops_per_token_ctx=attn_flops,
        dense_flops_per_token=dense_flops,
        weight_bytes_dense_gpu=weights_gpu - expert_tp_gpu,
        expert_bytes_gpu=expert_gpu,
        num_experts=model.num_experts,
        experts_per_token=model.num_experts_per_token,
        expert_flops_per_pair=expert_pair_flops,
        moe_tile_tokens=tuple((t.max_batch_tokens or 0, t.tile_tokens) for t in c.moe.tile_tokens),
        moe_layers_stage=layers_per_stage * g.moe_layers / g.num_layers if g.moe_layers else 0.0,
        shared_experts=model.num_shared_experts if g.moe_layers else 0,
        moe_activation_bytes_per_pair=pair_bytes,
        block_fp8_linear_floor_s=floor,
        linears_stage=layers_per_stage * linears_per_layer(model),
        linears_measured=linears_measured,
        moe_layer_ops_fixed_s=ops_fixed,
        moe_layer_ops_s_per_token=ops_per_token,
        expert_parallel=ep,
        expert_share_gpu=expert_share,
        layer_floor_s=0.0 if ops is None else (
            ops.floor_us(acc.architecture) * 1e-6 * layers_per_stage),
        layer_ops_bytes_per_token=(0.0, 0.0, 0.0) if g.moe_layers else tuple(
            layers_per_stage * b for b in elementwise_bytes_per_token(model, tp)),  # type: ignore[arg-type]
        lm_head_flops_per_token=2.0 * g.lm_head,
        attention_peak_flops=(acc.bf16_tflops or acc.fp16_tflops or peak) * acc.compute_power_scale * TERA,
        fp8_tensor_math=peak_kind == "fp8",
        kv_bytes_per_token_gpu=kv_bytes_per_token_gpu,
        peak_flops=peak * acc.compute_power_scale * TERA,
        bandwidth_bytes_per_s=acc.memory_bandwidth_gb_per_s * GIGA,
        link_bytes_per_s=link,
        allreduce_latency_s=latency,
        cross_node_hop_s=ic.cross_node_latency_us * 1e-6,
        activation_bytes=2.0,
    )


#: Models with this many routed experts or more (Qwen3-MoE, DeepSeek-V2/V3) run many small per-expert GEMMs;
#: the only measured rows of them (vLLM 0.11, benchmarks/data/extra_calibration.csv) are over-predicted by ~50 %,
#: unlike Mixtral's 8 experts, so their estimates carry their own, wider band.
MANY_EXPERTS = 32
MANY_EXPERT_MOE_REGIME = "gpu-moe-many-experts"


def is_many_expert_moe(model: ModelArchitecture) -> bool:
    return model.num_experts >= MANY_EXPERTS


def engine_constants(engine: str) -> EngineConstants:
    engines = load_constants().engines
    if engine not in engines:
        raise MissingFigureError(f"no efficiency constants for engine {engine!r} in performance.yaml")
    return engines[engine]


def first_token_s(s: GpuSetup) -> float:
    """Seconds of a request's TTFT outside the engine steps (performance.yaml first_token_overhead_ms)."""
    return engine_constants(s.engine).first_token_overhead_ms * 1e-3


def expert_read_fraction(num_experts: int, experts_per_token: int, tokens: float) -> float:
    """Expected share of routed experts a step touches: 1 - (1 - k/E)^tokens (uniform routing)."""
    if num_experts == 0 or tokens <= 0:
        return 0.0
    return 1.0 - (1.0 - experts_per_token / num_experts) ** tokens


def busiest_rank_factor(s: GpuSetup, tokens: float) -> float:
    """Under expert parallelism, how many more experts the busiest GPU's step touches than the average GPU's:
    E[max over the EP ranks of touched local experts] / E[touched local experts], each rank's count binomial over its
    ceil(E / EP) experts with the uniform-routing touch probability (expert_read_fraction). 1 under tp (every GPU
    holds a slice of every touched expert) and once a step touches every expert; routing skew is not modelled."""
    if s.expert_parallel <= 1 or tokens <= 0:
        return 1.0
    n = round(s.expert_share_gpu * s.num_experts)
    p = expert_read_fraction(s.num_experts, s.experts_per_token, tokens)
    pmf = (1.0 - p) ** n
    if n < 1 or pmf <= 0.0 or p <= 0.0:
        return 1.0
    cdf = expected_max = 0.0
    for j in range(n):  # E[max] = sum_j P(max > j) = sum_j 1 - P(X <= j)^EP
        cdf += pmf
        expected_max += 1.0 - min(cdf, 1.0) ** s.expert_parallel
        pmf *= (n - j) / (j + 1) * p / (1.0 - p)
    return max(1.0, expected_max / (n * p))


def padded_expert_pairs(s: GpuSetup, tokens: float) -> float:
    """Token-expert rows the fused-MoE GEMMs compute: each touched expert's tokens rounded up to the kernel's
    M tile (uniform routing; the tile grows with the batch as vLLM's default config does)."""
    if not s.num_experts or tokens <= 0 or not s.moe_tile_tokens:
        return tokens * s.experts_per_token
    tile = next((t for limit, t in s.moe_tile_tokens if not limit or tokens <= limit), s.moe_tile_tokens[-1][1])
    touched = s.num_experts * expert_read_fraction(s.num_experts, s.experts_per_token, tokens)
    per_expert = tokens * s.experts_per_token / touched
    return touched * math.ceil(per_expert / tile - 1e-9) * tile


def block_fp8_linear_widths(model: ModelArchitecture, tp: int) -> tuple[list[int], list[int], list[int]]:
    """Input widths K per GPU of one layer's dense linears as vLLM shards them: attention (MLA: the fused q/kv
    down-projection, the q up-projection, o_proj; kv_b runs as absorbed bf16 bmms in decode; else qkv and o),
    the MLP of a dense layer (gate-up, down) and a MoE layer's shared experts (gate-up, down; none without).
    The router is a 16-bit linear, not counted."""
    h = model.hidden_size
    if model.kv_lora_rank is not None:
        v = model.v_head_dim or head_dim(model)
        attn = [h, model.q_lora_rank, model.num_attention_heads * v // tp] if model.q_lora_rank else \
            [h, h, model.num_attention_heads * v // tp]
    else:
        attn = [h, model.num_attention_heads * head_dim(model) // tp]
    mlp = [h, model.intermediate_size // tp]
    shared_n = (model.moe_intermediate_size or model.intermediate_size) * model.num_shared_experts
    shared = [h, shared_n // tp] if model.num_shared_experts else []
    return attn, mlp, shared


def linears_per_layer(model: ModelArchitecture) -> float:
    """Non-expert GEMMs of one decoder layer as vLLM builds it (fused where vLLM fuses): attention qkv and o (MLA:
    the fused q/kv down-projection, the q up-projection or q projection, kv_b and o), a dense layer's MLP gate-up
    and down, a MoE layer's router and its shared experts' gate-up and down; averaged over dense and MoE layers.
    The routed experts are the fused-MoE kernel's (its own fixed time); the LM head (one GEMM a step) is left out."""
    g = param_groups(model)
    attn = 4.0 if model.kv_lora_rank is not None else 2.0
    moe_share = g.moe_layers / g.num_layers if g.moe_layers else 0.0
    moe_layer = 1.0 + (2.0 if model.num_shared_experts else 0.0)
    return attn + (1.0 - moe_share) * 2.0 + moe_share * moe_layer


def elementwise_bytes_per_token(model: ModelArchitecture, tp: int) -> tuple[float, float, float]:
    """HBM bytes one token moves through a dense layer's elementwise ops on one GPU, counted as the H200 timing
    counted them (16-bit, each op reading its inputs and writing its outputs): residual add + RMSNorm twice (x and
    the residual in, both out: 4 x hidden each), SiLU-mul (gate and up in, product out: 3 x intermediate / tp) and
    RoPE of q and k in place (read and write: 2 x (q heads / tp + kv heads / tp, at least 1) x head_dim)."""
    d = head_dim(model)
    q, kv = model.num_attention_heads / tp, max(1.0, model.num_kv_heads / tp)
    return 2.0 * 2 * 4 * model.hidden_size, 2.0 * 3 * model.intermediate_size / tp, 2.0 * 2 * (q + kv) * d


def prefill_attention_s(k: LayerOps, rows: float, flops: float, peak_flops: float) -> float:
    """Causal prefill attention on one GPU (performance.yaml engines.<engine>.layer_ops): a time per prompt token
    per layer plus the FLOPs at the measured fraction of the 16-bit peak. Timed as FA2 through torch SDPA on one
    H200 (vLLM 0.34 runs FA3 on Hopper: an upper bound)."""
    return rows * k.attention_row_ns * 1e-9 + flops / (peak_flops * k.attention_compute_fraction)


def elementwise_s(k: LayerOps, nbytes: tuple[float, float, float], bandwidth: float) -> float:
    """The elementwise ops' bytes (norms, SiLU-mul, RoPE) each at its measured fraction of the bandwidth (timed as
    torch ops on one H200; vLLM runs fused kernels: an upper bound)."""
    norm, act, rope = nbytes
    return (norm / k.norm_read_fraction + act / k.activation_read_fraction + rope / k.rope_read_fraction) / bandwidth


def linear_layers_s(k: LinearKernel, gemms: float, weight_bytes: float, flops: float, bandwidth: float,
                    peak_flops: float, fp8: bool) -> float:
    """Time of `gemms` dense GEMMs on one GPU reading `weight_bytes` and computing `flops` (performance.yaml
    engines.<engine>.linear_kernel): a fixed time per GEMM, which neither the bytes nor tp divide, plus the
    larger of streaming the weights and computing. Timed on cuBLAS at M 1 - 256: at one token a GEMM of a few
    MB takes ~4.5 us more than its bytes at the streaming rate, which is why tp 8 is not 8x faster than tp 1."""
    fraction = k.fp8_compute_fraction if fp8 else k.compute_fraction
    return gemms * k.fixed_us * 1e-6 + max(weight_bytes / (bandwidth * k.read_fraction),
                                           flops / (peak_flops * fraction))


def moe_layer_ops_s(engine: str, model: ModelArchitecture, acc: GpuFigures, layers: int,
                    moe_layers: float, router_priced: bool = False) -> tuple[float, float]:
    """One stage's MoE-layer parts that the GEMM, attention and expert terms leave out, from the engine's timing
    (performance.yaml engines.<engine>.moe_layer_ops): per MoE layer the router GEMM (unless `router_priced`: the
    engine's linear_kernel already counts it among the layer's GEMMs) and kernels_per_layer small kernels at
    their launch-bound floor, per MLA layer the two absorbed decode bmms (seconds); and per token in
    the step the MoE layers' two residual-add + RMSNorm passes (read hidden and residual, write both, 16-bit:
    8 x hidden bytes each) at the measured share of the datasheet bandwidth (seconds per token). (0, 0) for dense
    models and engines without a timing."""
    ops = engine_constants(engine).moe_layer_ops
    if ops is None or not moe_layers or acc.memory_bandwidth_gb_per_s is None:
        return 0.0, 0.0
    router = 0.0 if router_priced else ops.router_us
    fixed = moe_layers * (router + ops.kernels_per_layer * ops.kernel_us) * 1e-6
    if model.kv_lora_rank is not None:
        fixed += layers * ops.mla_absorb_bmm_us * 1e-6
    per_token = moe_layers * 2 * 8 * model.hidden_size / (
        acc.memory_bandwidth_gb_per_s * GIGA * ops.norm_bandwidth_fraction)
    return fixed, per_token


def moe_kernel_s(k: MoeKernel, layers: float, touched_bytes: float, padded_flops: float, bandwidth: float,
                 peak_flops: float, fp8: bool, activation_bytes: float = 0.0) -> float:
    """Time of `layers` fused-MoE layers on one GPU: a fixed time per layer plus, per layer, the larger of reading
    the touched experts and computing their padded tiles, plus the routed pairs' intermediate tensors going
    through HBM between the layer's kernels (performance.yaml engines.<engine>.moe_kernel). The last term is
    what prefill-sized batches add: 0.9 ms of DeepSeek-R1 tp8's 4.4 ms layer at 16,384 tokens on the H200."""
    fraction = k.fp8_compute_fraction if fp8 else k.compute_fraction
    return layers * k.layer_fixed_us * 1e-6 + max(touched_bytes / (bandwidth * k.read_fraction),
                                                   padded_flops / (peak_flops * fraction)) + activation_bytes / (
        bandwidth * k.read_fraction)


def peak_fractions(s: GpuSetup) -> tuple[float, float]:
    """(largest share of the datasheet bandwidth, largest share of the tensor peak) at which stage_step_s runs any
    kernel of this setup: the KV read, the dense weights (measured linear kernel or the fitted roofline), the
    routed experts, the elementwise ops; attention, the linears' and experts' FLOPs. A speed factor past 1 / either
    would take that kernel past 100 % of its peak (calibration's physical bounds)."""
    e = engine_constants(s.engine)
    lk = e.linear_kernel if s.linears_measured else None
    bandwidth = [e.kv_bandwidth_fraction, lk.read_fraction if lk is not None else e.decode_bandwidth_fraction]
    compute = [e.prefill_compute_fraction]  # decode attention's FLOPs, and the linears' without a measured kernel
    if lk is not None:
        compute.append(lk.fp8_compute_fraction if s.fp8_tensor_math else lk.compute_fraction)
    if s.num_experts:
        if e.moe_kernel is not None:
            bandwidth.append(e.moe_kernel.read_fraction)
            compute.append(e.moe_kernel.fp8_compute_fraction if s.fp8_tensor_math else e.moe_kernel.compute_fraction)
        elif e.moe_bandwidth_fraction is not None:
            bandwidth.append(e.moe_bandwidth_fraction)
        if e.moe_layer_ops is not None:
            bandwidth.append(e.moe_layer_ops.norm_bandwidth_fraction)
    if e.layer_ops is not None and s.layer_ops_bytes_per_token[0] and s.linears_measured:
        ops = e.layer_ops
        bandwidth += [ops.norm_read_fraction, ops.activation_read_fraction, ops.rope_read_fraction]
        compute.append(ops.attention_compute_fraction)
    return max(bandwidth), max(compute)


def stage_step_s(
    s: GpuSetup,
    decode_seqs: float,
    decode_ctx_tokens: float,
    prefill_tokens: float,
    prefill_ctx_tokens: float,
) -> float:
    """Time of one engine step on one pipeline stage: roofline of compute and memory, plus comm and overheads.

    decode_seqs sequences each attend `decode_ctx_tokens` cached tokens; `prefill_tokens` prompt tokens
    (chunked prefill mixed into the same step) attend `prefill_ctx_tokens` on average (causal: half the prompt).
    """
    e = engine_constants(s.engine)
    tokens = decode_seqs + prefill_tokens
    gpus = s.tp * s.pp
    flops_per_s = s.peak_flops * e.prefill_compute_fraction
    # The linear layers (GEMMs) and attention are separate kernels that run one after the other, so each gets
    # its own roofline and their times add: a step is not max(all FLOPs, all bytes).
    # Routed experts see tokens x k / E rows each; the fused-MoE kernel computes whole M tiles, so at a few tokens
    # per expert most of a tile is padding (compute, not bytes: a step that was weight-read bound can become
    # compute bound on GPUs with less tensor throughput per byte).
    if e.moe_kernel is not None and s.num_experts:
        gemm = _dense_gemms_and_measured_moe_s(s, e, e.moe_kernel, tokens)
    else:
        # the busiest GPU's routed pairs over a tp slice's (1 with tp-sharded experts or an even EP split)
        busiest = busiest_rank_factor(s, tokens)
        uneven = s.expert_share_gpu * s.tp * busiest
        routed = s.expert_flops_per_pair * tokens * s.experts_per_token
        padding = s.expert_flops_per_pair * (padded_expert_pairs(s, tokens) - tokens * s.experts_per_token)
        gemm_flops = (s.dense_flops_per_token * tokens + (routed + padding) * (uneven - 1.0) + padding) / gpus
        experts_s = 0.0
        if s.num_experts:
            experts_read = (s.expert_bytes_gpu + (busiest - 1.0) * s.routed_expert_bytes_gpu) * expert_read_fraction(
                s.num_experts, s.experts_per_token, tokens)
            assert e.moe_bandwidth_fraction is not None  # EngineConstants gives it when there is no moe_kernel
            experts_s = experts_read / (s.bandwidth_bytes_per_s * e.moe_bandwidth_fraction)
        lk = e.linear_kernel if s.linears_measured else None
        if lk is not None:
            gemm_flops -= s.lm_head_flops_per_token * prefill_tokens / gpus
            # the weights' streaming time is what the measured GEMMs read; routed experts (not measured here)
            # stream beside them at moe_bandwidth_fraction inside the same roofline
            k_frac = lk.fp8_compute_fraction if s.fp8_tensor_math else lk.compute_fraction
            gemm = s.linears_stage * lk.fixed_us * 1e-6 + max(
                gemm_flops / (s.peak_flops * k_frac),
                s.weight_bytes_dense_gpu / (s.bandwidth_bytes_per_s * lk.read_fraction) + experts_s)
        else:
            gemm = max(gemm_flops / flops_per_s,
                       s.weight_bytes_dense_gpu / (s.bandwidth_bytes_per_s * e.decode_bandwidth_fraction) + experts_s)
        gemm = max(gemm, s.block_fp8_linear_floor_s)
    # Only beside the measured linears: the fitted fractions of the other kernels' roofline (Lambda) already carry
    # attention and the elementwise work, and pricing them again would count them twice.
    ops = e.layer_ops if s.layer_ops_bytes_per_token[0] and s.linears_measured else None
    layers_per_stage = math.ceil(s.num_layers / s.pp)
    if ops is None:
        attn_compute = s.attn_flops_per_token_ctx * (
            decode_seqs * decode_ctx_tokens + prefill_tokens * prefill_ctx_tokens) / gpus / flops_per_s
        t_elementwise = 0.0
    else:
        # prompt tokens' causal attention and every token's elementwise ops as their H200 timing shows them
        attn_compute = s.attn_flops_per_token_ctx * decode_seqs * decode_ctx_tokens / gpus / flops_per_s + \
            prefill_attention_s(ops, prefill_tokens * layers_per_stage,
                                s.attn_flops_per_token_ctx * prefill_tokens * prefill_ctx_tokens / gpus,
                                s.attention_peak_flops)
        t_elementwise = elementwise_s(ops, tuple(tokens * b for b in s.layer_ops_bytes_per_token),  # type: ignore[arg-type]
                                      s.bandwidth_bytes_per_s)
    # Decode reads every cached token; prefill writes its own tokens' KV once (flash attention keeps the
    # prompt's K/V tiles on chip, so the quadratic part is compute, not HBM traffic).
    kv_read = s.kv_bytes_per_token_gpu * (decode_seqs * decode_ctx_tokens + prefill_tokens)
    attn_memory = kv_read / (s.bandwidth_bytes_per_s * e.kv_bandwidth_fraction)
    t_comm = tp_comm_s(s, tokens)
    t_host = e.step_overhead_ms * 1e-3 / s.pp + e.per_seq_overhead_ms * 1e-3 * decode_seqs / s.pp
    t_launch = e.per_layer_overhead_us * 1e-6 * layers_per_stage + s.layer_floor_s
    return gemm + max(attn_compute, attn_memory) + t_elementwise + t_comm + t_host + t_launch


def tp_comm_s(s: GpuSetup, tokens: float) -> float:
    """The tp group's two ring all-reduces a layer of one stage (attention output, MLP / MoE output) for a step of
    `tokens` tokens. Expert parallelism with one engine (dp 1) keeps them as they are: the tokens are on every rank
    already, each rank runs its own experts on them and the partial outputs are all-reduced over the tp group
    (vLLM 0.34.0 fused_moe/runner/moe_runner.py: do_naive_dispatch_combine and the all2all kernels need dp > 1 or
    sequence-parallel MoE, which needs dp > 1 too; _maybe_reduce_final_output all-reduces when ep_size > 1)."""
    if s.tp == 1:
        return 0.0
    message = tokens * s.hidden_size * s.activation_bytes
    ring = 2.0 * (s.tp - 1) / s.tp * message / s.link_bytes_per_s
    return 2 * math.ceil(s.num_layers / s.pp) * (ring + s.allreduce_latency_s)


def _dense_gemms_and_measured_moe_s(s: GpuSetup, e: EngineConstants, k: MoeKernel, tokens: float) -> float:
    """The non-expert GEMMs (and shared experts, always read) on their roofline, then the routed experts as the
    measured fused-MoE kernel runs them, then the MoE layers' router, small kernels and norms as measured
    (moe_layer_ops_s): separate kernels, so the times add."""
    gpus = s.tp * s.pp
    routed_bytes = s.routed_expert_bytes_gpu
    routed_flops = s.expert_flops_per_pair * tokens * s.experts_per_token
    dense_flops = (s.dense_flops_per_token * tokens - routed_flops) / gpus
    dense_bytes = s.weight_bytes_dense_gpu + s.expert_bytes_gpu - routed_bytes
    if e.linear_kernel is not None and s.linears_measured:
        dense = linear_layers_s(e.linear_kernel, s.linears_stage, dense_bytes, dense_flops, s.bandwidth_bytes_per_s,
                                s.peak_flops, s.fp8_tensor_math)
    else:
        dense = max(dense_flops / (s.peak_flops * e.prefill_compute_fraction),
                    dense_bytes / (s.bandwidth_bytes_per_s * e.decode_bandwidth_fraction))
    busiest = busiest_rank_factor(s, tokens)  # EP: the GPU touching the most of its experts sets the step
    touched = routed_bytes * expert_read_fraction(s.num_experts, s.experts_per_token, tokens) * busiest
    padded = s.expert_flops_per_pair * padded_expert_pairs(s, tokens) * s.expert_share_gpu / s.pp * busiest
    activation = tokens * s.experts_per_token * s.moe_activation_bytes_per_pair * s.moe_layers_stage * busiest
    layer_ops = s.moe_layer_ops_fixed_s + tokens * s.moe_layer_ops_s_per_token
    return max(dense, s.block_fp8_linear_floor_s) + moe_kernel_s(
        k, s.moe_layers_stage, touched, padded, s.bandwidth_bytes_per_s, s.peak_flops, s.fp8_tensor_math,
        activation) + layer_ops


def token_step_s(
    s: GpuSetup,
    decode_seqs: float,
    decode_ctx_tokens: float,
    prefill_tokens: float,
    prefill_ctx_tokens: float,
) -> float:
    """Wall time for every running sequence to advance one token: pp stages in series plus hops.

    With pp > 1 vLLM keeps pp micro-batches in flight; each stage processes decode_seqs / pp at a time.
    """
    host = engine_constants(s.engine).overlapped_host_us_per_seq * 1e-6 * decode_seqs
    if s.pp == 1:
        return max(stage_step_s(s, decode_seqs, decode_ctx_tokens, prefill_tokens, prefill_ctx_tokens), host)
    micro = stage_step_s(s, decode_seqs / s.pp, decode_ctx_tokens, prefill_tokens / s.pp, prefill_ctx_tokens)
    hops = (s.pp - 1) * (s.cross_node_hop_s if s.nodes > 1 else s.allreduce_latency_s)
    return max(s.pp * micro + hops, host)


@dataclass(frozen=True)
class GpuSpeed:
    """Speed of one replica at one steady concurrency."""

    ttft_s: float
    tpot_s: float
    output_tokens_per_s: float
    compute_bound: bool
    prefill_s: float


def steady_state(s: GpuSetup, input_len: int, output_len: int, concurrency: int,
                 cached_tokens: int = 0) -> GpuSpeed:
    """Continuous batching at `concurrency` running requests with chunked prefill mixed into decode steps.

    In steady state every step carries `concurrency` decode tokens plus, on average, concurrency x (input -
    cached) / output prompt tokens of the requests that replace finished ones. `cached_tokens` of each prompt are
    already in the prefix cache: only the rest is computed, each computed token attending the cached prefix plus
    half of the new part (reading the cached prefix's KV once per request is left out: a few MB against a
    prefill's compute); decode still attends the whole context.
    """
    if not 0 <= cached_tokens < input_len:
        raise ValueError(f"cached tokens must be in [0, {input_len}) (got {cached_tokens})")
    out = max(output_len, 1)
    mean_ctx = input_len + out / 2.0
    new = input_len - cached_tokens
    prefill_ctx = cached_tokens + new / 2.0
    prefill_per_step = concurrency * new / out
    tpot = token_step_s(s, concurrency, mean_ctx, prefill_per_step, prefill_ctx)
    alone = token_step_s(s, 0.0, 0.0, float(new), prefill_ctx)
    e = engine_constants(s.engine)
    # A new prompt is prefilled in the next step(s): its own prefill plus, on average, half a busy step, plus the
    # serving path outside the engine steps (HTTP, tokenisation, streaming the first chunk).
    ttft = alone + (0.5 * tpot if concurrency > 1 else 0.0) + first_token_s(s)
    dense = (s.dense_flops_per_token * (concurrency + prefill_per_step)) / (s.tp * s.pp)
    lk = e.linear_kernel if s.linears_measured else None
    compute, read = (e.prefill_compute_fraction, e.decode_bandwidth_fraction) if lk is None else (
        lk.fp8_compute_fraction if s.fp8_tensor_math else lk.compute_fraction, lk.read_fraction)
    compute_bound = dense / (s.peak_flops * compute) > s.weight_bytes_dense_gpu / (s.bandwidth_bytes_per_s * read)
    return GpuSpeed(
        ttft_s=ttft,
        tpot_s=tpot,
        output_tokens_per_s=concurrency / tpot,
        compute_bound=compute_bound,
        prefill_s=alone,
    )


@dataclass(frozen=True)
class DrainResult:
    """Outcome of serving a fixed set of requests that all arrive at once (offline benchmark)."""

    duration_s: float
    output_tokens: int
    output_tokens_per_s: float
    mean_itl_s: float
    """Token-weighted mean inter-token latency."""
    prompt_s: float = 0.0
    """The part of duration_s the prompt tokens cost: each step less the same step without its prompt tokens."""
    ttfts_s: tuple[float, ...] = ()
    """Each request's time to first token, in the order sent: from when its client sent it (a burst: t = 0) to the
    end of the step that ran its prompt, plus the serving path (first_token_s) once."""

    def median_ttft_s(self, empty_replies: int = 0) -> float:
        """Median TTFT as `benchmark_serving` reports it when `empty_replies` requests streamed no token: it counts
        each of them with a TTFT of 0 (they are not in the replay, which serves lengths of at least one token)."""
        return statistics.median([0.0] * empty_replies + list(self.ttfts_s)) if self.ttfts_s else 0.0

    def output_tokens_per_s_at(self, decode_factor: float, prefill_factor: float) -> float:
        """Output tok/s with a calibration's speed factors: the prompt tokens' part of every step at the prompt
        factor, the rest at the generation factor. The schedule does not depend on speed, so these are the same
        steps, each faster or slower."""
        t = (self.duration_s - self.prompt_s) / decode_factor + self.prompt_s / prefill_factor
        return self.output_tokens / t if t > 0 else 0.0


def simulate_drain(
    s: GpuSetup,
    input_lens: Sequence[int],
    output_lens: Sequence[int],
    max_num_seqs: int,
    kv_capacity_tokens: int,
    max_batched_tokens: int = 8192,
    clients: int | None = None,
) -> DrainResult:
    """Step through continuous batching of requests all queued at t=0 (what `benchmark_serving --request-rate inf`
    and `trtllm-bench` measure): admit while slots and KV allow, prefill in chunks, decode until done.

    `clients`: a closed loop instead (`vllm bench serve --max-concurrency`): that many requests are in flight, each
    sent when one finishes, and reaching the scheduler after the serving path (first_token_s: HTTP, tokenisation).
    The run's tail, when fewer requests are left than clients, runs below the full batch, as the burst's does.
    """
    queue = list(zip(input_lens, output_lens, strict=True))
    queue.reverse()
    # when each request sent and not yet admitted reaches the scheduler, in the order sent
    path = first_token_s(s) if clients else 0.0
    visible = [path] * min(clients or len(queue), len(queue))
    # a client sees the serving path once in a TTFT: a loop's request reaches the scheduler `path` after it was sent
    # (t - its visible time + path), a burst's at t = 0 with the path still to add (t + first_token_s)
    first_token = first_token_s(s)
    ttfts: list[float] = []
    admitted: list[float] = []  # when each request admitted this step reached the scheduler
    running: list[list[int]] = []  # [context_tokens, remaining_output]
    t = 0.0
    prompt_s = 0.0
    itl_weighted = 0.0
    tokens_out = 0
    while queue or running:
        if not running and visible and visible[0] > t:
            t = visible[0]  # idle until the next request arrives
        used = sum(r[0] + r[1] for r in running)
        prefill_tokens = 0
        prefill_ctx = 0.0
        while queue and len(running) < max_num_seqs and visible and visible[0] <= t:
            inp, out = queue[-1]
            if used + inp + out > kv_capacity_tokens and running:
                break
            if prefill_tokens + inp > max_batched_tokens and prefill_tokens:
                break
            queue.pop()
            admitted.append(visible.pop(0))
            running.append([inp, out])
            used += inp + out
            prefill_tokens += inp
            prefill_ctx += inp * inp / 2.0
        decoding = [r for r in running if r[1] > 0]
        n = len(decoding)
        ctx = sum(r[0] for r in decoding) / n if n else 0.0
        step = token_step_s(s, n, ctx, prefill_tokens, prefill_ctx / prefill_tokens if prefill_tokens else 0.0)
        t += step
        ttfts += [t - seen + first_token for seen in admitted]
        admitted.clear()
        if prefill_tokens:
            prompt_s += step - (token_step_s(s, n, ctx, 0.0, 0.0) if n else 0.0)
        itl_weighted += step * n
        tokens_out += n
        for r in decoding:
            r[0] += 1
            r[1] -= 1
        finished = len(running)
        running = [r for r in running if r[1] > 0]
        if clients:  # each finished request's client sends the next one
            finished -= len(running)
            visible += [t + path] * min(finished, len(queue) - len(visible))
    return DrainResult(
        duration_s=t,
        output_tokens=tokens_out,
        output_tokens_per_s=tokens_out / t if t > 0 else 0.0,
        mean_itl_s=itl_weighted / tokens_out if tokens_out else 0.0,
        prompt_s=prompt_s,
        ttfts_s=tuple(ttfts),
    )
