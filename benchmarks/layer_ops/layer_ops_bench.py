"""Time one transformer layer's non-MoE kernels on a CUDA GPU: dense prefill (#18 gap A) and the MoE non-expert
costs of a decode step (#18 gap B).

Why: the step model prices dense prefill with one compute fraction (0.44, fitted on Lambda vLLM 0.5.4 rows) and
leaves a MoE layer's router, norms, RoPE and decode attention at a roofline; the independent TTFT and many-expert
rows miss by 28 % / 33 %. This measures each kernel at the per-GPU shapes those rows run, so the model can use
measured costs instead.

(A) dense prefill, per layer and GPU: Llama-3.1-8B / 70B at tp 1/2/4/8 and Qwen2.5-0.5B at tp 1, M = 128 - 16384
    tokens: the four linear GEMMs (qkv, o, gate_up, down) in bf16 (torch F.linear -> cuBLAS) and fp8 (per-tensor
    scales, torch._scaled_mm -> cuBLASLt; vLLM 0.34.0 runs its own CUTLASS scaled_mm there, see README), the
    dynamic per-tensor fp8 activation quant (torch ops), causal self-attention (torch SDPA, FLASH_ATTENTION backend
    forced, GQA), fused residual-add + RMSNorm (F.rms_norm), SiLU-and-mul and neox RoPE (torch ops).
(B) MoE non-expert decode parts: Qwen3-235B-A22B at tp 8 / tp 4 (qkv / o GEMMs, router GEMM + softmax top-k,
    add + RMSNorm, q/k-norm, RoPE, GQA decode attention at the rows' batch x context) and DeepSeek-R1 at tp 8
    (MLA absorbed decode attention over the 512 + 64 latent, router GEMM + grouped top-k, the four norms, RoPE
    on the 64 rope dims, shared expert SiLU-and-mul).

Timing: every kernel is captured in a CUDA graph over `copies` distinct instances (weights and KV caches: >= 256 MB
in all, so that replays do not hit the 60 MiB L2), median of >= 20 replays / copies. Results are checked against a
float32 torch reference at the smallest size of each group.

Usage:
  python layer_ops_bench.py --out DIR                 # on a CUDA GPU
  python layer_ops_bench.py --dry-run --out DIR       # CPU: every op and check at tiny sizes, no timing
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

FP8 = torch.float8_e4m3fn
BF16 = torch.bfloat16
TARGET_BYTES = 256e6  # distinct bytes per graph (> 4 x the H200's 60 MiB L2)
MAX_COPIES = 16

# (hidden, heads, kv_heads, head_dim, intermediate, tps, EX rows) from each model's config.json
DENSE = {
    "llama-3.1-8b": (4096, 32, 8, 128, 14336, (1, 2, 4, 8), "EX0010 EX0017 EX0040-EX0049 (H100/A100, tp1)"),
    "llama-3.1-70b": (8192, 64, 8, 128, 28672, (1, 2, 4, 8), ""),
    "qwen2.5-0.5b": (896, 14, 2, 64, 4864, (1,), "EX0050 (L4, tp1)"),
}
M_PREFILL = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)

# Qwen3-235B-A22B: hidden 4096, 64 q heads, 4 kv heads, head_dim 128, 128 experts top-8, q/k RMSNorm per head.
QWEN3 = dict(hidden=4096, heads=64, kv=4, hd=128, E=128, topk=8)
QWEN3_TPS = ((8, "EX0025-EX0029 (bf16, 8xH100/A100)"), (4, "EX0030-EX0034 (fp8, 4xH100/A100)"))
# DeepSeek-V3/R1: hidden 7168, 128 heads (16 a GPU at tp 8), q_lora 1536, kv_lora 512, rope 64, nope 128,
# 256 routed experts top-8 in 8 groups (top-4 groups), 1 shared expert of 2048 (256 a GPU at tp 8).
DSR1 = dict(hidden=7168, heads=128, q_lora=1536, kv_lora=512, rope=64, nope=128, E=256, topk=8, groups=8,
            topk_groups=4, shared=2048, tp=8)
T_DECODE = (1, 4, 8, 16, 64, 168, 256, 537, 1024, 1817, 3524)  # tokens in a step (rows: 8, 537, 1817, 3524)
DECODE_BL = ((4, 334), (16, 334), (64, 334), (80, 4088), (161, 2048), (168, 4095), (256, 314), (256, 2048))


def log(msg: str) -> None:
    print(msg, flush=True)


# ---------------------------------------------------------------------------------------------- timing
def time_graph(fn: Callable[[], None], reps: int, warm: int = 3) -> tuple[float, str]:
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


def n_copies(bytes_one: float, dry: bool) -> int:
    if dry:
        return 1
    return int(min(MAX_COPIES, max(1, math.ceil(TARGET_BYTES / max(bytes_one, 1.0)))))


def rel(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got.float() - ref).norm() / ref.norm().clamp_min(1e-30))


class Bench:
    """Runs ops, times them (CUDA) or only executes them (dry run), collects rows."""

    def __init__(self, device: str, dry: bool, reps: int):
        self.device, self.dry, self.reps = device, dry, reps
        self.rows: list[dict] = []
        self.gen = torch.Generator(device=device).manual_seed(0)

    def randn(self, *shape: int, dtype: torch.dtype = BF16, scale: float = 1.0) -> torch.Tensor:
        t = torch.randn(*shape, device=self.device, dtype=torch.float32, generator=self.gen)
        return (t * scale).to(dtype)

    def measure(self, row: dict, make: Callable[[int], Callable[[], object]], bytes_one: float,
                check: Callable[[], float] | None = None) -> dict:
        """make(i) returns the i-th instance's callable (distinct tensors); all copies go into one graph."""
        row = dict(row)
        fns: list[Callable[[], object]] = []
        try:
            copies = n_copies(bytes_one, self.dry)
            fns.extend(make(i) for i in range(copies))

            def run() -> None:
                for f in fns:
                    f()
            row.update(copies=copies, bytes=bytes_one)
            if check is not None:
                row["rel_err"] = check()
            if self.dry:
                run()
                row.update(us=float("nan"), timing="dry-run")
            else:
                ms, method = time_graph(run, self.reps)
                us = 1e3 * ms / copies
                row.update(us=us, timing=method, gb_per_s=bytes_one / (us * 1e-6) / 1e9)
                if row.get("flops"):
                    row["tflops"] = row["flops"] / (us * 1e-6) / 1e12
            fns.clear()
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        self.rows.append(row)
        us = row.get("us")
        extra = f"{us:9.1f} us" if isinstance(us, float) and not math.isnan(us) else row.get("error", row.get(
            "timing", ""))
        log(f"  {row['case']:22s} {row['op']:16s} {row.get('dtype', ''):4s} M={row.get('M', '')!s:>5} "
            f"B={row.get('B', '')!s:>4} L={row.get('L', '')!s:>5} {extra} {row.get('tflops', 0) or 0:6.0f} TF "
            f"{row.get('gb_per_s', 0) or 0:6.0f} GB/s rel {row.get('rel_err', '')}")
        return row


# ---------------------------------------------------------------------------------------------- ops
def gemm_op(b: Bench, row: dict, M: int, N: int, K: int, dtype: str, check: bool) -> None:
    wbytes = N * K * (2 if dtype == "bf16" else 1)
    x = b.randn(M, K, scale=1.0)
    xq = x.to(FP8) if dtype == "fp8" else None
    one = torch.ones((), device=b.device, dtype=torch.float32)
    ws: dict[int, torch.Tensor] = {}

    def weight(i: int) -> torch.Tensor:
        if i not in ws:
            w = b.randn(N, K, scale=0.05)
            ws[i] = w.to(FP8) if dtype == "fp8" else w
        return ws[i]

    def make(i: int) -> Callable[[], object]:
        w = weight(i)
        if dtype == "bf16":
            return lambda: F.linear(x, w)
        return lambda: torch._scaled_mm(xq, w.t(), scale_a=one, scale_b=one, out_dtype=BF16)

    def ref() -> float:
        w = weight(0)
        if dtype == "bf16":
            return rel(F.linear(x, w), x.float() @ w.float().t())
        got = torch._scaled_mm(xq, w.t(), scale_a=one, scale_b=one, out_dtype=BF16)
        return rel(got, xq.float() @ w.float().t())
    row = dict(row, op=row["op"], dtype=dtype, M=M, N=N, K=K, flops=2.0 * M * N * K)
    b.measure(row, make, wbytes + M * K * (2 if dtype == "bf16" else 1) + 2 * M * N, ref if check else None)
    ws.clear()


def fp8_quant_op(b: Bench, row: dict, M: int, K: int, check: bool) -> None:
    """Dynamic per-tensor fp8 activation quant as torch ops (amax, scale, divide, clamp, cast)."""
    xs: dict[int, torch.Tensor] = {}

    def quant(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scale = (x.abs().amax().float() / 448.0).clamp_min(1e-12)
        return (x.float() / scale).clamp(-448.0, 448.0).to(FP8), scale

    def make(i: int) -> Callable[[], object]:
        xs[i] = xs.get(i, b.randn(M, K))
        return lambda: quant(xs[i])

    def ref() -> float:
        x = xs.get(0, b.randn(M, K))
        xs[0] = x
        q, s = quant(x)
        return rel(q.float() * s, x.float())
    b.measure(dict(row, op="fp8_quant", dtype="fp8", M=M, K=K), make, 3 * M * K, ref if check else None)


def rmsnorm_op(b: Bench, row: dict, M: int, H: int, check: bool, residual: bool = True, name: str = "add_rmsnorm",
               heads: int = 1) -> None:
    """vLLM's fused_add_rms_norm (residual add, then RMSNorm) as torch ops; heads > 1: per-head norm (q/k norm)."""
    w = b.randn(H, scale=0.1) + 1.0
    data: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def fn(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        if residual:
            x = x + r
        return F.rms_norm(x, (H,), w, 1e-6)

    def make(i: int) -> Callable[[], object]:
        data[i] = data.get(i, (b.randn(M, heads, H), b.randn(M, heads, H)))
        x, r = data[i]
        return lambda: fn(x, r)

    def ref() -> float:
        x, r = data.get(0) or (b.randn(M, heads, H), b.randn(M, heads, H))
        data[0] = (x, r)
        xf = x.float() + r.float() if residual else x.float()
        want = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
        return rel(fn(x, r), want)
    nbytes = M * heads * H * 2 * (4 if residual else 2)
    b.measure(dict(row, op=name, dtype="bf16", M=M, K=H * heads, heads=heads), make, nbytes, ref if check else None)


def silu_mul_op(b: Bench, row: dict, M: int, N: int, check: bool) -> None:
    data: dict[int, torch.Tensor] = {}

    def fn(g: torch.Tensor) -> torch.Tensor:
        return F.silu(g[:, :N]) * g[:, N:]

    def make(i: int) -> Callable[[], object]:
        data[i] = data.get(i, b.randn(M, 2 * N))
        return lambda: fn(data[i])

    def ref() -> float:
        g = data.get(0, b.randn(M, 2 * N))
        data[0] = g
        gf = g.float()
        return rel(fn(g), F.silu(gf[:, :N]) * gf[:, N:])
    b.measure(dict(row, op="silu_mul", dtype="bf16", M=M, N=N), make, M * 3 * N * 2, ref if check else None)


def rope_op(b: Bench, row: dict, M: int, hq: int, hk: int, rot: int, check: bool, max_pos: int = 32768) -> None:
    """Neox RoPE on q [M, hq, rot] and k [M, hk, rot] from a cos/sin cache indexed by positions (torch ops)."""
    inv = 1.0 / (500000.0 ** (torch.arange(0, rot, 2, device=b.device, dtype=torch.float32) / rot))
    t = torch.arange(max_pos, device=b.device, dtype=torch.float32)
    freqs = torch.outer(t, inv)
    cos, sin = freqs.cos().to(BF16), freqs.sin().to(BF16)
    pos = torch.randint(0, max_pos, (M,), device=b.device, generator=b.gen)
    data: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def rot_one(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        x1, x2 = x[..., : rot // 2], x[..., rot // 2:]
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)

    def fn(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c, s = cos[pos].unsqueeze(1), sin[pos].unsqueeze(1)
        return rot_one(q, c, s), rot_one(k, c, s)

    def make(i: int) -> Callable[[], object]:
        data[i] = data.get(i, (b.randn(M, hq, rot), b.randn(M, hk, rot)))
        q, k = data[i]
        return lambda: fn(q, k)

    def ref() -> float:
        q, k = data.get(0) or (b.randn(M, hq, rot), b.randn(M, hk, rot))
        data[0] = (q, k)
        c, s = freqs.cos()[pos].unsqueeze(1), freqs.sin()[pos].unsqueeze(1)
        return rel(fn(q, k)[0], rot_one(q.float(), c, s))
    b.measure(dict(row, op="rope", dtype="bf16", M=M, heads=hq, kv_heads=hk, head_dim=rot), make,
              2 * 2 * M * (hq + hk) * rot, ref if check else None)


def _flash_ctx(b: Bench):
    if b.device == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    import contextlib
    return contextlib.nullcontext()


def sdpa_op(b: Bench, row: dict, B: int, Lq: int, L: int, hq: int, hk: int, hd: int, causal: bool,
            check: bool, op: str) -> None:
    """Flash attention through torch SDPA: q [B, hq, Lq, hd] against K/V [B, hk, L, hd] (GQA, enable_gqa). If the
    flash backend refuses enable_gqa, K/V are built expanded to hq heads (recorded in `backend`)."""
    kv_heads = hk
    try:
        with _flash_ctx(b):
            q, k = b.randn(1, hq, 2, hd), b.randn(1, hk, 2, hd)
            F.scaled_dot_product_attention(q, k, k, is_causal=causal, enable_gqa=hk != hq)
        backend = "flash (enable_gqa)" if b.device == "cuda" else "cpu default"
    except RuntimeError:
        kv_heads = hq
        backend = "flash (K/V expanded to the q heads)"
    data: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def inputs(i: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if i not in data:
            data[i] = (b.randn(B, hq, Lq, hd), b.randn(B, kv_heads, L, hd), b.randn(B, kv_heads, L, hd))
        return data[i]

    def call(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        with _flash_ctx(b):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv_heads != hq)

    def make(i: int) -> Callable[[], object]:
        q, k, v = inputs(i)
        return lambda: call(q, k, v)

    def ref() -> float:
        q, k, v = inputs(0)
        kf = k.float().repeat_interleave(hq // kv_heads, 1)
        vf = v.float().repeat_interleave(hq // kv_heads, 1)
        s = q.float() @ kf.transpose(-1, -2) / math.sqrt(hd)
        if causal:
            s = s.masked_fill(torch.ones(Lq, L, dtype=torch.bool, device=b.device).triu(1 + L - Lq), float("-inf"))
        return rel(call(q, k, v), s.softmax(-1) @ vf)
    pairs = Lq * L / 2 if causal and Lq == L else Lq * L
    flops = 4.0 * B * hq * hd * pairs
    nbytes = 2 * B * (hq * Lq * hd * 2 + kv_heads * L * hd * 2)
    b.measure(dict(row, op=op, dtype="bf16", B=B, M=B * Lq, L=L, heads=hq, kv_heads=hk, head_dim=hd, flops=flops,
                   backend=backend), make, nbytes, ref if check else None)
    data.clear()


def mla_decode_op(b: Bench, row: dict, B: int, L: int, check: bool) -> None:
    """MLA absorbed decode attention for 16 local heads over the latent cache [B, L, 512 + 64] as torch bmms
    (scores against the whole 576, softmax in fp32, values = the first 512); then SDPA beside it."""
    h, dk, dv = DSR1["heads"] // DSR1["tp"], DSR1["kv_lora"] + DSR1["rope"], DSR1["kv_lora"]
    scale = 1.0 / math.sqrt(DSR1["nope"] + DSR1["rope"])
    data: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def inputs(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if i not in data:
            data[i] = (b.randn(B, h, dk), b.randn(B, L, dk))
        return data[i]

    def bmm(q: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        s = torch.bmm(q, c.transpose(1, 2)).float() * scale
        return torch.bmm(s.softmax(-1).to(BF16), c[:, :, :dv])

    def sdpa(q: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q.unsqueeze(2), c.unsqueeze(1), c[:, :, :dv].unsqueeze(1),
                                              scale=scale, enable_gqa=True).squeeze(2)

    def ref() -> float:
        q, c = inputs(0)
        s = (q.float() @ c.float().transpose(1, 2)) * scale
        return rel(bmm(q, c), s.softmax(-1) @ c.float()[:, :, :dv])
    nbytes = 2 * B * (L * dk + h * dk + h * dv)
    flops = 2.0 * B * h * L * (dk + dv)
    base = dict(row, dtype="bf16", B=B, M=B, L=L, heads=h, kv_heads=1, head_dim=dk, flops=flops)
    def make_bmm(i: int) -> Callable[[], object]:
        q, c = inputs(i)
        return lambda: bmm(q, c)

    def make_sdpa(i: int) -> Callable[[], object]:
        q, c = inputs(i)
        return lambda: sdpa(q, c)
    b.measure(dict(base, op="mla_decode_bmm", backend="torch bmm + softmax"), make_bmm, nbytes,
              ref if check else None)

    def sref() -> float:
        q, c = inputs(0)
        return rel(sdpa(q, c), bmm(q, c).float())
    b.measure(dict(base, op="mla_decode_sdpa", backend="torch SDPA (its own choice; 576 > flash's 256)"),
              make_sdpa, nbytes, sref if check else None)
    data.clear()


def router_ops(b: Bench, row: dict, T: int, E: int, K: int, topk: int, grouped: bool, check: bool) -> None:
    """Router GEMM [E, K] (bf16, replicated) and the top-k selection as torch ops: Qwen3 softmax -> top-k ->
    renormalise; DeepSeek-V3 sigmoid + correction bias -> top-2 sum per group -> top-4 groups -> top-8 -> weights
    renormalised x 2.5."""
    gemm_op(b, dict(row, op="router_gemm"), T, E, K, "bf16", check)
    logits: dict[int, torch.Tensor] = {}
    bias = b.randn(E, dtype=torch.float32, scale=0.01)
    g, tg = DSR1["groups"], DSR1["topk_groups"]

    def select(x: torch.Tensor, dt: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
        if not grouped:
            p = x.to(dt).softmax(-1)
            w, ids = p.topk(topk, -1)
            return w / w.sum(-1, keepdim=True), ids
        s = x.to(dt).sigmoid()
        sb = s + bias.to(dt)
        gs = sb.view(T, g, E // g).topk(2, -1)[0].sum(-1)
        gidx = gs.topk(tg, -1)[1]
        mask = torch.zeros_like(gs).scatter_(1, gidx, 1.0)
        smask = mask.unsqueeze(-1).expand(T, g, E // g).reshape(T, E)
        ids = sb.masked_fill(smask == 0, float("-inf")).topk(topk, -1)[1]
        w = s.gather(1, ids)
        return w / w.sum(-1, keepdim=True) * 2.5, ids

    def make(i: int) -> Callable[[], object]:
        logits[i] = logits.get(i, b.randn(T, E))
        return lambda: select(logits[i])

    def ref() -> float:
        x = logits.get(0, b.randn(T, E))
        logits[0] = x
        w, ids = select(x)
        w2, ids2 = select(x, torch.float64)  # the same selection in float64: ids must agree, weights to fp32
        same = float((ids.sort(-1)[0] == ids2.sort(-1)[0]).float().mean())
        return 1.0 - same + rel(w, w2.float())
    b.measure(dict(row, op="topk_grouped" if grouped else "topk_softmax", dtype="fp32", M=T, N=E), make,
              T * E * 2, ref if check else None)


# ---------------------------------------------------------------------------------------------- sections
def section_dense(b: Bench, models: list[str], tps: tuple[int, ...] | None, ms: tuple[int, ...],
                  deadline: float, flush: Callable[[], None]) -> None:
    for name in models:
        hidden, heads, kv, hd, inter, model_tps, ex = DENSE[name]
        for tp in tps or model_tps:
            if tp not in model_tps:
                continue
            hq, hk = heads // tp, max(1, kv // tp)
            shapes = (("qkv", (hq + 2 * hk) * hd, hidden), ("o", hidden, hq * hd), ("gate_up", 2 * inter // tp,
                      hidden), ("down", hidden, inter // tp))
            for i, M in enumerate(ms):
                if time.time() > deadline:
                    log(f"  deadline: skip {name} tp{tp} M>={M}")
                    break
                first = i == 0
                row = dict(section="dense_prefill", case=f"{name}-tp{tp}", model=name, tp=tp, ex_rows=ex)
                for dtype in ("bf16", "fp8"):
                    for op, N, K in shapes:
                        gemm_op(b, dict(row, op=op), M, N, K, dtype, first)
                fp8_quant_op(b, row, M, hidden, first)
                sdpa_op(b, row, 1, M, M, hq, hk, hd, True, first, "attn_prefill")
                rmsnorm_op(b, row, M, hidden, first)
                silu_mul_op(b, row, M, inter // tp, first)
                rope_op(b, row, M, hq, hk, hd, first)
                if b.device == "cuda":
                    torch.cuda.empty_cache()
            flush()


def section_moe(b: Bench, ts: tuple[int, ...], bls: tuple[tuple[int, int], ...], deadline: float,
                flush: Callable[[], None]) -> None:
    q = QWEN3
    for tp, ex in QWEN3_TPS:
        hq, hk = q["heads"] // tp, max(1, q["kv"] // tp)
        row = dict(section="moe_nonexpert", case=f"qwen3-235b-tp{tp}", model="Qwen3-235B-A22B", tp=tp, ex_rows=ex)
        for i, T in enumerate(ts):
            if time.time() > deadline:
                log(f"  deadline: skip qwen3 tp{tp} T>={T}")
                break
            first = i == 0
            for dtype in ("bf16", "fp8"):
                gemm_op(b, dict(row, op="qkv"), T, (hq + 2 * hk) * q["hd"], q["hidden"], dtype, first)
                gemm_op(b, dict(row, op="o"), T, q["hidden"], hq * q["hd"], dtype, first)
            router_ops(b, row, T, q["E"], q["hidden"], q["topk"], False, first)
            rmsnorm_op(b, row, T, q["hidden"], first)
            rmsnorm_op(b, row, T, q["hd"], first, residual=False, name="qk_norm", heads=hq + hk)
            rope_op(b, row, T, hq, hk, q["hd"], first)
        for i, (B, L) in enumerate(bls):
            if time.time() > deadline:
                break
            sdpa_op(b, row, B, 1, L, hq, hk, q["hd"], False, i == 0, "attn_decode")
        flush()
    d = DSR1
    tp = d["tp"]
    row = dict(section="moe_nonexpert", case="dsr1-tp8", model="DeepSeek-V3/R1", tp=tp,
               ex_rows="EX0035-EX0037 (fp8, 8xH200)")
    for i, T in enumerate(ts):
        if time.time() > deadline:
            log(f"  deadline: skip dsr1 T>={T}")
            break
        first = i == 0
        router_ops(b, row, T, d["E"], d["hidden"], d["topk"], True, first)
        rmsnorm_op(b, row, T, d["hidden"], first)
        rmsnorm_op(b, row, T, d["q_lora"], first, residual=False, name="rmsnorm_q_a")
        rmsnorm_op(b, row, T, d["kv_lora"], first, residual=False, name="rmsnorm_kv_a")
        rope_op(b, row, T, d["heads"] // tp, 1, d["rope"], first)
        silu_mul_op(b, row, T, d["shared"] // tp, first)
    for i, (B, L) in enumerate(bls):
        if time.time() > deadline:
            break
        mla_decode_op(b, row, B, L, i == 0)
    flush()


# ---------------------------------------------------------------------------------------------- output
FIELDS = ("section", "case", "model", "tp", "op", "dtype", "M", "B", "L", "N", "K", "heads", "kv_heads", "head_dim",
          "us", "tflops", "gb_per_s", "flops", "bytes", "rel_err", "backend", "copies", "timing", "ex_rows", "error")


def write(out: Path, rows: list[dict], meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, section in (("dense_prefill_h200.csv", "dense_prefill"), ("moe_nonexpert_h200.csv", "moe_nonexpert")):
        part = [r for r in rows if r["section"] == section]
        if not part:
            continue
        with open(out / name, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
            w.writeheader()
            for r in part:
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    (out / "layer_ops_h200.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")


def environment() -> dict:
    meta = {"command": " ".join([sys.executable, *sys.argv]), "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ",
            time.gmtime()), "python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None}
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


def read_ceiling(b: Bench) -> dict:
    """HBM read ceiling: a sum over 4 GiB of float32 (GB/s)."""
    if b.dry:
        return {}
    n = 1024 ** 3
    held = [torch.randn(n, dtype=torch.float32, device="cuda")]
    ms, _ = time_graph(lambda: torch.sum(held[0]), 20, warm=5)
    held.clear()
    torch.cuda.empty_cache()
    return {"read_gb_per_s": 4 * n / (ms * 1e-3) / 1e9}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes, every op and check, no timing")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--budget-dense-s", type=float, default=150.0)
    ap.add_argument("--budget-moe-s", type=float, default=90.0)
    ap.add_argument("--sections", default="dense,moe")
    args = ap.parse_args()
    if args.reps < 20:
        ap.error("--reps must be >= 20 (median of at least 20 replays)")
    dry = args.dry_run
    if not dry and not torch.cuda.is_available():
        print("no CUDA device: use --dry-run", file=sys.stderr)
        return 2
    b = Bench("cpu" if dry else "cuda", dry, args.reps)
    meta = environment()
    meta["dry_run"] = dry
    t0 = time.time()
    meta["ceiling_start"] = read_ceiling(b)
    log(f"start {meta['date_utc']} torch {meta['torch']} {meta.get('device')} ceiling {meta['ceiling_start']}")

    def flush() -> None:
        meta["wall_s"] = time.time() - t0
        write(args.out, b.rows, meta)

    sections = args.sections.split(",")
    if dry:
        models, tps, ms = ["llama-3.1-8b"], (8,), (16, 32)
        ts, bls = (4, 8), ((2, 40),)
    else:
        models, tps, ms, ts, bls = ["llama-3.1-8b", "llama-3.1-70b"], None, M_PREFILL, T_DECODE, DECODE_BL
    if "dense" in sections:
        log("== (A) dense prefill")
        section_dense(b, models, tps, ms, time.time() + args.budget_dense_s, flush)
    if "moe" in sections:
        log("== (B) MoE non-expert parts")
        section_moe(b, ts, bls, time.time() + args.budget_moe_s, flush)
    if "dense" in sections:
        log("== (A) Qwen2.5-0.5B")
        section_dense(b, ["qwen2.5-0.5b"], None, ms, time.time() + 20, flush)
    meta["ceiling_end"] = read_ceiling(b)
    flush()
    errors = [r for r in b.rows if r.get("error")]
    log(f"done: {len(b.rows)} rows, {len(errors)} errors, wall {time.time() - t0:.0f} s, out {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
