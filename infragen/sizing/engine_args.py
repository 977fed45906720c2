"""The exact command one engine instance runs, from the planner's decisions. No secrets ever go in argv:
vLLM reads VLLM_API_KEY from its environment and llama-server reads --api-key-file, both filled at boot."""

from __future__ import annotations

import json

from infragen.architecture import ModelArchitecture
from infragen.catalog.compat import Checkpoint, quantization_flag
from infragen.catalog.engines import EngineRelease, argv_problems, expert_parallel_flag, pinned_release
from infragen.errors import InfragenError
from infragen.sizing.memory import vllm_profile_tokens

MODEL_DIR = "/opt/models"
API_KEY_FILE = "/run/infragen/api-key"

def vllm_argv(
    *, weights: str, served_name: str, port: int, tp: int, pp: int, max_model_len: int, max_num_seqs: int,
    gpu_memory_utilization: float, precision: str, checkpoint: Checkpoint, kv_cache_dtype: str, multi_node: bool,
    model: ModelArchitecture, prefix_caching: bool = False, expert_parallel: bool = False,
) -> list[str]:
    """`vllm serve ...` for one replica. `checkpoint` says whether the weights are already quantized: then their
    quantization_config decides the method (no `--quantization`, so an AWQ or compressed-tensors FP8 repo is never
    forced to another one); a 16-bit checkpoint served as fp8 is quantized at load (compat.yaml
    quantization_flags). `prefix_caching`: the estimate credits prefix-cache hits, so the flag pins the cache on
    (vLLM 0.34 already enables it for decoder models when the flag is absent: ModelConfig.is_prefix_caching_supported
    via EngineArgs._set_default_chunked_prefill_and_prefix_caching_args). `expert_parallel`: the MoE layers' experts
    placed whole on the tp GPUs (engines.yaml expert_parallel.flag)."""
    argv = ["vllm", "serve", weights, "--served-model-name", served_name, "--host", "0.0.0.0", "--port", str(port),
            "--tensor-parallel-size", str(tp), "--pipeline-parallel-size", str(pp),
            "--max-model-len", str(max_model_len), "--max-num-seqs", str(max_num_seqs),
            "--gpu-memory-utilization", f"{gpu_memory_utilization:.2f}"]
    quant = quantization_flag(precision, checkpoint)
    if quant:
        argv += ["--quantization", quant]
    if kv_cache_dtype == "fp8":
        argv += ["--kv-cache-dtype", "fp8"]
    original, factor = model.original_max_position_embeddings, model.yarn_factor
    if original and factor and max_model_len > original:
        # Qwen2/2.5 beyond 32K need YaRN switched on (model card). vLLM 0.34 has no --rope-scaling: the config is
        # overridden, and transformers 5 reads `rope_parameters`, which replaces the whole dict (theta included).
        rope = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": original,
                "rope_theta": model.rope_theta}
        argv += ["--hf-overrides", json.dumps({"rope_parameters": rope}, separators=(",", ":"))]
    argv += _batching_flags(model, max_model_len)
    if prefix_caching:
        argv.append("--enable-prefix-caching")
    if expert_parallel:
        flag = expert_parallel_flag("vllm")
        if flag is None:
            raise InfragenError("a plan asks for expert parallelism, but engines.yaml gives vllm no "
                                "expert_parallel flag")
        argv.append(flag)
    argv += ["--download-dir", MODEL_DIR]
    if multi_node:
        argv += ["--distributed-executor-backend", "ray"]
    _check("vllm", argv)
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
    _check("llama.cpp", argv)
    return argv


class EngineArgvError(InfragenError):
    """A rendered command line the pinned release's parser would refuse: a bug in infragen (its renderer and the
    generated option data disagree), never bad input, so the exit status stays 70; the message leads with what the
    parser refuses, which the argv itself would push past the CLI's one-line limit."""

    exit_code = 70


def _check(engine: str, argv: list[str], release: EngineRelease | None = None) -> None:
    """Refuse to emit an argv the pinned `engine` would reject at start-up (`release`: a test seam)."""
    release = release or pinned_release(engine)
    problems = argv_problems(engine, argv, release)
    if problems:
        raise EngineArgvError(
            f"the pinned {release.engine} {release.version} would refuse the command line infragen rendered: "
            f"{'; '.join(problems)} (in: {' '.join(argv)})",
            fix=f"a bug in infragen: its {engine} flags disagree with infragen/catalog/data/{release.described_by}; "
                "report it with the workload (docs/engines.md says how that file is regenerated)",
        )
