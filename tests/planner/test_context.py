"""The served context (vLLM --max-model-len): the model's trained context capped by what the KV cache holds at the
chosen batch (one request of that length beside max_num_seqs - 1 average ones), reported with its reason;
traffic.max_context_tokens still decides when given."""

from __future__ import annotations

from infragen.catalog import load_catalog
from infragen.catalog.models import load_model_registry
from infragen.sizing import plan_workload
from infragen.spec import WorkloadSpec


def _plan(model: str = "llama-3.1-8b", deny: list[str] | None = None,
          **traffic: object):  # type: ignore[no-untyped-def]
    spec = WorkloadSpec.model_validate({
        "model": model, "cloud": "aws", "regions": ["us-east-1"], "precision": ["bf16"],
        **({"instance_families": {"deny": deny}} if deny else {}),
        "traffic": {"peak_requests_per_s": 10, "prompt_tokens": 512, "output_tokens": 256, **traffic},
        "slo": {"ttft_p99_ms": 1500, "tpot_ms": 50}})
    return plan_workload(spec, catalog=load_catalog(), model=load_model_registry()[model], workload_name="ctx")


def _why(plan) -> str:  # type: ignore[no-untyped-def]
    return next(line for line in plan.explanation if line.startswith("max_model_len"))


def test_a_chat_product_gets_the_trained_context_when_memory_holds_it() -> None:
    """#15: Llama-3.1-8B chat at 512 + 256 tokens was served with max_model_len 3,072 (4 x (prompt + output)).
    At 20 requests/s the plan is one H100 (batch 213), whose KV cache holds the trained context beside the batch
    (at 10 requests/s the L40S replicas' batch of 97 leaves room for 117,040 tokens: the next test's case)."""
    plan = _plan(peak_requests_per_s=20)
    assert plan.engine.max_model_len == 131072
    assert "--max-model-len" in plan.engine.argv and "131072" in plan.engine.argv
    assert "trained context" in _why(plan) and str(plan.engine.max_num_seqs) in _why(plan)


def test_the_cap_is_what_one_request_can_use_beside_the_rest_of_the_batch() -> None:
    # One A10G (g5.2xlarge): ~24K tokens of KV beside the closed loop's batch of 8 (an open loop renders only the
    # slots its Poisson load needs, which on most GPUs leaves room for the trained context)
    plan = _plan(deny=["g6e", "p5"], prompt_tokens=1024, output_tokens=256, peak_requests_per_s=None,
                 concurrent_users=48)
    assert (plan.deployment.instance_type, plan.deployment.tp) == ("g5.2xlarge", 1)
    mml, batch, average = plan.engine.max_model_len, plan.engine.max_num_seqs, 1280
    capacity = plan.memory.kv_cache_capacity_tokens
    assert average < mml < 131072
    assert mml + (batch - 1) * average <= capacity  # it fits beside the others...
    assert mml + 1 + (batch - 1) * average > capacity or mml == 131072  # ...and is the largest that does
    why = _why(plan)
    assert "below Llama-3.1-8B's trained context of 131,072" in why and f"{capacity:,}" in why


def test_max_context_tokens_still_decides() -> None:
    plan = _plan(max_context_tokens=4096)
    assert plan.engine.max_model_len == 4096
    assert _why(plan) == "max_model_len 4,096: traffic.max_context_tokens."


def test_the_default_never_switches_on_yarn() -> None:
    """Qwen2.5 reaches 131,072 only with YaRN rope scaling; by default it is served at its native 32,768."""
    plan = _plan("qwen2.5-7b")
    assert plan.engine.max_model_len <= 32768
    assert "--hf-overrides" not in plan.engine.argv
