"""llama.cpp on this machine: write Llama-shaped GGUF files, run llama-bench, keep its JSON as data.

Steps (each writes under benchmarks/data/llama_bench/ or --work; --shape tinyllama (default), llama3.2-3b or
llama3.1-8b):
  python -m benchmarks.llama_bench_cpu gguf --work DIR   # F16, random weights (benchmarks/llama_gguf.py)
  llama-quantize DIR/tinyllama-f16.gguf DIR/tinyllama-q8_0.gguf Q8_0   (and Q4_0; the pinned llama.cpp's tool)
  python -m benchmarks.llama_bench_cpu run --work DIR --llama-bench PATH --hardware machine.yaml
`run` stores one JSON per type (llama-bench -o json output as printed, plus the command, the machine and its
load average), which benchmarks/accuracy.py compares with `estimate --hardware`. Decode speed does not depend on
the weights' values, so random weights stand in for the real checkpoint; the shapes are in the config.json next
to the results (SHAPES).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
from pathlib import Path

from benchmarks.llama_gguf import write_llama_gguf

DATA = Path(__file__).resolve().parent / "data" / "llama_bench"
#: Model shapes: file prefix -> (config.json next to the results, the GGUF's general.name, what the shapes are).
SHAPES = {
    "tinyllama": ("tinyllama-1.1b-config.json", "tinyllama-1.1b-shapes-random", "TinyLlama-1.1B shapes"),
    "llama3.2-3b": ("llama-3.2-3b-config.json", "llama3.2-3b-shapes-random",
                    "Llama-3.2-3B layer shapes (3072 hidden, 28 layers, 24/8 heads, 8192 FFN, 128,256 vocabulary) "
                    "with an untied output matrix (3.6B weights)"),
    "llama3.1-8b": ("llama-3.1-8b-config.json", "llama3.1-8b-shapes-random",
                    "Llama-3.1-8B shapes (4096 hidden, 32 layers, 32/8 heads, 14336 FFN, 128,256 vocabulary, untied "
                    "output matrix: 8.0B weights; meta-llama/Llama-3.1-8B-Instruct's config.json as transcribed in "
                    "tests/fixtures/hf_configs/llama-3.1-8b-instruct.json; the writer writes no rope_freqs tensor "
                    "for its llama3 RoPE scaling, which does not change the work per token)"),
}
CONFIG = json.loads((DATA / SHAPES["tinyllama"][0]).read_text())
TYPES = ("f16", "q8_0", "q4_0")


def write_f16(path: Path, seed: int = 0, shape: str = "tinyllama") -> Path:
    """`shape`'s shapes, random F16 matrices and F32 norms (what convert_hf_to_gguf writes for --outtype f16)."""
    config = CONFIG if shape == "tinyllama" else json.loads((DATA / SHAPES[shape][0]).read_text())
    return write_llama_gguf(path, config, name=SHAPES[shape][1], matrix_type="f16", vocab="numbered",
                            seed=seed)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def run(work: Path, llama_bench: Path, hardware: Path, threads: int, repetitions: int, tag: str = "",
        shape: str = "tinyllama", types: tuple[str, ...] = TYPES, no_mmap: bool = False) -> None:
    """llama-bench -o json per type; the JSON is stored with how and where it was produced. `no_mmap`: weights read
    into process memory (llama-bench --load-mode none), which the page cache cannot evict under other jobs' memory
    pressure."""
    import yaml

    machine = yaml.safe_load(hardware.read_text())
    for kind in types:
        model = work / f"{shape}-{kind}.gguf"
        cmd = [str(llama_bench), "-m", str(model), "-p", "512", "-n", "128", "-t", str(threads),
               "-r", str(repetitions), "-o", "json", *(("-lm", "none") if no_mmap else ())]
        load_before = os.getloadavg()
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=3600).stdout
        record = {
            "command": " ".join([llama_bench.name, *cmd[1:2], model.name, *cmd[3:]]),
            "machine": f"{machine['name']}, {platform.system()} {platform.release()} (KVM guest shared by other "
                       "jobs: see load_average)",
            "hardware_file": hardware.name,
            "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
            "nice": os.nice(0),  # negative: run ahead of the other jobs' processes on the shared cores
            "model_sha256": _sha256(model),
            "model_config": SHAPES[shape][0],
            "model_note": f"{SHAPES[shape][2]} ({SHAPES[shape][0]}), random weights; F16 written with "
                          "the gguf package, Q8_0/Q4_0 made from it by the same build's llama-quantize",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "results": json.loads(out),
        }
        dest = DATA / f"llama-bench-{shape}-{kind}{'-' + tag if tag else ''}.json"
        dest.write_text(json.dumps(record, indent=1) + "\n")
        print(f"{dest}: " + ", ".join(f"{r['n_prompt']}/{r['n_gen']}: {r['avg_ts']:.1f} t/s "
                                      f"(best {max(r['samples_ts']):.1f})"
                                      for r in record["results"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("gguf", "run"))
    ap.add_argument("--work", type=Path, required=True, help="where the GGUF files are (large, not committed)")
    ap.add_argument("--llama-bench", type=Path, help="llama-bench binary (run)")
    ap.add_argument("--hardware", type=Path, default=DATA / "machine.yaml", help="probed hardware file (run)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--tag", default="", help="suffix of the result files (a later run beside the first; run)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tinyllama", help="model shapes (SHAPES)")
    ap.add_argument("--types", default=",".join(TYPES), help="weight types to run, comma-separated (run)")
    ap.add_argument("--no-mmap", action="store_true",
                    help="llama-bench --load-mode none: weights in process memory (run)")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.step == "gguf":
        print(write_f16(args.work / f"{args.shape}-f16.gguf", shape=args.shape))
    else:
        if args.llama_bench is None:
            ap.error("run needs --llama-bench")
        run(args.work, args.llama_bench, args.hardware, args.threads, args.repetitions, args.tag, args.shape,
            tuple(args.types.split(",")), args.no_mmap)


if __name__ == "__main__":
    main()
