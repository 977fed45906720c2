"""The calibration rows (benchmarks/data/*.csv) and how a row's labels map onto infragen's models, GPUs and
precisions; shared by accuracy.py and accuracy_checks.py. Reads files, predicts nothing."""

from __future__ import annotations

import csv
import json
import math
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from infragen.architecture import ModelArchitecture
from infragen.catalog import load_catalog
from infragen.catalog.models import load_model_registry
from infragen.catalog.records import Accelerator

DATA = Path(__file__).resolve().parent / "data"

#: ShareGPT as sampled by vLLM's benchmark_serving (Lambda rows): assumed averages, stated as CALIBRATION.md asks.
SHAREGPT_INPUT_TOKENS = 220
SHAREGPT_OUTPUT_MEAN_TOKENS = 200
SHAREGPT_REQUESTS = 320

# Architectures from each model's Hugging Face config.json (hidden, layers, heads, kv heads, inter, vocab, ctx).
_ARCH: dict[str, dict[str, object]] = {
    "llama-2-7b": dict(hidden_size=4096, num_layers=32, num_attention_heads=32, num_kv_heads=32,
                       intermediate_size=11008, vocab_size=32000, max_position_embeddings=4096),
    "llama-2-13b": dict(hidden_size=5120, num_layers=40, num_attention_heads=40, num_kv_heads=40,
                        intermediate_size=13824, vocab_size=32000, max_position_embeddings=4096),
    "llama-2-70b": dict(hidden_size=8192, num_layers=80, num_attention_heads=64, num_kv_heads=8,
                        intermediate_size=28672, vocab_size=32000, max_position_embeddings=4096),
    "llama-3.1-8b": dict(hidden_size=4096, num_layers=32, num_attention_heads=32, num_kv_heads=8,
                         intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072),
    "llama-3.1-70b": dict(hidden_size=8192, num_layers=80, num_attention_heads=64, num_kv_heads=8,
                          intermediate_size=28672, vocab_size=128256, max_position_embeddings=131072),
    "llama-3.1-405b": dict(hidden_size=16384, num_layers=126, num_attention_heads=128, num_kv_heads=8,
                           intermediate_size=53248, vocab_size=128256, max_position_embeddings=131072),
    "mistral-7b-v0.3": dict(hidden_size=4096, num_layers=32, num_attention_heads=32, num_kv_heads=8,
                            intermediate_size=14336, vocab_size=32768, max_position_embeddings=32768),
    "mistral-nemo-12b": dict(hidden_size=5120, num_layers=40, num_attention_heads=32, num_kv_heads=8, head_dim=128,
                             intermediate_size=14336, vocab_size=131072, max_position_embeddings=131072),
    "mistral-large-2407": dict(hidden_size=12288, num_layers=88, num_attention_heads=96, num_kv_heads=8,
                               intermediate_size=28672, vocab_size=32768, max_position_embeddings=131072),
    "mixtral-8x7b": dict(hidden_size=4096, num_layers=32, num_attention_heads=32, num_kv_heads=8,
                         intermediate_size=14336, vocab_size=32000, max_position_embeddings=32768,
                         num_experts=8, num_experts_per_token=2),
    "mixtral-8x22b": dict(hidden_size=6144, num_layers=56, num_attention_heads=48, num_kv_heads=8,
                          intermediate_size=16384, vocab_size=32768, max_position_embeddings=65536,
                          num_experts=8, num_experts_per_token=2),
    # Qwen/Qwen2.5-0.5B-Instruct config.json as copied in DongfuJiang/Qwen2.5-0.5B-Instruct's README (code index):
    # tied embeddings, use_sliding_window false; Qwen2 attention has q/k/v biases (as qwen2.5-1.5b in models.yaml).
    "qwen2.5-0.5b": dict(hidden_size=896, num_layers=24, num_attention_heads=14, num_kv_heads=2,
                         intermediate_size=4864, vocab_size=151936, max_position_embeddings=32768,
                         tie_word_embeddings=True, attention_bias=True),
    # Qwen/Qwen3-32B config.json (not in infragen's registry): untied embeddings, QK-norm, no sliding window.
    "qwen3-32b": dict(hidden_size=5120, num_layers=64, num_attention_heads=64, num_kv_heads=8, head_dim=128,
                      intermediate_size=25600, vocab_size=151936, max_position_embeddings=40960, qk_norm=True),
    # Qwen/Qwen3-14B and Qwen/Qwen3-8B config.json as copied in citsjtu2020/LLM-Prof@8434c8d sglang/Model_Config.md
    # (code index; its Qwen3-32B entry matches the one above, its Qwen3-8B tests/fixtures/hf_configs/qwen3-8b.json):
    # Qwen3ForCausalLM, untied embeddings, QK-norm, no sliding window; 14.77B / 8.19B parameters computed.
    "qwen3-14b": dict(hidden_size=5120, num_layers=40, num_attention_heads=40, num_kv_heads=8, head_dim=128,
                      intermediate_size=17408, vocab_size=151936, max_position_embeddings=40960, qk_norm=True),
    "qwen3-8b": dict(hidden_size=4096, num_layers=36, num_attention_heads=32, num_kv_heads=8, head_dim=128,
                     intermediate_size=12288, vocab_size=151936, max_position_embeddings=40960, qk_norm=True),
    # Qwen/QwQ-32B: Qwen2ForCausalLM with Qwen2.5-32B's shapes (config.json as quoted in several indexed repositories:
    # 5120 hidden, 64 layers, 40 / 8 heads, 27648 intermediate, 152064 vocab, untied; 32,763,876,352 parameters),
    # q/k/v biases as every Qwen2 model.
    "qwq-32b": dict(hidden_size=5120, num_layers=64, num_attention_heads=40, num_kv_heads=8,
                    intermediate_size=27648, vocab_size=152064, max_position_embeddings=40960, attention_bias=True),
}
#: Rows whose model is in infragen's own registry (infragen/catalog/data/models.yaml): resolved from there.
_REGISTRY_MODELS = ("qwen3-235b-a22b", "deepseek-r1")


#: Independent check of the current `vllm` profile (vLLM >= 0.6 speed rows in extra_calibration.csv): predicted with
#: estimate() as a user would get them, never fitted (evaluate_all leaves them out of fit()'s engine-filtered runs),
#: and kept in their own regime so the per-regime bands of the fitted rows do not move.
CURRENT_VLLM_GROUP = "vLLM >=0.6 (independent"
CURRENT_VLLM_REGIME = "check-vllm-current"
_CURRENT_VLLM_METRICS = ("output_tokens_per_s", "ttft_ms", "tpot_ms")


#: EX rows a fit used (benchmarks/vllm06_fit.py: the `vllm-0.6` profile's overlapped host time on Lambda's
#: Llama-3-8B bf16 tp 1/2/4/8 series): predicted like the independent rows, reported apart, in no independent tally.
FITTED_ROWS = frozenset({"EX0091", "EX0092", "EX0093", "EX0094"})
FITTED_GROUP = "vLLM 0.6.0 (fitted: vllm-0.6 overlapped host time)"
FITTED_REGIME = "fit-vllm-0.6"


def is_fitted_vllm_row(row: dict[str, str]) -> bool:
    return row["id"] in FITTED_ROWS and row["engine"] == "vLLM" and row["metric"] in _CURRENT_VLLM_METRICS


def is_current_vllm_check(row: dict[str, str]) -> bool:
    """A measured speed row of vLLM 0.6 or newer that no fit used (the Lambda rows are 0.5.4 and use other metric
    names too)."""
    if row["engine"] != "vLLM" or row["metric"] not in _CURRENT_VLLM_METRICS or row["id"] in FITTED_ROWS:
        return False
    m = re.match(r"\s*(\d+)\.(\d+)", row["engine_version"])
    return m is not None and (int(m[1]), int(m[2])) >= (0, 6) and not is_expert_parallel_check(row)


#: Expert-parallel rows (vllm serve --enable-expert-parallel, EX0051-EX0054): predicted with estimate(...,
#: expert_parallel=True) and reported apart (accuracy_checks.expert_parallel_report) beside their tp twins; in no
#: fit, band or calibrate check, so the figures of the plain-tp rows stay what they were.
EXPERT_PARALLEL_GROUP = "vLLM >=0.6 expert parallel (independent)"
EXPERT_PARALLEL_REGIME = "check-vllm-expert-parallel"


def is_expert_parallel_check(row: dict[str, str]) -> bool:
    """A vLLM speed row whose server ran with expert parallelism ('enable_expert_parallel=true' in its notes)."""
    return row["engine"] == "vLLM" and row["metric"] in _CURRENT_VLLM_METRICS and bool(
        re.search(r"\benable_expert_parallel=true\b", row["notes"]))


def arch(name: str) -> ModelArchitecture:
    if name in _REGISTRY_MODELS:
        return load_model_registry()[name]
    return ModelArchitecture(id=name, **_ARCH[name])  # type: ignore[arg-type]


def model_of(text: str) -> str | None:
    t = text.lower()
    for key, name in (
        ("405b", "llama-3.1-405b"), ("llama-3.1-70b", "llama-3.1-70b"), ("llama-3.1-8b", "llama-3.1-8b"),
        ("llama-3-8b", "llama-3.1-8b"),  # Llama 3 8B: Llama 3.1 8B's shapes, 8192-token context (memory-identical)
        ("llama-3-70b", "llama-3.1-70b"),  # Llama 3 70B: Llama 3.1 70B's shapes, 8192-token context
        ("llama-2-70b", "llama-2-70b"), ("llama-2-13b", "llama-2-13b"), ("llama-2-7b", "llama-2-7b"),
        ("mixtral-8x22b", "mixtral-8x22b"), ("mixtral-8x7b", "mixtral-8x7b"), ("mistral-7b", "mistral-7b-v0.3"),
        ("nemo", "mistral-nemo-12b"), ("mistral-large", "mistral-large-2407"),
        ("qwen3-235b-a22b", "qwen3-235b-a22b"), ("qwen3-32b", "qwen3-32b"), ("qwen3-14b", "qwen3-14b"),
        ("qwen3-8b", "qwen3-8b"), ("qwen2.5-0.5b", "qwen2.5-0.5b"), ("qwq-32b", "qwq-32b"),
        ("deepseek-r1", "deepseek-r1"),  # DeepSeek-R1-0528: R1's architecture
    ):
        if key in t:
            return name
    return None


def gpu_of(hardware: str) -> tuple[str, str] | None:
    """(catalog id, interconnect override) for a calibration hardware label; None = no sourced figures."""
    h = hardware.lower()
    if "gh200" in h:
        return "gh200-96gb", ""
    if "h200" in h:
        return "h200", ""
    if "h100" in h:
        return "h100-sxm", ""
    if "a100-pcie" in h:
        return "a100-pcie-80gb", ""  # 300 W card: 1935 GB/s, PCIe link, power-capped compute
    if "a100" in h and "40gb" in h:
        return "a100-40gb", ""
    if "a100" in h:
        return "a100-80gb", ""
    if re.search(r"\ba10\b", h):
        return "a10-24gb", ""
    if "l40s" in h:
        return "l40s", ""
    if re.search(r"\bl4\b", h):
        return "l4-24gb", ""
    return None


def precision_of(text: str, gpu: str) -> str:
    t = text.lower()
    if t.startswith("int8"):
        return "int8"
    if "awq" in t:  # weight-only INT4 AWQ (vLLM awq_marlin)
        return "int4-awq"
    if "gptq" in t and "int4" in t:  # weight-only INT4 GPTQ (vLLM gptq_marlin)
        return "int4-gptq"
    if "fp8" in t:
        return "fp8"
    if t.startswith("q4_0"):
        return "q4_0"
    if t.startswith("q8_0"):
        return "q8_0"
    if t.startswith("fp16") and "bf16" not in t:
        return "fp16"
    return "bf16"


@dataclass(frozen=True)
class Outcome:
    row_id: str
    group: str
    metric: str
    measured: float
    predicted: float | None
    regime: str
    note: str = ""

    @property
    def error(self) -> float:
        assert self.predicted is not None
        return self.predicted / self.measured - 1.0


def read_rows() -> Iterator[dict[str, str]]:
    for name in ("calibration.csv", "extra_calibration.csv"):
        with open(DATA / name, encoding="utf-8") as fh:
            yield from csv.DictReader(line for line in fh if not line.startswith("#"))


def _accelerator(gpu_id: str, interconnect: str) -> Accelerator:
    acc = load_catalog().accelerator(gpu_id)
    if interconnect == "pcie":
        acc = acc.model_copy(update={"interconnect": "pcie", "interconnect_gb_per_s": 64.0, "nvlink_generation": None})
    return acc


#: vLLM's benchmark keeps a ShareGPT request only with >= 4 output tokens and <= 2048 tokens in all (vllm 0.34.0
#: wheel, vllm/benchmarks/datasets/datasets.py is_valid_sequence: min_len 4, max_total_len 2048).
SHAREGPT_MIN_OUTPUT_TOKENS = 4
SHAREGPT_MAX_TOTAL_TOKENS = 2048
#: vLLM V0's scheduler defaults (EX rows of vLLM < 0.8): 256 sequences, and without chunked prefill (off by default
#: below a 32K context) a token budget of max(max_model_len, 2048) (vllm/config.py SchedulerConfig.__post_init__).
V0_MAX_NUM_SEQS = 256
V0_MIN_BATCHED_TOKENS = 2048


@dataclass(frozen=True)
class Burst:
    """A max-load row measured as one burst (request rate inf: every prompt sent at once, the batch then drained),
    as its notes record it."""

    requests: int
    """Requests that completed: the output throughput is theirs over the run."""
    dataset: str
    """'sharegpt' (long-tailed output lengths) or 'random' (vllm bench's random dataset: fixed lengths)."""
    max_num_batched_tokens: int | None
    """The server's --max-num-batched-tokens when the row's command line set it."""
    clients: int | None = None
    """A closed loop's --max-concurrency (that many requests in flight, each sent when one ends); None: a burst."""
    lengths: str | None = None
    """A file under benchmarks/data/ holding the run's own per-request `input_lens` / `output_lens` (its
    `--save-result` JSON or an extract of it), named by the row's '[lengths: FILE]' tag; None: from the means."""


_BURST_REQUESTS = re.compile(r"request rate inf, (\d+)(?: of \d+)? prompts")
_LENGTHS = re.compile(r"\[lengths: ([\w./-]+)\]")
#: sglang's benchmark README tables: 'inf | <prompts> | <engine> | <req/s> | <tok/s>'.
_README_BURST = re.compile(r"'inf \| (\d+) \|")


def burst_of(row: dict[str, str]) -> Burst | None:
    """The burst a max-load row ran, the closed loop a `vllm bench serve --max-concurrency C` row ran (C its
    concurrency; the requests its result block counts), or None (an online run, another harness's loop, or a run
    whose dataset is unknown)."""
    notes = row["notes"]
    dataset = re.search(r"--dataset-name (sharegpt|random)\b", notes)
    kind = dataset[1] if dataset else "sharegpt" if "[check: ShareGPT means]" in notes else None
    budget = re.search(r"--max-num-batched-tokens (\d+)", notes)
    tokens = int(budget[1]) if budget else None
    if kind is None:
        return None
    conc = row["concurrency"].strip()
    if conc.isdigit():
        # the result block vllm bench serve prints
        done = re.search(r"'Successful requests: (\d+)'", notes)
        cap = re.search(r"'Maximum request concurrency: (\d+)'", notes)
        if done is None or cap is None or int(cap[1]) != int(conc):
            return None
        return Burst(int(done[1]), kind, tokens, clients=int(conc))
    if not conc.lower().startswith("max-load"):
        return None
    m = _BURST_REQUESTS.search(conc) or _README_BURST.search(notes)
    lengths = _LENGTHS.search(notes)
    return Burst(int(m[1]), kind, tokens, lengths=lengths[1] if lengths else None) if m else None


def burst_lengths(burst: Burst, input_len: int, output_len: int) -> tuple[list[int], list[int]]:
    """(input lengths, output lengths) of the burst's requests in the order sent, from the row's mean lengths.

    random: every request the mean lengths. sharegpt: the per-request lengths are not published, so outputs are the
    quantiles of an exponential distribution with the run's mean (ShareGPT replies are long-tailed; an assumption,
    as for the Lambda rows), held to vLLM's ShareGPT sampling limits, in a fixed shuffled order (requests arrive in
    dataset order, not sorted by length); inputs the mean."""
    if burst.lengths is not None:
        return recorded_lengths(DATA / burst.lengths)
    n = burst.requests
    if burst.dataset == "random":
        return [input_len] * n, [output_len] * n
    outs = exponential_lengths(n, output_len, SHAREGPT_MIN_OUTPUT_TOKENS,
                               max(SHAREGPT_MIN_OUTPUT_TOKENS, SHAREGPT_MAX_TOTAL_TOKENS - input_len))
    random.Random(0).shuffle(outs)
    return [input_len] * n, outs


def recorded_lengths(path: Path) -> tuple[list[int], list[int]]:
    """(input lengths, output lengths) of a run's requests as its result file records them, in the order sent,
    without the requests that produced no token: benchmark_serving counts a request whose stream ended empty as
    completed with output length 0 (the Lambda v0.6.0 files have 17-112 of 320, each with TTFT 0: no first token, so no
    prefill the replay should charge)."""
    from infragen.sizing.drain import completed_lengths  # what `infragen calibrate` keeps of a result

    data = json.loads(path.read_text())
    ins, outs = data["input_lens"], data["output_lens"]
    if len(ins) != len(outs):
        raise ValueError(f"{path}: {len(ins)} input lengths but {len(outs)} output lengths")
    lengths = completed_lengths(data, str(path))
    assert lengths is not None  # the file holds both lists
    return lengths


def exponential_lengths(n: int, mean: float, lo: int, hi: int) -> list[int]:
    """The n mid-quantiles of an exponential distribution of `mean` tokens, rounded and held to [lo, hi], shortest
    first: a deterministic stand-in for a long-tailed set of reply lengths."""
    return [max(lo, min(hi, round(-mean * math.log(1 - (i + 0.5) / n)))) for i in range(n)]


def _sharegpt_lengths(n: int = SHAREGPT_REQUESTS) -> tuple[list[int], list[int]]:
    """Deterministic n-request sample (Lambda's 320): exponential output lengths (mean 200), capped so in+out <=
    2048."""
    outs = exponential_lengths(n, SHAREGPT_OUTPUT_MEAN_TOKENS, 1, 2048 - SHAREGPT_INPUT_TOKENS)
    return [SHAREGPT_INPUT_TOKENS] * n, outs
