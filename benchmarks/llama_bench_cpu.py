"""llama.cpp on this machine: write TinyLlama-1.1B-shaped GGUF files, run llama-bench, keep its JSON as data.

Steps (each writes under benchmarks/data/llama_bench/ or --work):
  python benchmarks/llama_bench_cpu.py gguf --work DIR            # F16 with random weights (gguf package)
  llama-quantize DIR/tinyllama-f16.gguf DIR/tinyllama-q8_0.gguf Q8_0   (and Q4_0; the pinned llama.cpp's tool)
  python benchmarks/llama_bench_cpu.py run --work DIR --llama-bench PATH --hardware machine.yaml
`run` stores one JSON per type (llama-bench -o json output as printed, plus the command, the machine and its
load average), which benchmarks/accuracy.py compares with `estimate --hardware`. Decode speed does not depend on
the weights' values, so random weights stand in for the real checkpoint; the shapes are TinyLlama-1.1B's
(config.json next to the results).
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

DATA = Path(__file__).resolve().parent / "data" / "llama_bench"
CONFIG = json.loads((DATA / "tinyllama-1.1b-config.json").read_text())
TYPES = ("f16", "q8_0", "q4_0")


def _vocab(size: int) -> tuple[list[str], list[float], list[int]]:
    """<unk> <s> </s>, the 256 byte tokens, then synthetic pieces up to `size` (SentencePiece layout)."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    tokens += [f"\u2581t{i}" for i in range(size - len(tokens))]
    types += [1] * (size - len(types))
    scores = [0.0] * 259 + [-float(i) for i in range(size - 259)]
    return tokens, scores, types


def write_f16(path: Path, seed: int = 0) -> Path:
    """TinyLlama-1.1B shapes, random F16 matrices and F32 norms (what convert_hf_to_gguf writes for --outtype f16)."""
    import gguf
    import numpy as np

    c = CONFIG
    h, ff, layers = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    nh, nkv, vocab = c["num_attention_heads"], c["num_key_value_heads"], c["vocab_size"]
    hd = h // nh
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tinyllama-1.1b-shapes-random")
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(h)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(float(c["rope_theta"]))
    w.add_layer_norm_rms_eps(float(c["rms_norm_eps"]))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    tokens, scores, types = _vocab(vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    def matrix(name: str, rows: int, cols: int) -> None:
        w.add_tensor(name, (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16))

    def norm(name: str) -> None:
        w.add_tensor(name, np.ones(h, dtype=np.float32))

    matrix("token_embd.weight", vocab, h)
    for i in range(layers):
        norm(f"blk.{i}.attn_norm.weight")
        matrix(f"blk.{i}.attn_q.weight", h, h)
        matrix(f"blk.{i}.attn_k.weight", nkv * hd, h)
        matrix(f"blk.{i}.attn_v.weight", nkv * hd, h)
        matrix(f"blk.{i}.attn_output.weight", h, h)
        norm(f"blk.{i}.ffn_norm.weight")
        matrix(f"blk.{i}.ffn_gate.weight", ff, h)
        matrix(f"blk.{i}.ffn_up.weight", ff, h)
        matrix(f"blk.{i}.ffn_down.weight", h, ff)
    norm("output_norm.weight")
    matrix("output.weight", vocab, h)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def run(work: Path, llama_bench: Path, hardware: Path, threads: int, repetitions: int) -> None:
    """llama-bench -o json per type; the JSON is stored with how and where it was produced."""
    import yaml

    machine = yaml.safe_load(hardware.read_text())
    for kind in TYPES:
        model = work / f"tinyllama-{kind}.gguf"
        cmd = [str(llama_bench), "-m", str(model), "-p", "512", "-n", "128", "-t", str(threads),
               "-r", str(repetitions), "-o", "json"]
        load_before = os.getloadavg()
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=3600).stdout
        record = {
            "command": " ".join([llama_bench.name, *cmd[1:2], model.name, *cmd[3:]]),
            "machine": f"{machine['name']}, {platform.system()} {platform.release()} (KVM guest shared by other "
                       "jobs: see load_average)",
            "hardware_file": hardware.name,
            "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
            "model_sha256": _sha256(model),
            "model_note": "TinyLlama-1.1B shapes (tinyllama-1.1b-config.json), random weights; F16 written with "
                          "the gguf package, Q8_0/Q4_0 made from it by the same build's llama-quantize",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "results": json.loads(out),
        }
        dest = DATA / f"llama-bench-tinyllama-{kind}.json"
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
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.step == "gguf":
        print(write_f16(args.work / "tinyllama-f16.gguf"))
    else:
        if args.llama_bench is None:
            ap.error("run needs --llama-bench")
        run(args.work, args.llama_bench, args.hardware, args.threads, args.repetitions)


if __name__ == "__main__":
    main()
