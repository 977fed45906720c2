"""Prints how fast `infragen plan` is: cold start of the command, in-process search time over the full catalog
(wall and CPU time, and how many estimates one plan computes: sizes sharing their GPUs share them, sizing/memo.py),
how the search time grows with the number of instance types, and what loading the catalog costs (the pre-built
catalog.json, then with every price row read, against building it from the YAML/CSV sources). Targets: cold start
<= 0.4 s, search <= 100 ms.

The repeated in-process searches answer partly from the load model's caches (open_loop.slo_rate and the load
points are cached on equal load models), so each example's first plan in a fresh process is printed as well: that
is what a command pays (with the cycle collector paused, as the command pauses it). Times depend on the machine's
load; `--instructions` adds the cold start's instruction count under valgrind's callgrind (repeatable to a few
parts in 10^5 whatever the load; about a minute)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from infragen.catalog import catalog_from_records, load_catalog
from infragen.catalog.models import resolve_model
from infragen.errors import InfeasibleError
from infragen.sizing import Estimate, estimate, plan_workload
from infragen.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "team-chatbot.yaml"


def cold_start_s(runs: int = 5) -> list[float]:
    """Wall time of fresh `infragen plan` processes. As after `pip install` (which compiles every module), the
    bytecode caches exist: a first, untimed run writes them even where PYTHONDONTWRITEBYTECODE is set, else each
    run would also compile ~200 modules from source and the figure would measure the compiler."""
    cmd = [sys.executable, "-m", "infragen", "plan", str(EXAMPLE), "--format", "json"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, env=env)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, env=env)
        times.append(time.perf_counter() - t)
    return times


def cold_start_instructions() -> int | None:
    """Instructions one `infragen plan` process executes (callgrind's `I refs`), or None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m", "infragen", "plan",
           str(EXAMPLE), "--format", "json"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    res = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT, env=env)
    found = re.search(r"I\s+refs:\s+([\d,]+)", res.stderr)
    return int(found.group(1).replace(",", "")) if found else None


_FIRST_PLAN = """
import gc, json, sys, time
gc.disable()  # as `infragen plan` does for the length of a command (infragen.cli.main)
from pathlib import Path
from infragen.catalog import load_catalog
from infragen.catalog.models import resolve_model
from infragen.sizing import plan_workload
from infragen.spec import load_spec
path = Path(sys.argv[1])
spec = load_spec(path)
model = resolve_model(spec.model, base_dir=path.parent, where="model")
catalog = load_catalog()
for inst in catalog.instances:  # an unpinned plan reads every region's prices: outside the clock, as before 2026-12-04
    inst.prices
spec = spec.model_copy(update={"cloud": "any", "regions": []})
c = time.process_time()
try:
    plan_workload(spec, catalog=catalog, model=model, workload_name="bench")
except Exception:  # an infeasible example still costs a full search
    pass
print(json.dumps((time.process_time() - c) * 1000))
"""


def first_plan_cpu_ms(example: Path, runs: int = 3) -> float:
    """Median CPU ms of the first plan_workload in a fresh process (imports and catalog load, all its prices read,
    excluded): no cache of the load model is warm yet and the cycle collector is paused, as in a command (with it
    running, its passes over the imported modules' objects added about 4 % to light-api's first plan)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = [json.loads(subprocess.run([sys.executable, "-c", _FIRST_PLAN, str(example)], check=True,
                                     capture_output=True, text=True, cwd=ROOT, env=env).stdout)
           for _ in range(runs)]
    return statistics.median(out)


def search_ms(example: Path, n_instances: int | None = None, runs: int = 5) -> tuple[float, float, int]:
    """(median wall ms, median CPU ms, estimates computed per plan) of planning `example` over the catalog."""
    spec = load_spec(example)
    model = resolve_model(spec.model, base_dir=example.parent, where="model")
    full = load_catalog()
    insts = full.instances if n_instances is None else full.instances[:n_instances]
    cat = catalog_from_records(full.accelerators.values(), full.cpus.values(), insts,
                               usd_per_cny=full.usd_per_cny, fx_source=full.fx_source)
    spec_any = spec.model_copy(update={"cloud": "any", "regions": []})
    computed = 0

    def counted(*args: Any, **kwargs: Any) -> Estimate:
        nonlocal computed
        computed += 1
        return estimate(*args, **kwargs)

    times, cpu = [], []
    for _ in range(runs):
        computed = 0
        t, c = time.perf_counter(), time.process_time()
        with contextlib.suppress(InfeasibleError):  # an infeasible small catalog still costs a full search
            plan_workload(spec_any, catalog=cat, model=model, workload_name="bench", estimator=counted)
        times.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    return statistics.median(times), statistics.median(cpu), computed


def catalog_load_ms(runs: int = 5) -> tuple[float, float, float, int]:
    """(compact ms, compact ms with every price read, from-sources ms, price rows): median fresh load of each form.
    The compact form reads no price row until asked (compact.PriceLines): a plan pinned to regions reads those."""
    from infragen.catalog.compact import COMPACT_FILE, PRICES_FILE, catalog_from_compact, data_dir
    from infragen.catalog.loader import load_catalog_dir

    text = (data_dir() / COMPACT_FILE).read_text(encoding="utf-8")
    prices = (data_dir() / PRICES_FILE).read_text(encoding="utf-8")
    compact, every, sources = [], [], []
    for _ in range(runs):
        t = time.perf_counter()
        cat = catalog_from_compact(json.loads(text), prices)
        compact.append((time.perf_counter() - t) * 1000)
        rows = sum(len(i.prices) for i in cat.instances)
        every.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        load_catalog_dir(data_dir())
        sources.append((time.perf_counter() - t) * 1000)
    return statistics.median(compact), statistics.median(every), statistics.median(sources), rows


def estimate_call_us(calls: int = 1000) -> float:
    """CPU time of one estimate() of Llama-3.1-70B bf16 at tp 4 on 8 x H100 (varying prompt lengths, so no cache
    answers), microseconds; the search runs thousands, so the target is well under a millisecond."""
    from infragen.sizing.estimate import estimate_memory
    from infragen.sizing.hardware import hardware_from_gpu

    model = resolve_model("llama-3.1-70b", base_dir=ROOT, where="model")
    hw = hardware_from_gpu(load_catalog().accelerator("h100-sxm-80gb"), 8)
    estimate_memory(model, hw, precision="bf16", tp=4)
    start = time.process_time()
    for i in range(calls):
        estimate(model, hw, precision="bf16", tp=4, input_len=1000 + i, output_len=200, concurrency=16)
    return (time.process_time() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instructions", action="store_true",
                        help="also count the cold start's instructions under valgrind (callgrind; about a minute)")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs (figures need a quiet "
          "machine: compare at a load well under the CPU count)")
    compact_ms, every_ms, sources_ms, rows = catalog_load_ms()
    print(f"catalog load: {compact_ms:.1f} ms from catalog.json (no price row read), {every_ms:.1f} ms with all "
          f"{rows} region prices read, {sources_ms:.1f} ms from the YAML/CSV sources")
    cold = cold_start_s()
    print(f"cold start `infragen plan {EXAMPLE.name}`: median {statistics.median(cold):.3f} s, "
          f"min {min(cold):.3f} s, max {max(cold):.3f} s (target <= 0.4 s)")
    if args.instructions:
        count = cold_start_instructions()
        print(f"cold start `infragen plan {EXAMPLE.name}`: {count:,} instructions (callgrind)" if count is not None
              else "cold start instructions: valgrind is not installed")
    print(f"estimate() of Llama-3.1-70B bf16, tp 4 on 8 x H100: {estimate_call_us():.0f} us CPU a call (target < 1,000 "
          "us; until 2026-12-06 a timed test)")
    n = len(load_catalog().instances)
    for example in sorted((ROOT / "examples").glob("*.yaml")):
        wall, cpu, computed = search_ms(example)
        first = first_plan_cpu_ms(example)
        print(f"search, full catalog ({n} types, both clouds), {example.stem}: {wall:.1f} ms wall, {cpu:.1f} ms CPU "
              f"(target <= 100 ms); {computed} estimates computed; first plan in a fresh process {first:.1f} ms CPU")
    for k in (25, 50, 100, n):
        wall, cpu, _ = search_ms(EXAMPLE, k)
        print(f"search over the first {k:>3} instance types (team-chatbot, both clouds): {wall:.1f} ms wall, "
              f"{cpu:.1f} ms CPU")


if __name__ == "__main__":
    main()
