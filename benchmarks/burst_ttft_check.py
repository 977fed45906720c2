"""A burst's median TTFT, measured against its replay: what a run spent that the replay has no step for.

The burst rows whose own result file is stored (a '[lengths: FILE]' tag: LambdaLabsML's vLLM 0.6.0 runs of 320
ShareGPT prompts at once) record the run's median TTFT beside its throughput. The replay
(performance.simulate_drain, with the row's engine profile) gives every request's first-token time, so the two
medians can be compared; `benchmark_serving` counts a request that streamed nothing as TTFT 0, and so does the
comparison (DrainResult.median_ttft_s). Never fitted: a check of the drain, and a reading of the rows it misses.

Every dense run of the release waits longer for its first token than the replay says, by 0.6 - 1.5 s (what the
replay leaves out of a burst's start: the server taking in 320 requests, the client's clock starting before any is
sent); the excess is printed per run. A pause of the whole engine adds to that: a Triton kernel compiled mid-run
stops every request (vllm PR #55268 describes the fused-MoE kernel compiling per token-count tile config and per
16-divisibility of its sizes, variants start-up warm-up does not reach), lengthening the run and every TTFT after
it. So a MoE run whose excess lies beyond every dense run's is read as having paused for its excess less the dense
runs' median excess (the first prefills meet the new shapes, so a pause lies before most first tokens), and the
throughput it would have shown without the pause is printed: output tokens / (duration - pause). The rows keep
their measured values in every target; the estimate is a reading, not a correction. Used by accuracy.py;
`python benchmarks/burst_ttft_check.py` alone too.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

@dataclass(frozen=True)
class BurstTtft:
    """One burst row: its run's median TTFT and throughput, measured and replayed."""

    row_id: str
    label: str
    moe: bool
    measured_ms: float
    replayed_ms: float
    duration_s: float
    output_tokens: int
    measured_tps: float
    predicted_tps: float

    @property
    def excess_s(self) -> float:
        """Measured less replayed median TTFT."""
        return (self.measured_ms - self.replayed_ms) / 1e3

    def without(self, pause_s: float) -> float:
        """Output tok/s with a pause of `pause_s` taken out of the run's duration."""
        return self.output_tokens / (self.duration_s - pause_s)


def burst_ttfts() -> list[BurstTtft]:
    """Every burst row with a stored result file that records a median TTFT."""
    import accuracy
    from calibration_rows import DATA, arch, burst_of, model_of, read_rows

    out = []
    for row in read_rows():
        burst = burst_of(row)
        if burst is None or burst.lengths is None or burst.clients is not None:
            continue
        data = json.loads((DATA / burst.lengths).read_text())
        if "median_ttft_ms" not in data:
            continue
        outcome = accuracy.evaluate_row(row)
        if isinstance(outcome, str):
            continue
        replays = [r for k, r in accuracy._DRAINS.items() if k[0] == row["id"]]
        if not replays:
            continue
        name = model_of(row["model"])
        assert name is not None  # evaluate_row predicted it
        empty = sum(1 for n in data["output_lens"] if n == 0)
        out.append(BurstTtft(
            row["id"], f"{Path(burst.lengths).stem.split('_p')[0]}", arch(name).num_experts > 0,
            float(data["median_ttft_ms"]), replays[-1].result.median_ttft_s(empty) * 1e3, float(data["duration"]),
            int(data["total_output_tokens"]), float(row["value"]), float(outcome.predicted or 0.0)))
    return out


def report() -> list[str]:
    """accuracy.py's section."""
    runs = burst_ttfts()
    lines = ["\nburst median TTFT, measured vs replayed (stored vLLM 0.6.0 result files, 320 prompts at once; a "
             "request that streamed nothing counted as 0, as benchmark_serving did; never fitted):"]
    dense = [r.excess_s for r in runs if not r.moe]
    if not runs or not dense:
        return [*lines, "  no dense burst row with a stored result file to compare with"]
    usual, most = statistics.median(dense), max(dense)
    for r in runs:
        lines.append(f"  {r.row_id} {r.label:<46} measured {r.measured_ms:6.0f} ms, replayed "
                     f"{r.replayed_ms:5.0f} ms: {r.excess_s:+5.1f} s")
    lines.append(f"  dense runs: excess median {usual:.2f} s ({min(dense):.2f} - {most:.2f} s, {len(dense)} runs)")
    paused = [r for r in runs if r.moe and r.excess_s > most]
    for r in paused:
        pause = r.excess_s - usual
        free, pred = r.without(pause), r.predicted_tps
        lines.append(f"  {r.row_id} MoE, {r.excess_s:.1f} s: read as a {pause:.1f} s pause; without it {free:5.0f} "
                     f"tok/s (measured {r.measured_tps:.0f}), predicted {pred:.0f}: {pred / free - 1:+.0%} (as "
                     f"measured {pred / r.measured_tps - 1:+.0%})")
    lines += low_load_lines()
    if paused:
        errs = [abs(r.predicted_tps / r.without(r.excess_s - usual) - 1) for r in paused]
        lines.append(f"  those runs without their pause: throughput median|err| {statistics.median(errs):.1%} (a "
                     "reading: the targets keep the measured values)")
    return lines


def low_load_lines() -> list[str]:
    """The same release's 10-prompt runs (benchmarks/data/lambda_v060/*_p10.json): one prefill of ~1,600 tokens, so
    a run's median TTFT is that step and the serving path. Mixtral-8x7B beside Llama-3-70B (five times its active
    parameters): a compute time falls with tp, a compile does not."""
    from calibration_rows import DATA

    lines = []
    for model in ("Mixtral-8x7B-Instruct-v0.1", "Meta-Llama-3-70B-Instruct"):
        for gpu in ("H100", "A100"):
            series = []
            for tp in (1, 2, 4, 8):
                path = DATA / "lambda_v060" / f"{tp}x{gpu}_{model}_tp{tp}_p10.json"
                if path.exists():
                    series.append(f"tp{tp} {json.loads(path.read_text())['median_ttft_ms']:.0f}")
            if series:
                lines.append(f"  10 prompts at once, {model} on {gpu}: median TTFT ms {', '.join(series)}")
    return lines


if __name__ == "__main__":
    print("\n".join(report()))
