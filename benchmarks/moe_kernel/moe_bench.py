"""Time vLLM 0.34.0's fused-MoE Triton kernel at the per-GPU expert shapes infragen plans for.

Why: the step model read routed-expert bytes at bandwidth x an uncited 0.525. This measures what vLLM's own
kernel (vllm_kernels.py, copied verbatim from the 0.34.0 wheel) achieves on the GPU it runs on, at the exact
per-GPU shapes (experts E, top-k, hidden K, intermediate N = moe_intermediate / tp) and token counts M of a
decode step, so that the model can use a measured curve instead.

What runs per MoE layer, as vLLM 0.34.0's TritonExperts.apply does on Hopper (experts/triton_moe.py):
  [fp8 block] activation quant (per 128-group; vLLM: CUDA op per_token_group_fp8_quant, here the wheel's
  Triton fallback _per_token_group_quant_fp8) -> fused_moe_kernel (w13, tuned H200 config or vLLM's default
  config, SWAP_AB / TMA-B as vLLM decides) -> SiLU-and-mul (vLLM: CUDA op silu_and_mul or, fp8 block,
  silu_and_mul_per_block_quant; here torch + the Triton group quant) -> fused_moe_kernel (w2, router weight
  applied) -> sum over top-k (vLLM: CUDA op moe_sum; here torch.sum).
Routing (top-k softmax) and moe_align_block_size are not timed (torch stand-ins here, one small CUDA kernel each
in vLLM). Routing is uniform random without repeats (infragen's model assumes uniform routing).

Timing: each layer is run over several copies of the weights (distinct tensors, > 4 x the L2 of touched bytes
at M = 1) inside one CUDA graph, as decode runs under vLLM's CUDA graphs; median of >= 20 replays / copies.

Usage:
  python moe_bench.py --out DIR            # on a CUDA GPU
  python moe_bench.py --dry-run --out DIR  # no CUDA: cases, configs, bytes, moe_align and CSV/JSON writing
  TRITON_INTERPRET=1 python moe_bench.py --interpret-check   # bf16 kernel vs torch on CPU, tiny shapes
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
CONFIG_DIR = HERE / "configs"
M_VALUES = (1, 2, 4, 8, 16, 32, 64, 128, 168, 256, 512, 1024)
M_LARGE = (2048, 4096, 8192, 16384)  # prefill chunks mixed into a step; priority-0 cases only
FP8_MAX = 448.0


@dataclass(frozen=True)
class Case:
    """One per-GPU expert shape: w13 [E, 2N, K], w2 [E, K, N]."""

    name: str
    model: str
    tp: int
    E: int
    topk: int
    K: int
    N: int
    dtype: str  # "bf16" or "fp8-block" (w8a8, [128, 128] blocks, dynamic per-token-group activations);
    # "fp16"/"fp32" only for the interpreter check
    ex_rows: str = ""
    priority: int = 1

    @property
    def torch_dtype(self) -> torch.dtype:
        return {"fp16": torch.float16, "fp32": torch.float32}.get(self.dtype, torch.bfloat16)

    @property
    def block(self) -> list[int] | None:
        return [128, 128] if self.dtype == "fp8-block" else None

    @property
    def weight_bytes_per_expert(self) -> int:
        elems = 3 * self.N * self.K
        if self.dtype == "bf16":
            return 2 * elems
        scales = (math.ceil(2 * self.N / 128) * math.ceil(self.K / 128) + math.ceil(self.K / 128)
                  * math.ceil(self.N / 128)) * 4
        return elems + scales


# Per-GPU shapes (config.json of each model; N = moe_intermediate_size / tp). EX rows: extra_calibration.csv.
CASES = (
    Case("dsr1-tp8-fp8", "DeepSeek-V3/R1", 8, 256, 8, 7168, 2048 // 8, "fp8-block", "EX0035-EX0037 (8xH200)", 0),
    Case("q235-tp8-bf16", "Qwen3-235B-A22B", 8, 128, 8, 4096, 1536 // 8, "bf16", "EX0025-EX0029 (8xH100/A100)", 0),
    Case("q235-tp4-fp8", "Qwen3-235B-A22B-FP8", 4, 128, 8, 4096, 1536 // 4, "fp8-block", "EX0030-EX0031 (4xH100)", 0),
    Case("mixtral-tp1-bf16", "Mixtral-8x7B", 1, 8, 2, 4096, 14336, "bf16", "", 0),
    Case("mixtral-tp2-bf16", "Mixtral-8x7B", 2, 8, 2, 4096, 14336 // 2, "bf16", "", 0),
    Case("q235-tp4-bf16", "Qwen3-235B-A22B", 4, 128, 8, 4096, 1536 // 4, "bf16", "", 1),
    Case("q30-tp1-bf16", "Qwen3-30B-A3B", 1, 128, 8, 2048, 768, "bf16", "", 1),
    Case("q30-tp1-fp8", "Qwen3-30B-A3B-FP8", 1, 128, 8, 2048, 768, "fp8-block", "", 1),
    Case("q30-tp2-bf16", "Qwen3-30B-A3B", 2, 128, 8, 2048, 768 // 2, "bf16", "", 2),
    Case("q30-tp4-bf16", "Qwen3-30B-A3B", 4, 128, 8, 2048, 768 // 4, "bf16", "", 2),
    Case("q2-57b-tp2-bf16", "Qwen2-57B-A14B", 2, 64, 8, 3584, 2560 // 2, "bf16", "", 2),
    Case("q2-57b-tp4-bf16", "Qwen2-57B-A14B", 4, 64, 8, 3584, 2560 // 4, "bf16", "", 2),
    Case("q15-moe-tp1-bf16", "Qwen1.5-MoE-A2.7B", 1, 60, 4, 2048, 1408, "bf16", "", 2),
)

# Dense per-GPU decode GEMMs of one layer (qkv, o, gate_up, down), Llama-3.1 8B / 70B shapes.
DENSE = (
    ("llama-8b", 4096, 32, 8, 128, 14336),
    ("llama-70b", 8192, 64, 8, 128, 28672),
)
DENSE_M = (1, 8, 32, 128, 256)


# DeepSeek-V3/R1 at tp 8: the per-GPU block-fp8 dense linears of one layer, (name, N, K) of the [N, K] weight
# (config.json: hidden 7168, q_lora_rank 1536, kv_lora_rank 512 + rope 64, 128 heads x (128 nope + 64 rope) for q,
# v_head_dim 128, 1 shared expert of 2048, first 3 layers dense with 18432; vLLM deepseek_v2.py: fused_qkv_a_proj
# and the router replicated, q_b / kv_b / gate_up column-parallel, o_proj / down row-parallel).
DSR1_TP8_LINEARS = (
    ("fused_qkv_a_proj", 1536 + 512 + 64, 7168),
    ("q_b_proj", 128 * 192 // 8, 1536),
    ("kv_b_proj", 128 * 256 // 8, 512),      # prefill only: decode runs the absorbed bf16 bmms below
    ("o_proj", 7168, 128 * 128 // 8),
    ("shared_gate_up", 2 * 2048 // 8, 7168),
    ("shared_down", 7168, 2048 // 8),
    ("dense_gate_up", 2 * 18432 // 8, 7168),  # layers 0-2 only
    ("dense_down", 7168, 18432 // 8),
)
DSR1_TP8_BF16 = (("router_gate", 256, 7168),)  # bf16 linear (GateLinear), replicated
BLOCK_DENSE_M = (1, 2, 4, 8, 16, 32, 64, 128, 256)


# ----------------------------------------------------------------------------------------------- configs
def config_file(E: int, N: int, dtype: str) -> Path:
    """vLLM's get_config_file_name for an H200 (the name keys on w2's shape: E and N = intermediate / tp)."""
    sel = ""
    if dtype == "fp8-block":
        sel = ",dtype=fp8_w8a8,block_shape=[128,128]"
    return CONFIG_DIR / f"E={E},N={N},device_name=NVIDIA_H200{sel}.json"


def default_config(M: int, E: int, dtype: str, block: list[int] | None) -> dict:
    """vLLM 0.34.0 fused_moe.get_default_config (CUDA branch), copied."""
    if dtype == "fp8-block" and block is not None:
        if M <= 8 and block[0] % 64 == 0:
            block_n, stages = 64, (4 if M <= 4 else 3)
        else:
            block_n, stages = block[0], 3
        return {"BLOCK_SIZE_M": 16 if M <= 64 else 64, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block[1],
                "GROUP_SIZE_M": 1 if M <= 16 else 32, "num_warps": 4, "num_stages": stages}
    block_m = 16 if M <= 32 else 32 if M <= 96 else 64 if M <= 512 else 128
    return {"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": 64 if M <= 64 else 128,
            "BLOCK_SIZE_K": 128 if dtype.startswith("fp8") or M <= 64 else 64,
            "GROUP_SIZE_M": 16 if M // max(E, 1) > 128 else 1, "num_warps": 4 if M <= 128 else 8,
            "num_stages": 4 if M <= 32 else 3}


def pick_config(case: Case, M: int) -> tuple[dict, str]:
    """try_get_optimal_moe_config: the tuned file's entry nearest M, else the default."""
    path = config_file(case.E, case.N, case.dtype)
    if path.exists():
        table = {int(k): v for k, v in json.loads(path.read_text()).items() if k != "triton_version"}
        return dict(table[min(table, key=lambda x: abs(x - M))]), path.name
    return default_config(M, case.E, case.dtype, case.block), "default"


def block_config_file(N: int, K: int) -> Path:
    """vLLM's get_w8a8_block_fp8_configs file name for an H200."""
    return CONFIG_DIR / f"N={N},K={K},device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"


def pick_block_config(N: int, K: int, M: int) -> tuple[dict, str]:
    """w8a8_triton_block_scaled_mm: the tuned entry nearest M, else its default config (copied)."""
    path = block_config_file(N, K)
    if path.exists():
        table = {int(k): v for k, v in json.loads(path.read_text()).items() if k != "triton_version"}
        return dict(table[min(table, key=lambda x: abs(x - M))]), path.name
    return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 4,
            "num_stages": 2}, "default"


def block_mm(kern, A, B, As, Bs, C, config: dict) -> None:
    """w8a8_triton_block_scaled_mm (vLLM 0.34.0 fp8_utils.py) with C preallocated: A [M, K] fp8, As [M, K/128],
    B [N, K] fp8, Bs [N/128, K/128], blocks [128, 128]."""
    import triton
    M, K = A.shape
    N = B.shape[0]
    grid = (triton.cdiv(M, config["BLOCK_SIZE_M"]) * triton.cdiv(N, config["BLOCK_SIZE_N"]),)
    kern._w8a8_triton_block_scaled_mm[grid](
        A, B, C, As, Bs, M, N, K, 128, 128, A.stride(-2), A.stride(-1), B.stride(1), B.stride(0),
        C.stride(-2), C.stride(-1), As.stride(-2), As.stride(-1), Bs.stride(1), Bs.stride(0), **config)


def fp8_weight(N: int, K: int, device: str, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    w = (torch.randn(N, K, device=device, dtype=torch.bfloat16, generator=gen) * 100).clamp(
        -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    s = torch.rand(math.ceil(N / 128), math.ceil(K / 128), device=device, generator=gen) * 1e-3 + 2e-4
    return w, s


def deq_weight(w: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return w.float() * s.repeat_interleave(128, 0)[: w.shape[0]].repeat_interleave(128, 1)[:, : w.shape[1]]


def block_copies(N: int, K: int) -> int:
    return int(min(64, max(4, math.ceil(600e6 / (N * K)))))


# ------------------------------------------------------------------------------------------ align (torch)
def moe_align_block_size(topk_ids: torch.Tensor, block: int, num_experts: int):
    """Torch version of vLLM's moe_align_block_size (a CUDA op there): token-expert slots sorted by expert,
    each expert's run padded to a multiple of `block` with the pad value numel; one expert id per block."""
    flat = topk_ids.flatten().to(torch.int64)
    numel = flat.numel()
    max_padded = numel + num_experts * (block - 1)
    counts = torch.bincount(flat, minlength=num_experts)
    padded = (counts + block - 1) // block * block
    starts = torch.cumsum(padded, 0) - padded
    total = int(padded.sum())
    sorted_ids = torch.full((max_padded,), numel, dtype=torch.int32, device=flat.device)
    order = torch.argsort(flat, stable=True)
    sorted_experts = flat[order]
    first_of = torch.cumsum(counts, 0) - counts
    rank = torch.arange(numel, device=flat.device) - first_of[sorted_experts]
    sorted_ids[starts[sorted_experts] + rank] = order.to(torch.int32)
    n_blocks = math.ceil(max_padded / block)
    expert_ids = torch.full((n_blocks,), -1, dtype=torch.int32, device=flat.device)
    block_expert = torch.repeat_interleave(torch.arange(num_experts, device=flat.device), padded // block)
    expert_ids[: block_expert.numel()] = block_expert.to(torch.int32)
    return sorted_ids, expert_ids, torch.tensor([total], dtype=torch.int32, device=flat.device)


def check_align() -> None:
    """The properties vLLM's tests assert of moe_align_block_size (tests/kernels/moe/test_moe_align_block_size.py)."""
    g = torch.Generator().manual_seed(1)
    for tokens, E, k, block in ((1, 8, 2, 16), (7, 64, 8, 16), (33, 256, 8, 64), (300, 60, 4, 128)):
        ids = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(tokens)])
        s, e, n = moe_align_block_size(ids, block, E)
        total = int(n[0])
        assert total % block == 0
        flat = ids.flatten()
        seen = s[:total][s[:total] < flat.numel()].sort().values
        assert torch.equal(seen, torch.arange(flat.numel(), dtype=torch.int32)), "every slot once"
        for b in range(total // block):
            rows = s[b * block:(b + 1) * block]
            rows = rows[rows < flat.numel()]
            assert bool((flat[rows.long()] == e[b]).all()), "block holds its expert's slots only"
        assert bool((s[total:] == flat.numel()).all())


# ------------------------------------------------------------------------------------------------ layer
def enable_swap_ab(bm: int, bn: int, hopper: bool) -> bool:
    return hopper and bm < 64 and bn >= 64


class Layer:
    """One MoE layer's weights (several copies) and its prepared launches at one M."""

    def __init__(self, case: Case, copies: int, device: str, gen: torch.Generator):
        self.case, self.device = case, device
        E, N, K = case.E, case.N, case.K
        self.w1, self.w2, self.s1, self.s2 = [], [], [], []
        for _ in range(copies):
            if case.dtype != "fp8-block":
                dt = case.torch_dtype
                w1 = torch.randn(E, 2 * N, K, device=device, dtype=dt, generator=gen) * 0.05
                w2 = torch.randn(E, K, N, device=device, dtype=dt, generator=gen) * 0.05
                self.w1.append(w1)
                self.w2.append(w2)
                self.s1.append(None)
                self.s2.append(None)
            else:
                # saturate before the cast: e4m3fn has no inf, a value beyond 448 becomes NaN
                w1 = (torch.randn(E, 2 * N, K, device=device, dtype=torch.bfloat16, generator=gen) * 100).clamp(
                    -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
                w2 = (torch.randn(E, K, N, device=device, dtype=torch.bfloat16, generator=gen) * 100).clamp(
                    -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
                self.w1.append(w1)
                self.w2.append(w2)
                self.s1.append(torch.rand(E, math.ceil(2 * N / 128), math.ceil(K / 128), device=device,
                                          generator=gen) * 1e-3 + 2e-4)
                self.s2.append(torch.rand(E, math.ceil(K / 128), math.ceil(N / 128), device=device,
                                          generator=gen) * 1e-3 + 2e-4)


def group_quant(x: torch.Tensor, kern) -> tuple[torch.Tensor, torch.Tensor]:
    """per_token_group_quant_fp8's Triton path (vLLM 0.34.0 fp8_utils.py), group 128, row-major scales."""
    xq = torch.empty(x.shape, device=x.device, dtype=torch.float8_e4m3fn)
    xs = torch.empty((*x.shape[:-1], x.shape[-1] // 128), device=x.device, dtype=torch.float32)
    kern._per_token_group_quant_fp8[(x.numel() // 128,)](
        x, xq, xs, 128, x.shape[1], x.stride(0), 1e-10, fp8_min=-FP8_MAX, fp8_max=FP8_MAX, use_ue8m0=False,
        BLOCK=128, num_warps=1, num_stages=1)
    return xq, xs


def invoke(kern, A, B, C, A_scale, B_scale, topk_weights, sorted_ids, expert_ids, ntp, mul_routed, top_k,
           config: dict, fp8: bool, block, hopper: bool, use_tma: bool, stats: dict) -> None:
    """vLLM 0.34.0 invoke_fused_moe_triton_kernel, reduced to the bf16 and fp8-block cases (no bias, no
    int8/int4, no LoRA, no sorted-A)."""
    import triton
    if not COMPUTE:
        COMPUTE.update(_compute_types())
    M = A.size(0)
    num_tokens = M * top_k
    if sorted_ids is not None:
        EM = sorted_ids.size(0)
        if config["BLOCK_SIZE_M"] > M:
            EM = min(sorted_ids.size(0), M * top_k * config["BLOCK_SIZE_M"])
    else:
        EM = num_tokens * config["BLOCK_SIZE_M"]
    cfg = dict(config)
    cfg["SPLIT_K"] = 1
    swap = fp8 and enable_swap_ab(cfg["BLOCK_SIZE_M"], cfg["BLOCK_SIZE_N"], hopper)
    bk = cfg.pop("BLOCK_SIZE_K")
    if block is not None:
        bk = min(bk, min(block))
    tma = bool(cfg.pop("USE_TMA", True)) and use_tma and fp8 and block is not None and hopper and \
        B.is_contiguous() and B.size(1) % cfg["BLOCK_SIZE_N"] == 0 and B.size(2) % bk == 0
    b_desc = None
    if tma:
        from triton.tools.tensor_descriptor import TensorDescriptor
        b_desc = TensorDescriptor.from_tensor(B, [1, cfg["BLOCK_SIZE_N"], bk])
    stats.update(swap_ab=swap, tma_b=tma, naive=sorted_ids is None)
    grid = (triton.cdiv(EM, cfg["BLOCK_SIZE_M"]) * triton.cdiv(B.size(1), cfg["BLOCK_SIZE_N"]),)
    kern.fused_moe_kernel[grid](
        A, B, b_desc, C, None, A_scale, B_scale, topk_weights, sorted_ids, expert_ids, ntp, None,
        B.size(1), B.size(2), EM, num_tokens,
        A.stride(0), A.stride(1), B.stride(0), B.stride(2), B.stride(1), C.stride(1), C.stride(2),
        A_scale.stride(0) if A_scale is not None and A_scale.ndim == 2 else 0,
        A_scale.stride(1) if A_scale is not None and A_scale.ndim == 2 else 0,
        B_scale.stride(0) if B_scale is not None else 0,
        B_scale.stride(2) if B_scale is not None and B_scale.ndim == 3 else 0,
        B_scale.stride(1) if B_scale is not None and B_scale.ndim >= 2 and B_scale.size(1) > 1 else 0,
        0, 0,
        0 if block is None else block[0], 0 if block is None else block[1],
        MUL_ROUTED_WEIGHT=mul_routed, top_k=top_k, compute_type=COMPUTE[C.dtype], use_fp8_w8a8=fp8,
        use_int8_w8a8=False, use_int8_w8a16=False, per_channel_quant=False,
        naive_block_assignment=sorted_ids is None, HAS_BIAS=False, BLOCK_SIZE_K=bk, SWAP_AB=swap,
        USE_TD=False, USE_TMA_B=tma, USE_TMA_A=False, C_IS_SORTED=False, **cfg)


def _compute_types() -> dict:
    import triton.language as tl
    return {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}


COMPUTE: dict = {}


def routing(M: int, E: int, k: int, device: str, gen: torch.Generator):
    scores = torch.rand(M, E, device=device, generator=gen)
    w, ids = torch.topk(scores, k, dim=1)
    return (w / w.sum(1, keepdim=True)).float().contiguous(), ids.to(torch.int32).contiguous()


class Step:
    """The launches of one layer copy at M tokens (buffers allocated once, so a CUDA graph can hold them)."""

    def __init__(self, kern, layer: Layer, copy: int, x, topk_w, topk_ids, config, hopper, use_tma):
        c = layer.case
        self.kern, self.c, self.config, self.hopper, self.use_tma = kern, c, config, hopper, use_tma
        self.w1, self.w2, self.s1, self.s2 = layer.w1[copy], layer.w2[copy], layer.s1[copy], layer.s2[copy]
        self.x, self.topk_w, self.topk_ids = x, topk_w, topk_ids
        M = x.size(0)
        self.fp8 = c.dtype == "fp8-block"
        naive = M * c.topk * 4 <= c.E
        if naive:
            self.sorted_ids = None
            self.expert_ids = topk_ids.view(-1)
            self.ntp = torch.full((1,), topk_ids.numel() * config["BLOCK_SIZE_M"], dtype=torch.int32,
                                  device=x.device)
        else:
            self.sorted_ids, self.expert_ids, self.ntp = moe_align_block_size(topk_ids, config["BLOCK_SIZE_M"], c.E)
        dt = x.dtype
        self.cache1 = torch.empty(M, c.topk, 2 * c.N, device=x.device, dtype=dt)
        self.cache2 = torch.empty(M * c.topk, c.N, device=x.device, dtype=dt)
        self.cache3 = torch.empty(M, c.topk, c.K, device=x.device, dtype=dt)
        self.out = torch.empty(M, c.K, device=x.device, dtype=dt)
        self.stats1: dict = {}
        self.stats2: dict = {}
        self.xq, self.xs = (None, None)

    def quant1(self):
        if self.fp8:
            self.xq, self.xs = group_quant(self.x, self.kern)
        else:
            self.xq = self.x

    def gemm1(self):
        invoke(self.kern, self.xq, self.w1, self.cache1, self.xs, self.s1, None, self.sorted_ids, self.expert_ids,
               self.ntp, False, self.c.topk, self.config, self.fp8, self.c.block, self.hopper, self.use_tma,
               self.stats1)

    def act(self):
        h = self.cache1.view(-1, 2 * self.c.N)
        torch.mul(torch.nn.functional.silu(h[:, : self.c.N]), h[:, self.c.N:], out=self.cache2)
        if self.fp8:
            self.aq, self.as_ = group_quant(self.cache2, self.kern)
        else:
            self.aq, self.as_ = self.cache2, None

    def gemm2(self):
        invoke(self.kern, self.aq, self.w2, self.cache3, self.as_, self.s2, self.topk_w, self.sorted_ids,
               self.expert_ids, self.ntp, True, 1, self.config, self.fp8, self.c.block, self.hopper, self.use_tma,
               self.stats2)

    def reduce(self):
        torch.sum(self.cache3, dim=1, out=self.out)

    def layer(self):
        self.quant1()
        self.gemm1()
        self.act()
        self.gemm2()
        self.reduce()


def reference(step: Step) -> torch.Tensor:
    """Float32 torch MoE on the same (dequantized) weights; activations unquantized."""
    c = step.c
    x = step.x.float()
    out = torch.zeros(x.shape[0], c.K, device=x.device)

    def deq(w, s):
        if s is None:
            return w.float()
        return w.float() * s.repeat_interleave(128, 0)[: w.shape[0]].repeat_interleave(128, 1)[:, : w.shape[1]]

    for t in range(x.shape[0]):
        for j in range(c.topk):
            e = int(step.topk_ids[t, j])
            w1 = deq(step.w1[e], None if step.s1 is None else step.s1[e])
            w2 = deq(step.w2[e], None if step.s2 is None else step.s2[e])
            h = w1 @ x[t]
            a = torch.nn.functional.silu(h[: c.N]) * h[c.N:]
            out[t] += float(step.topk_w[t, j]) * (w2 @ a)
    return out


def deq_act(q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """Dequantize per-128-group fp8 activations [rows, K] with scales [rows, K / 128]."""
    return q.float() * s.float().repeat_interleave(128, 1)[:, : q.shape[1]]


def reference_quantized(step: Step) -> tuple[torch.Tensor, torch.Tensor]:
    """fp8 rows: float32 emulation of what the kernels compute from the operands they were given (the
    kernel's own quantized activations xq/xs and aq/as_, dequantized weights). Returns (gemm1 output
    [M, topk, 2N], layer output [M, K]); the kernels should match these to bf16 rounding."""
    c = step.c
    xa = deq_act(step.xq, step.xs)
    aa = deq_act(step.aq, step.as_)
    M = xa.shape[0]
    h1 = torch.zeros(M, c.topk, 2 * c.N, device=xa.device)
    out = torch.zeros(M, c.K, device=xa.device)

    def deq(w, s):
        return w.float() * s.repeat_interleave(128, 0)[: w.shape[0]].repeat_interleave(128, 1)[:, : w.shape[1]]

    for t in range(M):
        for j in range(c.topk):
            e = int(step.topk_ids[t, j])
            h1[t, j] = deq(step.w1[e], step.s1[e]) @ xa[t]
            out[t] += float(step.topk_w[t, j]) * (deq(step.w2[e], step.s2[e]) @ aa[t * c.topk + j])
    return h1, out


def rel(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got.float() - ref).norm() / ref.norm())


# ---------------------------------------------------------------------------------------------- timing
def time_graph(fn, reps: int, warm: int = 3) -> tuple[float, str]:
    """Median ms of one replay of a CUDA graph of fn (eager if capture fails)."""
    fn()
    torch.cuda.synchronize()
    method = "graph"
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        run = g.replay
    except Exception as exc:
        method = f"eager ({type(exc).__name__})"
        run = fn
    for _ in range(warm):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2], method


def copy_bandwidth() -> dict:
    """Ceilings (GB/s): device-to-device copy of 4 GiB (bytes read + written) and a sum over 4 GiB (read)."""
    n = 1024 ** 3
    a = torch.randn(n, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    copy_ms, _ = time_graph(lambda: b.copy_(a), 20, warm=20)
    read_ms, _ = time_graph(lambda: torch.sum(a), 20, warm=20)
    return {"copy_gb_per_s": 2 * 4 * n / (copy_ms * 1e-3) / 1e9, "read_gb_per_s": 4 * n / (read_ms * 1e-3) / 1e9}


def n_copies(case: Case) -> int:
    layer = case.E * case.weight_bytes_per_expert
    return int(min(32, max(8, math.ceil(2e9 / layer))))


def bench_case(kern, case: Case, ms_list, hopper: bool, deadline: float, rows: list, log) -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    copies = n_copies(case)
    layer = Layer(case, copies, "cuda", gen)
    for M in ms_list:
        if time.time() > deadline:
            log(f"  deadline: skip {case.name} M={M}")
            break
        config, source = pick_config(case, M)
        x = torch.randn(M, case.K, device="cuda", dtype=torch.bfloat16, generator=gen)
        tw, ids = routing(M, case.E, case.topk, "cuda", gen)
        use_tma = True
        row = dict(case=case.name, model=case.model, tp=case.tp, dtype=case.dtype, E=case.E, topk=case.topk,
                   K=case.K, N=case.N, M=M, ex_rows=case.ex_rows, config_source=source,
                   config=json.dumps(config, sort_keys=True), copies=copies)
        try:
            steps = [Step(kern, layer, i, x, tw, ids, config, hopper, use_tma) for i in range(copies)]
            try:
                steps[0].layer()
                torch.cuda.synchronize()
            except Exception as exc:
                if not case.dtype.startswith("fp8"):
                    raise
                log(f"  {case.name} M={M}: TMA path failed ({type(exc).__name__}: {exc}); retry without TMA")
                use_tma = False
                steps = [Step(kern, layer, i, x, tw, ids, config, hopper, False) for i in range(copies)]
                steps[0].layer()
                torch.cuda.synchronize()
            if M <= 8:
                ref = reference(steps[0])
                got = steps[0].out.float()
                row["rel_err"] = float((got - ref).norm() / ref.norm())
                row["max_abs_err"] = float((got - ref).abs().max())
                if steps[0].fp8:
                    h1, outq = reference_quantized(steps[0])
                    row["rel_err_gemm1_q"] = rel(steps[0].cache1, h1)
                    row["rel_err_q"] = rel(got, outq)
                    row["max_abs_err_q"] = float((got - outq).abs().max())
                    row["ref_abs_max"] = float(outq.abs().max())
            layer_ms, method = time_graph(lambda steps=steps: [s.layer() for s in steps], 20)
            g1_ms, _ = time_graph(lambda steps=steps: [s.gemm1() for s in steps], 20)
            g2_ms, _ = time_graph(lambda steps=steps: [s.gemm2() for s in steps], 20)
            touched = int(torch.unique(ids).numel())
            bytes_touched = touched * case.weight_bytes_per_expert
            row.update(
                layer_us=1e3 * layer_ms / copies, gemm1_us=1e3 * g1_ms / copies, gemm2_us=1e3 * g2_ms / copies,
                timing=method, experts_touched=touched,
                expected_touched=case.E * (1 - (1 - case.topk / case.E) ** M),
                tokens_per_touched_expert=M * case.topk / touched, bytes_touched=bytes_touched,
                layer_gb_per_s=bytes_touched / (layer_ms / copies * 1e-3) / 1e9,
                gemms_gb_per_s=bytes_touched / ((g1_ms + g2_ms) / copies * 1e-3) / 1e9,
                swap_ab=steps[0].stats1.get("swap_ab"), tma_b=steps[0].stats1.get("tma_b"),
                naive_assignment=steps[0].stats1.get("naive"),
                flops=2 * 3 * case.N * case.K * M * case.topk)
            log(f"  {case.name:18s} M={M:5d} layer {row['layer_us']:8.1f} us  gemm1 {row['gemm1_us']:7.1f} "
                f"gemm2 {row['gemm2_us']:7.1f}  touched {touched:3d}  {row['layer_gb_per_s']:6.0f} GB/s"
                + (f"  relerr {row['rel_err']:.2e}" if "rel_err" in row else "")
                + (f" (vs quantized emulation: gemm1 {row['rel_err_gemm1_q']:.2e} layer {row['rel_err_q']:.2e})"
                   if "rel_err_q" in row else "") + f"  [{source[:40]}]")
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"[:400]
            log(f"  {case.name} M={M}: ERROR {row['error']}")
        rows.append(row)
    del layer
    torch.cuda.empty_cache()


def bench_dense(deadline: float, rows: list, log) -> None:
    """cuBLAS bf16 (torch.matmul) and fp8 (torch._scaled_mm, per-tensor) for one decoder layer's GEMMs."""
    for name, hidden, heads, kv_heads, hd, inter in DENSE:
        for tp in (1, 2, 4, 8):
            shapes = [((heads + 2 * kv_heads) * hd // tp, hidden), (hidden, heads * hd // tp),
                      (2 * inter // tp, hidden), (hidden, inter // tp)]
            wbytes = sum(n * k for n, k in shapes)
            copies = int(min(16, max(4, math.ceil(600e6 / (2 * wbytes)))))
            for dtype in ("bf16", "fp8"):
                ws = []
                for _ in range(copies):
                    layer = []
                    for n, k in shapes:
                        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
                        layer.append(w if dtype == "bf16" else w.to(torch.float8_e4m3fn))
                    ws.append(layer)
                one = torch.ones((), device="cuda")
                for M in DENSE_M:
                    if time.time() > deadline:
                        return
                    xs = [torch.randn(M, k, device="cuda", dtype=torch.bfloat16) for _, k in shapes]
                    if dtype == "fp8":
                        xs = [x.to(torch.float8_e4m3fn) for x in xs]

                    def run(ws=ws, xs=xs, dtype=dtype, one=one):
                        for layer in ws:
                            for w, x in zip(layer, xs, strict=True):
                                if dtype == "bf16":
                                    torch.matmul(x, w.t())
                                else:
                                    torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                    row = dict(case=f"dense-{name}-tp{tp}-{dtype}", model=name, tp=tp, dtype=dtype, M=M,
                               bytes_touched=wbytes * (2 if dtype == "bf16" else 1), copies=copies)
                    try:
                        ms, method = time_graph(run, 20)
                        row.update(layer_us=1e3 * ms / copies, timing=method,
                                   layer_gb_per_s=row["bytes_touched"] / (ms / copies * 1e-3) / 1e9)
                        log(f"  {row['case']:24s} M={M:4d} {row['layer_us']:8.1f} us {row['layer_gb_per_s']:6.0f} GB/s")
                    except Exception as exc:
                        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                        log(f"  {row['case']} M={M}: ERROR {row['error']}")
                    rows.append(row)
                del ws
                torch.cuda.empty_cache()


def bench_block_fp8_dense(kern, deadline: float, rows: list, log) -> None:
    """DeepSeek-R1 tp8's block-fp8 dense linears: vLLM's Triton w8a8 block kernel alone ('gemm_us'), the
    per-token-group activation quant alone ('quant_us'), both as a linear runs them ('linear_us'), and cuBLAS's
    block-scaled fp8 GEMM through torch._scaled_mm where this torch offers it ('cublas_block_us'). Copies of the
    weights in one CUDA graph as for the MoE rows; the router (bf16) and the absorbed MLA bmms (bf16) beside."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, N, K in DSR1_TP8_LINEARS:
        copies = block_copies(N, K)
        ws = [fp8_weight(N, K, "cuda", gen) for _ in range(copies)]
        for M in BLOCK_DENSE_M:
            if time.time() > deadline:
                log(f"  deadline: skip block-fp8 {name} M={M}")
                return
            config, source = pick_block_config(N, K, M)
            row = dict(case=f"bf8-dsr1-tp8-{name}", model="DeepSeek-V3/R1", tp=8, dtype="fp8-block", N=N, K=K,
                       M=M, copies=copies, config_source=source, config=json.dumps(config, sort_keys=True),
                       bytes_touched=N * K + 4 * math.ceil(N / 128) * math.ceil(K / 128),
                       flops=2 * M * N * K)
            try:
                x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=gen)
                outs = [torch.empty(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
                xq, xs = group_quant(x, kern)
                block_mm(kern, xq, ws[0][0], xs, ws[0][1], outs[0], config)
                torch.cuda.synchronize()
                ref = (deq_act(xq, xs) @ deq_weight(*ws[0]).t())
                row["rel_err_q"] = rel(outs[0], ref)
                row["max_abs_err_q"] = float((outs[0].float() - ref).abs().max())

                def gemms(ws=ws, outs=outs, xq=xq, xs=xs, config=config):
                    for (w, s), o in zip(ws, outs, strict=True):
                        block_mm(kern, xq, w, xs, s, o, config)

                def linears(ws=ws, outs=outs, x=x, config=config):
                    for (w, s), o in zip(ws, outs, strict=True):
                        q, qs = group_quant(x, kern)
                        block_mm(kern, q, w, qs, s, o, config)

                def quants(x=x, copies=copies):
                    for _ in range(copies):
                        group_quant(x, kern)

                g_ms, method = time_graph(gemms, 20)
                l_ms, _ = time_graph(linears, 20)
                q_ms, _ = time_graph(quants, 20)
                row.update(gemm_us=1e3 * g_ms / copies, linear_us=1e3 * l_ms / copies,
                           quant_us=1e3 * q_ms / copies, timing=method,
                           gemm_gb_per_s=row["bytes_touched"] / (g_ms / copies * 1e-3) / 1e9)
                try:
                    cb_ms, cb_err = cublas_block(ws, xq, xs, outs, ref)
                    row.update(cublas_block_us=1e3 * cb_ms / copies, cublas_rel_err_q=cb_err)
                except Exception as exc:  # torch without block-scaled _scaled_mm on this GPU: say so
                    row["cublas_block_error"] = f"{type(exc).__name__}: {exc}"[:200]
                log(f"  {row['case']:30s} M={M:4d} gemm {row['gemm_us']:6.1f} us  quant {row['quant_us']:5.1f}  "
                    f"linear {row['linear_us']:6.1f}  {row['gemm_gb_per_s']:5.0f} GB/s  "
                    f"cublas-block {row.get('cublas_block_us', float('nan')):6.1f}  relerr_q {row['rel_err_q']:.1e}"
                    f"  [{source[:24]}]")
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"[:400]
                log(f"  {row['case']} M={M}: ERROR {row['error']}")
            rows.append(row)
        del ws
        torch.cuda.empty_cache()
    bench_bf16_side(deadline, rows, log)


def cublas_block(ws, xq, xs, outs, ref) -> tuple[float, float]:
    """torch._scaled_mm with 1x128 activation and 128x128 weight block scales (cuBLAS block scaling, Hopper)."""
    M, K = xq.shape
    if K % 512:  # cuBLAS reads the scales in groups of 4 K-blocks (torch pads them to round_up(K / 128, 4)):
        # K 256 / 2304 read past the unpadded scales (an illegal address on the 2026-12-04 run)
        raise ValueError(f"K={K}: K / 128 not a multiple of 4")
    sa = xs.t().contiguous().t()  # 1x128 scales outer-dim-major (column-major), as cuBLAS wants them
    layouts = (lambda s: s.t().contiguous(), lambda s: s.contiguous().t())  # [K/128, N/128] row- / column-major
    got, last = None, None
    for lay in layouts:
        try:
            got = torch._scaled_mm(xq, ws[0][0].t(), scale_a=sa, scale_b=lay(ws[0][1]), out_dtype=torch.bfloat16)
            break
        except RuntimeError as exc:
            last = exc
    if got is None:
        raise last
    err = rel(got[:M], ref)
    sbs = [lay(s) for _, s in ws]

    def run(ws=ws, sbs=sbs):
        for (w, _), sb in zip(ws, sbs, strict=True):
            torch._scaled_mm(xq, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    ms, _ = time_graph(run, 20)
    return ms, err


def bench_bf16_side(deadline: float, rows: list, log) -> None:
    """DeepSeek-R1 tp8's bf16 pieces beside the block-fp8 linears: the router GEMM and MLA's absorbed
    per-head bmms in decode (16 local heads: q_nope [16, M, 128] x W_UK [16, 128, 512], then [16, M, 512] x
    W_UV [16, 512, 128])."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    items = [(name, N, K, None) for name, N, K in DSR1_TP8_BF16] + [("mla_uk_bmm", 512, 128, 16),
                                                                    ("mla_uv_bmm", 128, 512, 16)]
    for name, N, K, heads in items:
        per = N * K * 2 * (heads or 1)
        copies = int(min(64, max(4, math.ceil(600e6 / per))))
        ws = [torch.randn(*((heads,) if heads else ()), K, N, device="cuda", dtype=torch.bfloat16, generator=gen)
              for _ in range(copies)]
        for M in BLOCK_DENSE_M:
            if time.time() > deadline:
                return
            row = dict(case=f"bf16-dsr1-tp8-{name}", model="DeepSeek-V3/R1", tp=8, dtype="bf16", N=N, K=K, M=M,
                       copies=copies, bytes_touched=per, flops=2 * M * N * K * (heads or 1))
            try:
                x = torch.randn(*((heads,) if heads else ()), M, K, device="cuda", dtype=torch.bfloat16,
                                generator=gen)

                def run(ws=ws, x=x):
                    for w in ws:
                        torch.matmul(x, w)
                ms, method = time_graph(run, 20)
                row.update(gemm_us=1e3 * ms / copies, timing=method,
                           gemm_gb_per_s=per / (ms / copies * 1e-3) / 1e9)
                log(f"  {row['case']:30s} M={M:4d} gemm {row['gemm_us']:6.1f} us  {row['gemm_gb_per_s']:5.0f} GB/s")
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"[:400]
                log(f"  {row['case']} M={M}: ERROR {row['error']}")
            rows.append(row)
        del ws
        torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------- output
FIELDS = ("case", "model", "tp", "dtype", "E", "topk", "K", "N", "M", "layer_us", "gemm1_us", "gemm2_us",
          "experts_touched", "expected_touched", "tokens_per_touched_expert", "bytes_touched", "layer_gb_per_s",
          "gemms_gb_per_s", "flops", "rel_err", "max_abs_err", "rel_err_gemm1_q", "rel_err_q", "max_abs_err_q",
          "ref_abs_max", "config_source", "config", "swap_ab", "tma_b",
          "naive_assignment", "copies", "timing", "ex_rows", "error")


BLOCK_FIELDS = ("case", "model", "tp", "dtype", "N", "K", "M", "gemm_us", "quant_us", "linear_us", "cublas_block_us",
                "bytes_touched", "gemm_gb_per_s", "flops", "rel_err_q", "max_abs_err_q", "cublas_rel_err_q",
                "config_source", "config", "copies", "timing", "cublas_block_error", "error")


def write(out: Path, rows: list, meta: dict) -> None:
    import csv
    out.mkdir(parents=True, exist_ok=True)
    side = ("dense-", "bf8-", "bf16-")
    moe = [r for r in rows if not r["case"].startswith(side)]
    dense = [r for r in rows if r["case"].startswith("dense-")]
    block = [r for r in rows if r["case"].startswith(("bf8-", "bf16-"))]
    for name, part, fields in (("moe_kernel_h200.csv", moe, FIELDS), ("dense_gemm_h200.csv", dense, FIELDS),
                               ("block_fp8_dense_h200.csv", block, BLOCK_FIELDS)):
        if not part:
            continue
        with open(out / name, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
            w.writeheader()
            for r in part:
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    (out / "moe_kernel_h200.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")


def environment(args) -> dict:
    meta = {"command": " ".join([sys.executable, *sys.argv]), "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ",
            time.gmtime()), "python": platform.python_version(), "torch": torch.__version__,
            "kernels": "vLLM 0.34.0 wheel, see vllm_kernels.py", "m_values": list(args.m),
            "m_large_priority0": [] if args.no_large else list(M_LARGE)}
    try:
        import triton
        meta["triton"] = triton.__version__
    except ImportError:
        meta["triton"] = None
    try:
        meta["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,"
             "power.limit,clocks.sm,clocks.mem,temperature.gpu", "--format=csv"],
            capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        meta["nvidia_smi"] = f"unavailable: {exc}"
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        meta["device"] = {"name": p.name, "capability": f"{p.major}.{p.minor}", "sms": p.multi_processor_count,
                          "memory_gib": p.total_memory / 2 ** 30, "l2_mib": getattr(p, "L2_cache_size", 0) / 2 ** 20}
    return meta


# ---------------------------------------------------------------------------------------------- checks
def interpret_check() -> int:
    """fused_moe_kernel in Triton's interpreter (TRITON_INTERPRET=1) on CPU tensors vs the float32 reference,
    through the same wrapper the GPU run uses. fp32 and fp16: Triton 3.6's interpreter computes bf16 dots
    wrongly (garbage of ~1e10 even in a bare launch, while fp32 is exact), so bf16 is checked on the GPU."""
    assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"
    import vllm_kernels as kern
    check_align()
    gen = torch.Generator().manual_seed(0)
    worst = {}
    for dtype, tol in (("fp32", 1e-4), ("fp16", 1e-2)):
        for E, k, K, N, M, naive in ((8, 2, 64, 32, 3, False), (16, 4, 128, 64, 5, False), (64, 2, 64, 32, 2, True),
                                     (8, 2, 96, 48, 20, False)):
            case = Case("tiny", "tiny", 1, E, k, K, N, dtype)
            layer = Layer(case, 1, "cpu", gen)
            x = torch.randn(M, K, dtype=case.torch_dtype, generator=gen)
            tw, ids = routing(M, E, k, "cpu", gen)
            cfg = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 1}
            step = Step(kern, layer, 0, x, tw, ids, cfg, hopper=False, use_tma=False)
            assert (step.sorted_ids is None) == naive
            step.cache1.fill_(float("nan"))
            step.cache3.fill_(float("nan"))
            step.out.fill_(float("nan"))
            step.layer()
            ref = reference(step)
            err = float((step.out.float() - ref).norm() / ref.norm())
            print(f"interpret {dtype} E={E} k={k} K={K} N={N} M={M} naive={naive}: rel err {err:.2e}")
            assert math.isfinite(err) and err < tol, err
            worst[dtype] = max(worst.get(dtype, 0.0), err)
    # fp8-block: the kernels against a float32 emulation of the same quantized operands (the GPU run's check)
    for E, k, K, N, M in ((8, 2, 256, 128, 3), (16, 4, 256, 256, 5)):
        case = Case("tiny", "tiny", 1, E, k, K, N, "fp8-block")
        layer = Layer(case, 1, "cpu", gen)
        x = torch.randn(M, K, dtype=torch.bfloat16, generator=gen).float()
        tw, ids = routing(M, E, k, "cpu", gen)
        cfg = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1}
        step = Step(kern, layer, 0, x, tw, ids, cfg, hopper=False, use_tma=False)
        step.layer()
        h1, outq = reference_quantized(step)
        e1, e2 = rel(step.cache1, h1), rel(step.out, outq)
        print(f"interpret fp8-block E={E} k={k} K={K} N={N} M={M}: gemm1 {e1:.2e} layer {e2:.2e} (vs emulation)")
        assert e1 < 1e-4 and e2 < 1e-4, (e1, e2)
        worst["fp8-block"] = max(worst.get("fp8-block", 0.0), e1, e2)
    # the dense block-fp8 linear kernel (w8a8_triton_block_scaled_mm)
    for N, K, M in ((256, 384, 3), (384, 256, 17)):
        w, s = fp8_weight(N, K, "cpu", gen)
        x = torch.randn(M, K, generator=gen)
        xq, xs = group_quant(x, kern)
        out = torch.empty(M, N)
        block_mm(kern, xq, w, xs, s, out, {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128,
                                            "GROUP_SIZE_M": 1})
        err = rel(out, deq_act(xq, xs) @ deq_weight(w, s).t())
        print(f"interpret block-fp8 linear N={N} K={K} M={M}: rel err {err:.2e} (vs emulation)")
        assert err < 1e-4, err
        worst["block-fp8 linear"] = max(worst.get("block-fp8 linear", 0.0), err)
    print(f"interpreter check passed (worst rel err {worst})")
    return 0


def dry_run(args) -> int:
    check_align()
    rows = []
    for case in CASES:
        for M in args.m:
            config, source = pick_config(case, M)
            touched = case.E * (1 - (1 - case.topk / case.E) ** M)
            rows.append(dict(case=case.name, model=case.model, tp=case.tp, dtype=case.dtype, E=case.E,
                             topk=case.topk, K=case.K, N=case.N, M=M, config_source=source,
                             config=json.dumps(config, sort_keys=True), copies=n_copies(case),
                             expected_touched=touched, bytes_touched=touched * case.weight_bytes_per_expert,
                             naive_assignment=M * case.topk * 4 <= case.E, ex_rows=case.ex_rows,
                             error="dry run: not timed"))
    kernels = {(r["config"], r["naive_assignment"]) for r in rows}
    print(f"{len(rows)} MoE rows, {len(kernels)} distinct kernel configs; tuned files: "
          f"{sorted({r['config_source'] for r in rows})}")
    if not args.no_block:
        block = [dict(case=f"bf8-dsr1-tp8-{name}", model="DeepSeek-V3/R1", tp=8, dtype="fp8-block", N=N, K=K,
                      M=M, copies=block_copies(N, K), config_source=pick_block_config(N, K, M)[1],
                      config=json.dumps(pick_block_config(N, K, M)[0], sort_keys=True), error="dry run: not timed")
                 for name, N, K in DSR1_TP8_LINEARS for M in BLOCK_DENSE_M]
        missing = sorted({r["case"] for r in block if r["config_source"] == "default"})
        print(f"{len(block)} block-fp8 dense rows; without a tuned H200 config: {missing or 'none'}")
        rows += block
    meta = environment(args)
    meta["dry_run"] = True
    write(Path(args.out), rows, meta)
    print(f"wrote {args.out}")
    return 0


def precompile_worker(names: list[str], ms: list[int], q) -> None:
    """Compile (by running once, small weights) the kernels of some cases, filling the shared Triton cache."""
    import vllm_kernels as kern
    for name in names:
        if name.startswith("bf8:"):  # a block-fp8 dense linear: ms are its Ms
            _, N, K = name.split(":")
            N, K = int(N), int(K)
            gen = torch.Generator(device="cuda").manual_seed(0)
            w, s = fp8_weight(N, K, "cuda", gen)
            for M in ms:
                try:
                    xq, xs = group_quant(torch.randn(M, K, device="cuda", dtype=torch.bfloat16), kern)
                    block_mm(kern, xq, w, xs, s, torch.empty(M, N, device="cuda", dtype=torch.bfloat16),
                             pick_block_config(N, K, M)[0])
                    torch.cuda.synchronize()
                except Exception:
                    pass
            continue
        case = next(c for c in CASES if c.name == name)
        gen = torch.Generator(device="cuda").manual_seed(0)
        layer = Layer(case, 1, "cuda", gen)
        for M in ms:
            try:
                config, _ = pick_config(case, M)
                x = torch.randn(M, case.K, device="cuda", dtype=torch.bfloat16, generator=gen)
                tw, ids = routing(M, case.E, case.topk, "cuda", gen)
                Step(kern, layer, 0, x, tw, ids, config, True, True).layer()
                torch.cuda.synchronize()
            except Exception:
                pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="out")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--interpret-check", action="store_true")
    ap.add_argument("--m", type=int, nargs="+", default=list(M_VALUES))
    ap.add_argument("--cases", nargs="*", default=None)
    ap.add_argument("--budget-s", type=float, default=270.0, help="stop starting new rows after this")
    ap.add_argument("--workers", type=int, default=12, help="processes that pre-compile the kernels")
    ap.add_argument("--no-dense", action="store_true")
    ap.add_argument("--no-large", action="store_true", help="skip M_LARGE")
    ap.add_argument("--no-block", action="store_true", help="skip the block-fp8 dense linears")
    ap.add_argument("--block-budget-s", type=float, default=60.0, help="time for the block-fp8 dense linears")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    if args.interpret_check:
        return interpret_check()
    if args.dry_run:
        return dry_run(args)
    start = time.time()
    os.environ.setdefault("TRITON_CACHE_DIR", "/tmp/triton_cache_moe")  # shared with the compile workers
    out = Path(args.out)
    logf = open(out / "bench_log.txt", "a") if out.exists() else None  # noqa: SIM115 - open for the whole run

    def log(msg: str) -> None:
        print(msg, flush=True)
        if logf:
            logf.write(msg + "\n")
            logf.flush()

    import triton
    import vllm_kernels as kern
    triton.set_allocator(_scratch)
    cases = [c for c in CASES if args.cases is None or c.name in args.cases]
    cases.sort(key=lambda c: c.priority)
    meta = environment(args)
    log(json.dumps({k: v for k, v in meta.items() if k != "nvidia_smi"}))
    log(meta.get("nvidia_smi", ""))
    hopper = torch.cuda.get_device_capability(0) == (9, 0)
    if args.workers > 0:
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        jobs = [(c.name, m) for c in cases
                for m in list(args.m) + (list(M_LARGE) if c.priority == 0 and not args.no_large else [])]
        if not args.no_block:
            jobs += [(f"bf8:{N}:{K}", m) for _, N, K in DSR1_TP8_LINEARS for m in BLOCK_DENSE_M]
        per = [jobs[i::args.workers] for i in range(args.workers)]  # round-robin: spread the compiles
        procs = []
        for part in per:
            if part:
                p = ctx.Process(target=_precompile_entry, args=(part, q))
                p.start()
                procs.append(p)
        for p in procs:
            p.join(timeout=max(10.0, 150.0 - (time.time() - start)))
            if p.is_alive():
                p.terminate()
        log(f"precompile: {len(jobs)} jobs in {len(procs)} processes, {time.time() - start:.0f} s")
    meta["ceilings_start"] = copy_bandwidth()
    log(f"ceilings at start: {meta['ceilings_start']}")
    deadline = start + args.budget_s
    rows: list = []
    block_done = args.no_block
    for case in cases:
        if case.priority > 0 and not block_done:  # the block-fp8 linears before the cases already timed once
            log(f"block-fp8 dense linears of DeepSeek-R1 tp8 (vLLM's Triton w8a8 block kernel), "
                f"{args.block_budget_s:.0f} s")
            bench_block_fp8_dense(kern, time.time() + args.block_budget_s, rows, log)
            write(out, rows, meta)
            block_done = True
        log(f"{case.name}: E={case.E} top{case.topk} K={case.K} N={case.N} {case.dtype} copies={n_copies(case)}")
        ms = list(args.m) + (list(M_LARGE) if case.priority == 0 and not args.no_large else [])
        bench_case(kern, case, ms, hopper, deadline, rows, log)
        write(out, rows, meta)
    if not block_done:
        bench_block_fp8_dense(kern, time.time() + args.block_budget_s, rows, log)
        write(out, rows, meta)
    if not args.no_dense:
        bench_dense(deadline + 30, rows, log)
    meta["ceilings_end"] = copy_bandwidth()
    log(f"ceilings at end: {meta['ceilings_end']}")
    meta["wall_s"] = time.time() - start
    write(out, rows, meta)
    log(f"done in {meta['wall_s']:.0f} s; {sum('error' in r for r in rows)} rows with errors")
    return 0


def _scratch(size: int, alignment: int, stream):
    """Triton's scratch allocator (vLLM sets one for its TMA descriptors: set_triton_allocator)."""
    return torch.empty(size, device="cuda", dtype=torch.int8)


def _precompile_entry(part, q) -> None:
    import triton
    triton.set_allocator(_scratch)
    sys.path.insert(0, str(HERE))
    by_case: dict[str, list[int]] = {}
    for name, m in part:
        by_case.setdefault(name, []).append(m)
    for name, ms in by_case.items():
        precompile_worker([name], ms, q)


if __name__ == "__main__":
    sys.exit(main())
