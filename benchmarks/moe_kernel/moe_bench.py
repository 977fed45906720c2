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
                + (f"  relerr {row['rel_err']:.2e}" if "rel_err" in row else "") + f"  [{source[:40]}]")
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


# ---------------------------------------------------------------------------------------------- output
FIELDS = ("case", "model", "tp", "dtype", "E", "topk", "K", "N", "M", "layer_us", "gemm1_us", "gemm2_us",
          "experts_touched", "expected_touched", "tokens_per_touched_expert", "bytes_touched", "layer_gb_per_s",
          "gemms_gb_per_s", "flops", "rel_err", "max_abs_err", "config_source", "config", "swap_ab", "tma_b",
          "naive_assignment", "copies", "timing", "ex_rows", "error")


def write(out: Path, rows: list, meta: dict) -> None:
    import csv
    out.mkdir(parents=True, exist_ok=True)
    moe = [r for r in rows if not r["case"].startswith("dense-")]
    dense = [r for r in rows if r["case"].startswith("dense-")]
    for name, part in (("moe_kernel_h200.csv", moe), ("dense_gemm_h200.csv", dense)):
        with open(out / name, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
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
    meta = environment(args)
    meta["dry_run"] = True
    write(Path(args.out), rows, meta)
    print(f"wrote {args.out}")
    return 0


def precompile_worker(names: list[str], ms: list[int], q) -> None:
    """Compile (by running once, small weights) the kernels of some cases, filling the shared Triton cache."""
    import vllm_kernels as kern
    for name in names:
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
    for case in cases:
        log(f"{case.name}: E={case.E} top{case.topk} K={case.K} N={case.N} {case.dtype} copies={n_copies(case)}")
        ms = list(args.m) + (list(M_LARGE) if case.priority == 0 and not args.no_large else [])
        bench_case(kern, case, ms, hopper, deadline, rows, log)
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
