"""Property: a `vllm bench serve` or `llama-bench` result file with hostile numbers -> exit 0 (a profile whose
factors are finite and within their bounds), 2 or 3 with an `Error:` line; never an internal error (exit 70).

Fuzzing these files by hand found four: JSON's `Infinity` and 400-digit integers (OverflowError), a test longer
than the model's context and a run that served nothing (ZeroDivisionError). A bounded number of examples in the
normal run; INFRAGEN_FUZZ_EXAMPLES raises it (`.ci/run` runs a hundred).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.spec.conftest import run_cli

EXAMPLES = int(os.environ.get("INFRAGEN_FUZZ_EXAMPLES", "15"))
DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
NERDALERT = (DATA / "vllm_results" / "nerdalert-h100-llama-3.1-8b-results.jsonl").read_text().splitlines()
VLLM_BASES = [json.loads(NERDALERT[i]) for i in (1, 3, 5)]  # online within capacity, past it, a burst
VLLM_KEYS = ["completed", "total_input_tokens", "total_output_tokens", "output_throughput", "median_tpot_ms",
             "median_ttft_ms", "max_concurrency", "request_rate", "request_throughput", "mean_e2el_ms",
             "mean_ttft_ms", "mean_tpot_ms", "input_lens", "output_lens", "itls"]
LLAMA = json.loads((DATA / "llama_bench" / "llama-bench-llama3.1-8b-f16-2026-12-05.json").read_text())
LLAMA_KEYS = ["n_prompt", "n_gen", "avg_ts", "model_type", "samples_ts"]

hostile = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**20), max_value=10**20),
    st.sampled_from([10**400, 2**63, 0, 1, -1]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e-300, 1e300, 0.5]),
    st.text(max_size=12), st.sampled_from(["inf", "nan", "1e9", "llama 8B Q4_0", "llama 8B XX"]),
    st.lists(st.one_of(st.integers(min_value=-5, max_value=10**9), st.floats(allow_nan=True)), max_size=4),
)


def _run(name: str, text: str, *argv: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path, out = Path(tmp) / name, Path(tmp) / "profile.yaml"
        path.write_text(text)
        r = run_cli("calibrate", str(path), *argv, "-o", str(out))
        assert "Traceback" not in r.err and "internal error" not in r.err, r.err
        assert r.code in (0, 2, 3), (r.code, r.err)
        if r.code:
            assert "Error: " in r.err and not out.exists()
            return
        profile = yaml.safe_load(out.read_text())
        for factor, bounds in (("decode_factor", "decode_bounds"), ("prefill_factor", "prefill_bounds")):
            low, high = profile[bounds]
            assert math.isfinite(profile[factor]) and low - 1e-4 <= profile[factor] <= high + 1e-4


def _mutated(base: dict[str, Any], keys: list[str], draw: st.DrawFn) -> dict[str, Any]:
    doc = dict(base)
    for key in draw(st.lists(st.sampled_from(keys), min_size=1, max_size=3)):
        doc[key] = draw(hostile)
    return doc


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_hostile_vllm_results_never_crash(data: st.DataObject) -> None:
    doc = _mutated(data.draw(st.sampled_from(VLLM_BASES)), VLLM_KEYS, data.draw)
    _run("result.json", json.dumps(doc), "--model", str(DATA / "vllm_results" / "llama-3.1-8b-instruct-config.json"),
         "--precision", "bf16", "--gpu", "h100-sxm-80gb", "--gpus", "1")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_hostile_llama_bench_output_never_crashes(data: st.DataObject) -> None:
    rows = [dict(r) for r in LLAMA["results"]]
    i = data.draw(st.integers(min_value=0, max_value=len(rows) - 1))
    rows[i] = _mutated(rows[i], LLAMA_KEYS, data.draw)
    _run("bench.json", json.dumps(rows), "--model", str(DATA / "llama_bench" / "llama-3.1-8b-config.json"),
         "--hardware", str(DATA / "llama_bench" / LLAMA["hardware_file"]))


PROFILE = {"schema_version": 1, "kind": "infragen-calibration", "engine": "vllm", "hardware": "1 x h100-sxm-80gb",
           "gpus": "1 x h100-sxm-80gb", "tp": 1, "decode_factor": 1.1, "prefill_factor": 0.9,
           "decode_bounds": [0.2, 1.198],
           "prefill_bounds": [0.2, 1.333], "weight_types": ["bf16"], "model": "llama-3.1-8b",
           "model_shape": "931db1161aecd5e4", "inputs": [], "residuals": [], "created": "2026-12-06T13:00:00+00:00"}
PROFILE_KEYS = [*PROFILE, "serving_overhead_ms", "cpu"]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_hostile_profiles_never_crash_estimate_or_plan(data: st.DataObject) -> None:
    doc = _mutated(PROFILE, PROFILE_KEYS, data.draw)
    model = data.draw(st.sampled_from(["llama-3.1-8b", "qwen2.5-7b"]))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "profile.yaml"
        path.write_text(yaml.safe_dump(doc))
        r = run_cli("estimate", "--model", model, "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1",
                    "--input-len", "100", "--output-len", "50", "--concurrency", "4", "--calibration", str(path))
        assert "Traceback" not in r.err and "internal error" not in r.err, r.err
        assert r.code in (0, 2), (r.code, r.err)
        if r.code == 2:
            assert f"Error: {path}" in r.err or "Error: --calibration" in r.err, r.err
