"""The vLLM command pins the prompt-token budget the memory and speed model assumed."""

from __future__ import annotations

from infragen.sizing.engine_args import vllm_argv
from infragen.sizing.memory import vllm_profile_tokens
from tests.sizing.conftest import GEMMA2_LIKE, LLAMA3_8B


def _argv(model, max_model_len: int) -> list[str]:  # type: ignore[no-untyped-def]
    return vllm_argv(weights="org/m", served_name="m", port=8000, tp=1, pp=1, max_model_len=max_model_len,
                     max_num_seqs=32, gpu_memory_utilization=0.9, precision="bf16", checkpoint="sixteen_bit",
                     kv_cache_dtype="auto", multi_node=False, model=model)


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_full_attention_models_run_chunked_prefill_at_8192_tokens() -> None:
    # vLLM 0.7 V0 would leave chunked prefill off at <= 32768 tokens of context and batch whole prompts
    argv = _argv(LLAMA3_8B, 16384)
    assert "--enable-chunked-prefill" in argv
    assert _flag(argv, "--max-num-batched-tokens") == "8192" == str(vllm_profile_tokens(LLAMA3_8B, 16384))


def test_sliding_window_models_batch_a_whole_prompt_without_chunking() -> None:
    assert GEMMA2_LIKE.sliding_window is not None
    argv = _argv(GEMMA2_LIKE, 16384)
    assert "--enable-chunked-prefill" not in argv
    assert _flag(argv, "--max-num-batched-tokens") == "16384" == str(vllm_profile_tokens(GEMMA2_LIKE, 16384))
    assert vllm_profile_tokens(GEMMA2_LIKE, 4096) == 8192
