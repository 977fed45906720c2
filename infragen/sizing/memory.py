"""Memory model: weight bytes by precision, KV bytes per token, and vLLM's / llama.cpp's budget split.

Pure arithmetic on a ModelArchitecture; cached on hashable keys. No I/O beyond the cached constants file,
no pydantic objects built per call, no printing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from infragen.architecture import ModelArchitecture
from infragen.errors import InputError
from infragen.sizing.constants import load_constants
from infragen.units import DTYPE_BYTES, GIB

#: vLLM weight formats (safetensors checkpoints).
VLLM_WEIGHT_FORMATS = ("bf16", "fp16", "fp8", "int8", "int4-awq", "int4-gptq")
#: GGUF formats llama.cpp loads (F16/BF16 GGUF files included).
GGUF_FORMATS = ("q4_k_m", "q5_k_m", "q8_0", "q4_0", "fp16", "bf16")

# llama.cpp block layouts (ggml-common.h): bytes per block / weights per block.
#   Q4_0: fp16 d + 16 B of nibbles per 32 weights       -> 18/32  = 0.5625 B
#   Q8_0: fp16 d + 32 B of int8 per 32 weights          -> 34/32  = 1.0625 B
#   Q4_K: 2 x fp16 (d, dmin) + 12 B scales + 128 B qs per 256 -> 144/256 = 0.5625 B (4.5 bpw)
#   Q5_K: 2 x fp16 + 12 B scales + 32 B qh + 128 B qs per 256 -> 176/256 = 0.6875 B (5.5 bpw)
#   Q6_K: 128 B ql + 64 B qh + 16 B scales + fp16 d per 256   -> 210/256 = 0.8203 B (6.5625 bpw)
GGML_BYTES_PER_WEIGHT: dict[str, float] = {
    "q4_0": 18 / 32,
    "q8_0": 34 / 32,
    "q4_k": 144 / 256,
    "q5_k": 176 / 256,
    "q6_k": 210 / 256,
    "f16": 2.0,
}


@dataclass(frozen=True)
class ParamGroups:
    """Parameter counts of one model, split by how quantization and parallelism treat them."""

    embed: int
    """Token embedding matrix (vocab x hidden)."""
    lm_head: int
    """Output projection (0 when tied to the embedding)."""
    attn_per_layer: int
    """q/k/v/o (or MLA) projection weights of one layer, excluding the k/v part counted separately."""
    kv_proj_per_layer: int
    """k and v projection weights of one layer (replicated when tp > num_kv_heads); 0 for MLA."""
    dense_mlp_per_layer: int
    """MLP weights of one dense layer."""
    moe_experts_per_layer: int
    """All routed + shared expert weights of one MoE layer."""
    moe_active_per_layer: int
    """Expert weights one token touches in one MoE layer (top-k + shared)."""
    router_per_layer: int
    """MoE router (kept in 16 bits by vLLM's quantized checkpoints)."""
    ffn_down_per_layer: int
    """Down projection of one layer (llama.cpp's Q4_K_M/Q5_K_M give it more bits)."""
    attn_v_per_layer: int
    """v projection of one layer (llama.cpp's Q4_K_M/Q5_K_M give it more bits)."""
    norms_per_layer: int
    """RMSNorm weights of one layer."""
    dense_layers: int
    """Layers with a dense MLP."""
    moe_layers: int
    """Layers with routed experts."""
    final_norm: int = 0
    """The norm before lm_head."""

    @property
    def num_layers(self) -> int:
        return self.dense_layers + self.moe_layers

    def linear_total(self) -> int:
        per_layer_common = self.attn_per_layer + self.kv_proj_per_layer
        return (
            self.num_layers * per_layer_common
            + self.dense_layers * self.dense_mlp_per_layer
            + self.moe_layers * self.moe_experts_per_layer
        )

    def total(self) -> int:
        return (
            self.embed
            + self.lm_head
            + self.linear_total()
            + self.moe_layers * self.router_per_layer
            + self.num_layers * self.norms_per_layer
            + self.final_norm
        )

    def active(self) -> int:
        """Parameters one token multiplies (embedding lookup excluded, lm_head included)."""
        per_layer_common = self.attn_per_layer + self.kv_proj_per_layer
        return (
            self.lm_head
            + self.embed * (self.lm_head == 0)
            + self.num_layers * per_layer_common
            + self.dense_layers * self.dense_mlp_per_layer
            + self.moe_layers * (self.moe_active_per_layer + self.router_per_layer)
        )


def head_dim(model: ModelArchitecture) -> int:
    return model.head_dim or model.hidden_size // model.num_attention_heads


def kv_heads(model: ModelArchitecture) -> int:
    return model.num_kv_heads or model.num_attention_heads


@lru_cache(maxsize=512)
def param_groups(model: ModelArchitecture) -> ParamGroups:
    """Count parameters by group from the architecture (HF module shapes)."""
    h = model.hidden_size
    nh = model.num_attention_heads
    hd = head_dim(model)
    nkv = kv_heads(model)
    embed = model.vocab_size * h
    lm_head = 0 if model.tie_word_embeddings else model.vocab_size * h
    if model.kv_lora_rank is not None:
        rope = model.qk_rope_head_dim or 0
        nope = model.qk_nope_head_dim or hd
        v_dim = model.v_head_dim or hd
        q_dim = nh * (nope + rope)
        q = h * model.q_lora_rank + model.q_lora_rank * q_dim if model.q_lora_rank else h * q_dim
        kv_a = h * (model.kv_lora_rank + rope)
        kv_b = model.kv_lora_rank * nh * (nope + v_dim)
        o = nh * v_dim * h
        attn = q + kv_a + kv_b + o
        kv_proj = 0
        attn_v = model.kv_lora_rank * nh * v_dim
        norms = 2 * h + model.kv_lora_rank + (model.q_lora_rank or 0)
    else:
        attn = 2 * h * nh * hd
        kv_proj = 2 * h * nkv * hd
        if model.attention_bias:
            attn += nh * hd
            kv_proj += 2 * nkv * hd
        attn_v = h * nkv * hd
        norms = 2 * h
    mats = 3 if model.mlp_gated else 2
    dense_mlp = mats * h * model.intermediate_size
    if model.num_experts > 0:
        moe_layers = model.num_layers - model.first_dense_layers
        dense_layers = model.first_dense_layers
        expert = mats * h * (model.moe_intermediate_size or model.intermediate_size)
        moe_all = (model.num_experts + model.num_shared_experts) * expert
        moe_active = (model.num_experts_per_token + model.num_shared_experts) * expert
        router = h * model.num_experts
        down = expert * (model.num_experts + model.num_shared_experts) // mats
    else:
        moe_layers, dense_layers = 0, model.num_layers
        moe_all = moe_active = router = 0
        down = h * model.intermediate_size
    return ParamGroups(
        embed=embed,
        lm_head=lm_head,
        attn_per_layer=attn,
        kv_proj_per_layer=kv_proj,
        dense_mlp_per_layer=dense_mlp,
        moe_experts_per_layer=moe_all,
        moe_active_per_layer=moe_active,
        router_per_layer=router,
        ffn_down_per_layer=down,
        attn_v_per_layer=attn_v,
        norms_per_layer=norms,
        dense_layers=dense_layers,
        moe_layers=moe_layers,
        final_norm=h,
    )


def linear_bytes_per_weight(precision: str) -> float:
    """Bytes per weight of a quantized linear layer in vLLM, scales and zero points included."""
    if precision in ("bf16", "fp16"):
        return 2.0
    if precision in ("fp8", "int8"):
        return 1.0  # per-tensor / per-channel scales are < 0.1 % of the weights
    if precision in ("int4-awq", "int4-gptq"):
        # 4-bit weights + per group of 128: one fp16 scale and one packed 4-bit zero point.
        return 0.5 + (2.0 + 0.5) / 128
    known = ", ".join(VLLM_WEIGHT_FORMATS)
    raise InputError(f"precision {precision!r} is not a vLLM weight format; use one of {known}")


def default_kv_dtype(precision: str, kv_cache_dtype: str, engine: str) -> str:
    """Resolve `auto` the way the engine does: the model dtype (fp16 for fp16/AWQ/GPTQ checkpoints, else bf16)."""
    if engine == "llama.cpp":
        return "fp16"  # llama.cpp's default cache type is f16
    if kv_cache_dtype not in ("auto", "fp8", "bf16", "fp16"):
        raise InputError(f"kv cache dtype {kv_cache_dtype!r} is not one of auto, fp8, bf16, fp16")
    if kv_cache_dtype != "auto":
        return kv_cache_dtype
    return "fp16" if precision in ("fp16", "int4-awq", "int4-gptq") else "bf16"


@lru_cache(maxsize=2048)
def weight_bytes_per_gpu(
    model: ModelArchitecture, precision: str, tp: int, pp: int, fp8_scope: str = "all-linear"
) -> float:
    """Weights held by the most loaded GPU under vLLM (vocab-parallel embeddings, replicated KV heads).

    `fp8_scope="mlp"` models checkpoints that quantize only MLP weights (Meta's official Llama-3.1 FP8).
    """
    g = param_groups(model)
    lin = linear_bytes_per_weight(precision)
    half = 2.0  # embeddings, lm_head, norms and routers stay in the 16-bit model dtype
    nkv = kv_heads(model)
    kv_shards = min(tp, nkv)  # tp > num_kv_heads replicates k/v heads
    attn_lin = half if (precision == "fp8" and fp8_scope == "mlp") else lin
    per_layer_attn = g.attn_per_layer * attn_lin / tp + g.kv_proj_per_layer * attn_lin / kv_shards
    per_dense = g.dense_mlp_per_layer * lin / tp
    per_moe = g.moe_experts_per_layer * lin / tp + g.router_per_layer * half
    layers_per_stage = math.ceil(g.num_layers / pp)
    # The most loaded stage is taken as an average mix of dense/MoE layers (first_dense_layers is small).
    dense_share = g.dense_layers / g.num_layers
    per_layer = per_layer_attn + dense_share * per_dense + (1 - dense_share) * per_moe + g.norms_per_layer * half
    ends = (g.embed + g.lm_head) if pp == 1 else max(g.embed, g.lm_head)
    return layers_per_stage * per_layer + ends * half / tp


@lru_cache(maxsize=512)
def gguf_weight_bytes(model: ModelArchitecture, precision: str) -> float:
    """GGUF file size of the model for a llama.cpp quant type (llama-quant.cpp's default tensor types).

    Q4_K_M / Q5_K_M use Q6_K for output.weight and for attn_v / ffn_down in about half of the layers
    (`use_more_bits`); Q4_0 keeps output.weight in Q6_K; Q8_0 and F16 quantize everything alike.
    """
    g = param_groups(model)
    linear = g.linear_total()
    norms = g.num_layers * g.norms_per_layer + g.moe_layers * g.router_per_layer
    bpw = GGML_BYTES_PER_WEIGHT
    output = g.lm_head if g.lm_head else 0
    if precision in ("fp16", "bf16"):
        return 2.0 * g.total()
    if precision == "q8_0":
        return bpw["q8_0"] * (g.embed + output + linear) + 4.0 * norms
    if precision == "q4_0":
        return bpw["q4_0"] * (g.embed + linear) + bpw["q6_k"] * output + 4.0 * norms
    if precision in ("q4_k_m", "q5_k_m"):
        base = bpw["q4_k"] if precision == "q4_k_m" else bpw["q5_k"]
        more_bits = 0.5 * g.num_layers * (g.attn_v_per_layer + g.ffn_down_per_layer)
        return base * (g.embed + linear - more_bits) + bpw["q6_k"] * (more_bits + output) + 4.0 * norms
    known = ", ".join(GGUF_FORMATS)
    raise InputError(f"precision {precision!r} is not a GGUF type llama.cpp loads; use one of {known}")


@lru_cache(maxsize=2048)
def kv_bytes_per_token_per_layer(model: ModelArchitecture, kv_dtype_bytes: float, tp: int) -> float:
    """KV bytes one token occupies in one layer on one GPU (MLA latent is replicated on every TP rank)."""
    if model.kv_lora_rank is not None:
        return (model.kv_lora_rank + (model.qk_rope_head_dim or 0)) * kv_dtype_bytes
    heads_per_gpu = math.ceil(kv_heads(model) / tp)
    return 2 * heads_per_gpu * head_dim(model) * kv_dtype_bytes


def kv_bytes_per_token(model: ModelArchitecture, kv_dtype_bytes: float) -> int:
    """KV bytes of one token for the whole model (all layers, no parallelism)."""
    return round(kv_bytes_per_token_per_layer(model, kv_dtype_bytes, 1) * model.num_layers)


def window_layers(model: ModelArchitecture) -> int:
    """Layers using sliding-window attention (0 = all layers attend the full context)."""
    if model.sliding_window is None:
        return 0
    if model.sliding_window_layers is None:
        return model.num_layers
    return min(model.sliding_window_layers, model.num_layers)


def sequence_kv_layer_tokens(model: ModelArchitecture, seq_len: int) -> float:
    """Sum over layers of cached tokens for one sequence, in units of 'layer-tokens' (windows applied)."""
    swa = window_layers(model)
    full = model.num_layers - swa
    windowed = min(seq_len, model.sliding_window) if model.sliding_window else seq_len
    return full * seq_len + swa * windowed


def activation_peak_bytes(model: ModelArchitecture, tp: int, batched_tokens: int, max_num_seqs: int) -> float:
    """vLLM's profile-run peak: one forward over `batched_tokens` tokens plus fp32 logits of the sampler."""
    h = model.hidden_size
    hd = head_dim(model)
    qkv = (model.num_attention_heads + 2 * kv_heads(model)) * hd / tp
    if model.num_experts > 0:
        inter = 3 * (model.moe_intermediate_size or model.intermediate_size) * model.num_experts_per_token / tp
        inter = max(inter, 3 * model.intermediate_size / tp if model.first_dense_layers else 0.0)
    else:
        inter = 3 * model.intermediate_size / tp
    hidden_bytes = batched_tokens * (inter + 4 * h + qkv) * 2.0
    logits_bytes = max_num_seqs * model.vocab_size / tp * 4.0 * 2  # fp32 logits + softmax copy
    return hidden_bytes + logits_bytes


@dataclass(frozen=True)
class VllmMemory:
    """Per-GPU split of one vLLM replica (cached; the public MemoryEstimate is built from it)."""

    weights_bytes: float
    activation_bytes: float
    overhead_bytes: float
    budget_bytes: float
    kv_budget_bytes: float
    kv_bytes_per_token_gpu: float
    num_blocks: int
    capacity_tokens: int


def vllm_profile_tokens(model: ModelArchitecture, max_model_len: int | None) -> int:
    """Tokens of the one forward pass vLLM profiles at start-up, as infragen's flags set it (engine_args).

    vLLM 0.7's V0 engine turns chunked prefill on by itself only above 32768 tokens of context (EngineArgs.
    create_engine_config) and otherwise schedules whole prompts of up to max_model_len; infragen pins it
    instead, so the memory and speed model's budget of `max_num_batched_tokens` is what the server runs with.
    Sliding-window models stay off chunked prefill (vLLM excludes them from it), so a whole prompt is one batch.
    """
    budget = load_constants().vllm_memory.max_num_batched_tokens
    if model.sliding_window is not None:
        return max(budget, max_model_len or model.max_position_embeddings)
    return budget


@lru_cache(maxsize=8192)
def vllm_memory(
    model: ModelArchitecture,
    memory_per_gpu_gib: float,
    precision: str,
    kv_dtype: str,
    tp: int,
    pp: int,
    gpu_memory_utilization: float,
    fp8_scope: str = "all-linear",
    profile_tokens: int | None = None,
    count_cuda_graphs: bool = True,
) -> VllmMemory:
    """Split `gpu_memory_utilization x total memory` of one GPU into weights, overheads and KV blocks.

    `profile_tokens` overrides the profiling batch (vLLM 0.5 without chunked prefill used max_model_len);
    `count_cuda_graphs=False` models releases that captured CUDA graphs outside the KV budget (vLLM 0.5).
    """
    c = load_constants().vllm_memory
    weights = weight_bytes_per_gpu(model, precision, tp, pp, fp8_scope)
    act = activation_peak_bytes(model, tp, profile_tokens or c.max_num_batched_tokens, c.max_num_seqs)
    graphs = c.cuda_graph_gib * GIB if count_cuda_graphs else 0.0
    fixed = c.non_torch_gib * GIB + graphs + (c.nccl_gib * GIB if tp * pp > 1 else 0.0)
    overhead = act + fixed
    budget = gpu_memory_utilization * memory_per_gpu_gib * GIB
    kv_budget = budget - weights - overhead
    layers_per_gpu = math.ceil(model.num_layers / pp)
    per_token = kv_bytes_per_token_per_layer(model, DTYPE_BYTES[kv_dtype], tp) * layers_per_gpu
    block_bytes = c.block_size_tokens * per_token
    blocks = max(0, int(kv_budget // block_bytes)) if kv_budget > 0 else 0
    return VllmMemory(
        weights_bytes=weights,
        activation_bytes=act,
        overhead_bytes=overhead,
        budget_bytes=budget,
        kv_budget_bytes=max(kv_budget, 0.0),
        kv_bytes_per_token_gpu=per_token,
        num_blocks=blocks,
        capacity_tokens=blocks * c.block_size_tokens,
    )


def max_sequences(model: ModelArchitecture, capacity_tokens: int, seq_len: int, block_size: int) -> int:
    """How many sequences of `seq_len` tokens fit in `capacity_tokens` of full-attention KV (windows applied)."""
    if seq_len <= 0:
        return 0
    blocks_per_seq = math.ceil(seq_len / block_size)
    layer_tokens = sequence_kv_layer_tokens(model, blocks_per_seq * block_size)
    per_seq_tokens = layer_tokens / model.num_layers  # equivalent full-attention tokens
    return int(capacity_tokens // per_seq_tokens) if per_seq_tokens > 0 else 0


def largest_model_len(model: ModelArchitecture, capacity_tokens: int) -> int:
    """Largest max_model_len one sequence can reach in the KV cache, capped by the trained context."""
    ctx = model.max_position_embeddings
    if capacity_tokens <= 0:
        return 0
    swa = window_layers(model)
    full = model.num_layers - swa
    if full == 0 and model.sliding_window is not None:
        return ctx if capacity_tokens >= model.sliding_window else capacity_tokens
    if swa == 0:
        return min(ctx, capacity_tokens)
    # full * L + swa * min(L, W) <= capacity * num_layers
    budget = capacity_tokens * model.num_layers
    window = model.sliding_window or 0
    length = (budget - swa * window) / full if budget >= model.num_layers * window else budget / model.num_layers
    return int(min(ctx, length))
