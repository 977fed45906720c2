"""The exact command one engine instance runs, from the planner's decisions. No secrets ever go in argv:
vLLM reads VLLM_API_KEY from its environment and llama-server reads --api-key-file, both filled at boot."""

from __future__ import annotations

import json

from infragen.architecture import ModelArchitecture
from infragen.catalog.compat import kernel_problem
from infragen.catalog.engines import LLAMA_CPP_VERSION, VLLM_VERSION, load_engine_flags
from infragen.catalog.records import Accelerator
from infragen.errors import InfragenError
from infragen.sizing.memory import vllm_profile_tokens

MODEL_DIR = "/opt/models"
API_KEY_FILE = "/run/infragen/api-key"

#: vLLM --quantization value per weight format (None = unquantized or detected from the checkpoint).
VLLM_QUANTIZATION: dict[str, str | None] = {
    "bf16": None, "fp16": None, "fp8": "fp8", "int8": None, "int4-awq": "awq_marlin", "int4-gptq": "gptq_marlin",
}


def vllm_argv(
    *, weights: str, served_name: str, port: int, tp: int, pp: int, max_model_len: int, max_num_seqs: int,
    gpu_memory_utilization: float, precision: str, kv_cache_dtype: str, multi_node: bool,
    model: ModelArchitecture, accelerator: Accelerator | None,
) -> list[str]:
    """`vllm serve ...` for one replica."""
    argv = ["vllm", "serve", weights, "--served-model-name", served_name, "--host", "0.0.0.0", "--port", str(port),
            "--tensor-parallel-size", str(tp), "--pipeline-parallel-size", str(pp),
            "--max-model-len", str(max_model_len), "--max-num-seqs", str(max_num_seqs),
            "--gpu-memory-utilization", f"{gpu_memory_utilization:.2f}"]
    quant = VLLM_QUANTIZATION.get(precision)
    no_marlin = accelerator is None or kernel_problem(accelerator, "weights", "marlin") is not None
    if quant and quant.endswith("_marlin") and no_marlin:
        quant = quant.removesuffix("_marlin")  # no Marlin kernel below compute capability 8.0 (compat.yaml)
    if quant:
        argv += ["--quantization", quant]
    if kv_cache_dtype == "fp8":
        argv += ["--kv-cache-dtype", "fp8"]
    original, factor = model.original_max_position_embeddings, model.yarn_factor
    if original and factor and max_model_len > original:
        # Qwen2/2.5 beyond 32K need YaRN scaling switched on (model card); vLLM takes it as JSON.
        argv += ["--rope-scaling", json.dumps({"rope_type": "yarn", "factor": factor,
                                               "original_max_position_embeddings": original},
                                              separators=(",", ":"))]
    argv += _batching_flags(model, max_model_len)
    argv += ["--enable-prefix-caching", "--download-dir", MODEL_DIR]
    if multi_node:
        argv += ["--distributed-executor-backend", "ray"]
    _check("vllm", VLLM_VERSION, argv)
    return argv


def _batching_flags(model: ModelArchitecture, max_model_len: int) -> list[str]:
    tokens = ["--max-num-batched-tokens", str(vllm_profile_tokens(model, max_model_len))]
    return tokens if model.sliding_window is not None else ["--enable-chunked-prefill", *tokens]


def llama_cpp_argv(*, weights_file: str, served_name: str, port: int, ctx_per_slot: int, slots: int,
                   threads: int) -> list[str]:
    """`llama-server ...`; --ctx-size is the total over slots (llama.cpp splits it per slot)."""
    argv = ["llama-server", "--model", f"{MODEL_DIR}/{weights_file}", "--host", "0.0.0.0", "--port", str(port),
            "--ctx-size", str(ctx_per_slot * slots), "--parallel", str(slots), "--threads", str(threads),
            "--alias", served_name, "--api-key-file", API_KEY_FILE]
    _check("llama.cpp", LLAMA_CPP_VERSION, argv)
    return argv


def _check(engine: str, version: str, argv: list[str]) -> None:
    allowed = load_engine_flags()[engine][version]
    unknown = [a for a in argv if a.startswith("--") and a not in allowed]
    if unknown:  # a bug in this module, not user input
        raise InfragenError(f"internal: {engine} {version} flags not pinned in engines.yaml: {unknown}")
