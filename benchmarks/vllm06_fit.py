"""Fit performance.yaml's `vllm-0.6` profile: the current `vllm` one plus two terms measured on vLLM 0.6.0.

1. layer_ops.decode_floor_us, on Lambda's low-load runs. Their `prompt_10` runs (benchmarks/data/lambda_v060/
   *_p10.json: 10 ShareGPT prompts sent at once, replies of up to ~1000 tokens, tp 1/2/4/8 on H100 and A100 SXM,
   September 2024) measure a decode step at a batch of ten or fewer: weight-read bound, so each run's median TPOT is
   one step time. The step model (vLLM's measured GEMMs, KV reads, all-reduces) predicts it too fast by a time that
   grows with the layers, not with the bytes a GPU reads: at tp 8 it misses by as many milliseconds as at tp 1.
   That time is a dense layer's floor (small kernels at their launch floor, attention's fixed time, the step's
   sampling spread over the layers), and tp does not divide it. Per GPU architecture: the median over that GPU's
   dense runs of (measured median TPOT - the model's step without the floor) / layers. It is charged to MoE layers
   too (their attention, norms and share of sampling are the dense layer's); the Mixtral runs are its checks.
2. overlapped_host_us_per_seq, on one saturation series. vLLM 0.6.0 processes outputs beside the GPU (async output
   processing, a separate API-server process), so a step takes at least that host time x its sequences, whatever
   the tp: the Llama-3-8B bf16 rows at tp 1/2/4/8 (EX0091-EX0094, 320 ShareGPT prompts at once) give it, by grid
   search for the least mean squared log error of their replayed output tok/s. Those four rows leave the independent
   set (calibration_rows.FITTED_ROWS); the other 20 rows of the series (Mistral-7B, Mistral-Nemo, Llama-3.1-8B-FP8,
   the 70B models, Mixtral) and every other EX row are checks.

`python benchmarks/vllm06_fit.py` prints both fits and the low-load runs' residuals with the constants in force.
"""
from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_rows import _accelerator, arch, model_of

from infragen.catalog import load_catalog
from infragen.sizing.memory import kv_bytes_per_token_per_layer
from infragen.sizing.performance import GpuSetup, gpu_figures, gpu_setup, token_step_s

DATA = Path(__file__).resolve().parent / "data" / "lambda_v060"
ENGINE = "vllm-0.6"
#: GPUs of the runs (file name prefix) and their catalog ids.
GPUS = {"H100": "h100-sxm", "A100": "a100-80gb"}


@dataclass(frozen=True)
class LowLoadRun:
    file: str
    gpu: str
    model: str
    precision: str
    tp: int
    requests: int
    """Requests with a reply (the decode batch starts at this and falls as replies end)."""
    mean_context: float
    measured_tpot_s: float

    def setup(self) -> GpuSetup:
        m = arch(self.model)
        acc = _accelerator(self.gpu, "")
        kv = kv_bytes_per_token_per_layer(m, 2.0, self.tp) * m.num_layers
        return gpu_setup(m, gpu_figures(acc), self.precision, kv, ENGINE, self.tp, 1, 1)

    @property
    def moe(self) -> bool:
        return arch(self.model).num_experts > 0

    def predicted_tpot_s(self, floor: bool = True) -> float:
        """One decode step at half the run's requests (the batch falls from all of them to one; at these sizes the
        step is weight-read bound: batch 1 and 10 differ by a few per cent) with the mean context."""
        s = self.setup()
        if not floor:
            s = replace(s, layer_floor_s=0.0)
        return token_step_s(s, max(self.requests / 2.0, 1.0), self.mean_context, 0.0, 0.0)


def low_load_runs(path: Path = DATA) -> list[LowLoadRun]:
    runs = []
    for f in sorted(path.glob("*_p10.json")):
        d = json.loads(f.read_text(encoding="utf-8"))
        name = model_of(d["model_id"])
        if name is None:
            raise ValueError(f"{f.name}: model {d['model_id']!r} not known to calibration_rows.model_of")
        pairs = [(i, o) for i, o in zip(d["input_lens"], d["output_lens"], strict=True) if o > 0]
        ctx = statistics.fmean(i + o / 2.0 for i, o in pairs)
        runs.append(LowLoadRun(
            file=f.name, gpu=GPUS[f.name.split("_")[0][2:]], model=name,
            precision="fp8" if "fp8" in d["model_id"].lower() else "bf16",
            tp=int(f.name.split("_tp")[1].split("_")[0]), requests=len(pairs), mean_context=ctx,
            measured_tpot_s=d["median_tpot_ms"] / 1e3))
    return runs


def fit(runs: list[LowLoadRun]) -> dict[str, float]:
    """Per GPU architecture: median over its dense runs of the per-layer time the model misses, microseconds."""
    gaps: dict[str, list[float]] = {}
    for r in runs:
        if r.moe:
            continue
        layers = arch(r.model).num_layers
        architecture = load_catalog().accelerator(r.gpu).architecture.lower()
        gaps.setdefault(architecture, []).append((r.measured_tpot_s - r.predicted_tpot_s(floor=False)) / layers)
    return {a: round(statistics.median(g) * 1e6, 1) for a, g in sorted(gaps.items())}


def report(runs: list[LowLoadRun]) -> list[str]:
    lines = []
    for label, keep in (("dense (fitted)", lambda r: not r.moe), ("Mixtral (check)", lambda r: r.moe)):
        chosen = [r for r in runs if keep(r)]
        errs = [r.predicted_tpot_s() / r.measured_tpot_s - 1 for r in chosen]
        before = [r.predicted_tpot_s(floor=False) / r.measured_tpot_s - 1 for r in chosen]
        lines.append(f"{label}: n={len(chosen)} median|err| {statistics.median(abs(e) for e in before):.1%} without "
                     f"the floor -> {statistics.median(abs(e) for e in errs):.1%} with it")
        for tp in (1, 2, 4, 8):
            e = [x for r, x in zip(chosen, errs, strict=True) if r.tp == tp]
            b = [x for r, x in zip(chosen, before, strict=True) if r.tp == tp]
            if e:
                lines.append(f"  tp {tp}: n={len(e)} median error {statistics.median(b):+.1%} -> "
                             f"{statistics.median(e):+.1%}")
    for r in runs:
        lines.append(f"  {r.file:<58} measured {r.measured_tpot_s * 1e3:6.2f} ms, predicted "
                     f"{r.predicted_tpot_s(floor=False) * 1e3:6.2f} without the floor, "
                     f"{r.predicted_tpot_s() * 1e3:6.2f} with it ({r.predicted_tpot_s() / r.measured_tpot_s - 1:+.0%})")
    return lines


#: Overlapped host time searched, microseconds per sequence per step.
HOST_GRID = tuple(range(0, 155, 5))


def fit_host(grid: tuple[int, ...] = HOST_GRID) -> tuple[float, dict[str, float]]:
    """(best overlapped_host_us_per_seq, each fitted row's error there): accuracy.py's replay of the FITTED_ROWS
    with the `vllm-0.6` profile in force and the term set to each grid value."""
    import math

    import accuracy  # benchmarks/ is on sys.path above
    from calibration_rows import FITTED_ROWS, read_rows

    from infragen.sizing import constants as constants_mod

    rows = [r for r in read_rows() if r["id"] in FITTED_ROWS and r["metric"] == "output_tokens_per_s"]
    base = constants_mod.load_constants()
    best: tuple[float, float, dict[str, float]] | None = None
    for value in grid:
        profile = base.engines[ENGINE].model_copy(update={"overlapped_host_us_per_seq": float(value)})
        errs = {}
        with accuracy.constants_in_force(base.model_copy(update={"engines": {**base.engines, ENGINE: profile}})):
            for row in rows:
                o = accuracy.evaluate_row(row)
                if isinstance(o, str) or o.predicted is None:
                    raise ValueError(f"fitted row unusable: {o}")
                errs[row["id"]] = o.error
        loss = statistics.fmean(math.log1p(e) ** 2 for e in errs.values())
        if best is None or loss < best[0]:
            best = (loss, float(value), errs)
    assert best is not None
    return best[1], best[2]


def main() -> None:
    runs = low_load_runs()
    print("layer_ops.decode_floor_us fitted:", fit(runs))
    host, errs = fit_host()
    print(f"overlapped_host_us_per_seq fitted: {host:g} (rows: "
          + ", ".join(f"{k} {v:+.1%}" for k, v in sorted(errs.items())) + ")")
    print("low-load runs with the constants in force:")
    print("\n".join(report(runs)))


if __name__ == "__main__":
    main()
