"""Property: a `--hardware` file (what `infragen hardware probe` writes, then edited by hand) with hostile figures
-> `estimate` exits 0, 2 or 3 with an `Error:` line; never an internal error (exit 70).

Fuzzing these files found `memory_gib: .inf` accepted and the llama.cpp KV budget turned into NaN (exit 70). A
bounded number of examples in the normal run; INFRAGEN_FUZZ_EXAMPLES raises it.
"""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.sizing.test_calibrate_fuzz import hostile
from tests.spec.conftest import run_cli

EXAMPLES = int(os.environ.get("INFRAGEN_FUZZ_EXAMPLES", "15"))
BASE = yaml.safe_load((Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "llama_bench"
                       / "machine-2026-12-05.yaml").read_text())
PATHS = [("vcpus",), ("physical_cores",), ("cpu_sockets",), ("memory_gib",), ("name",), ("gpu",), ("gpu_count",),
         ("measured", "memory_bandwidth_gb_per_s"), ("measured", "processes"), ("cpu", "simd"), ("cpu", "arch"),
         ("cpu", "fp32_flops_per_cycle_per_core"), ("cpu", "sustained_clock_ghz"), ("cpu", "threads_per_core"),
         ("cpu", "memory_bandwidth_gb_per_s"), ("cpu", "vendor")]
RUNS = [["--concurrency", "1"], ["--rate", "0.5"], ["--concurrency", "max"]]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_hostile_hardware_files_never_crash(data: st.DataObject) -> None:
    doc: dict[str, Any] = copy.deepcopy(BASE)
    for path in data.draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=3)):
        parent = doc if len(path) == 1 else doc[path[0]]
        parent[path[-1]] = data.draw(hostile)
    with tempfile.TemporaryDirectory() as tmp:
        machine = Path(tmp) / "machine.yaml"
        try:
            machine.write_text(yaml.safe_dump(doc))
        except OverflowError:
            return  # not writable as YAML, so not a file anyone can give
        r = run_cli("estimate", "--model", "tinyllama-1.1b", "--precision", "q4_0", "--engine", "llama.cpp",
                    "--input-len", "100", "--output-len", "50", *data.draw(st.sampled_from(RUNS)),
                    "--hardware", str(machine))
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err
    assert r.code in (0, 2, 3), (r.code, r.err)
    if r.code:
        assert "Error: " in r.err
