"""Kernel support is decided by compute capability (compat.yaml), never by architecture names: FP8 on every Ada
GPU and on B300, no FP8 KV cache before 8.9, no AWQ on Volta, and the planner picks FP8 where it is cheapest."""

from __future__ import annotations

import pytest

from infragen.catalog import load_catalog
from infragen.catalog.compat import capability, kernel_problem, load_compat
from infragen.catalog.models import load_model_registry
from infragen.sizing import estimate_memory, hardware_from_gpu, plan_workload
from infragen.spec import WorkloadSpec


def _acc(gpu_id: str):  # type: ignore[no-untyped-def]
    return load_catalog().accelerator(gpu_id)


def test_every_named_gpu_has_a_sourced_compute_capability() -> None:
    for acc in load_catalog().accelerators.values():
        if acc.id == "alibaba-gn7e-80gb":  # Alibaba does not name this GPU: nothing to look up
            assert acc.compute_capability is None
            continue
        assert acc.compute_capability and acc.compute_capability_source, acc.id


def test_capabilities_compare_as_numbers_not_strings() -> None:
    assert capability("10.3") > capability("10.0") > capability("9.0") > capability("8.9") > capability("8.6")


def test_every_rule_names_a_source() -> None:
    assert all(rule.source.strip() for rule in load_compat().kernels)


@pytest.mark.parametrize("gpu", ["l4-24gb", "l40s-48gb", "l20-48gb", "h20-96gb", "h100-sxm-80gb", "b200-180gb",
                                 "b300-288gb", "a100-80gb", "a10g-24gb"])
def test_fp8_weights_run_from_compute_capability_8_0(gpu: str) -> None:
    # Ada is "Ada Lovelace" in the catalog and B300 "Blackwell Ultra": a name comparison refused both
    assert kernel_problem(_acc(gpu), "weights", "fp8") is None


@pytest.mark.parametrize("gpu", ["t4-16gb", "v100-16gb"])
def test_no_fp8_weights_before_ampere(gpu: str) -> None:
    problem = kernel_problem(_acc(gpu), "weights", "fp8")
    assert problem is not None and "needs 8.0 or newer" in problem


@pytest.mark.parametrize(("gpu", "ok"), [("l4-24gb", True), ("h20-96gb", True), ("b300-288gb", True),
                                         ("a100-80gb", False), ("a10-24gb", False), ("mi300x-192gb", True)])
def test_fp8_kv_cache_from_compute_capability_8_9(gpu: str, ok: bool) -> None:
    assert (kernel_problem(_acc(gpu), "kv_cache", "fp8") is None) is ok


def test_awq_needs_turing_and_is_not_on_amd() -> None:
    assert kernel_problem(_acc("t4-16gb"), "weights", "int4-awq") is None
    assert "7.5 or newer" in (kernel_problem(_acc("v100-32gb"), "weights", "int4-awq") or "")
    assert "AMD targets: none" in (kernel_problem(_acc("mi300x-192gb"), "weights", "int4-awq") or "")


def test_an_unknown_capability_is_a_reason_not_a_pass() -> None:
    problem = kernel_problem(_acc("alibaba-gn7e-80gb"), "weights", "fp8")
    assert problem is not None and "compute capability not in the catalog" in problem


def test_estimate_accepts_fp8_on_ada() -> None:
    model = load_model_registry()["llama-3.1-8b"]
    for gpu in ("l4-24gb", "l40s-48gb", "l20-48gb"):
        mem = estimate_memory(model, hardware_from_gpu(_acc(gpu), 1), precision="fp8", max_model_len=8192)
        assert mem.fits, (gpu, mem.reason)


@pytest.mark.parametrize("family", ["g6", "g6e"])
def test_planner_picks_fp8_on_l4_and_l40s_when_it_is_cheapest(family: str) -> None:
    spec = WorkloadSpec.model_validate({
        "model": "llama-3.1-8b", "precision": ["bf16", "fp8"],
        "traffic": {"concurrent_users": 64, "prompt_tokens": 1024, "output_tokens": 256},
        "slo": {"tpot_ms": 80, "ttft_p99_ms": 4000}, "cloud": "aws", "regions": ["us-east-1"],
        "instance_families": {"allow": [family]}})
    model = load_model_registry()["llama-3.1-8b"]
    plan = plan_workload(spec, catalog=load_catalog(), model=model, workload_name="t")
    assert plan.deployment.precision == "fp8"
    assert not any("FP8" in a.rejected_because and "tensor cores" in a.rejected_because for a in plan.alternatives)


def test_llama_cpp_without_a_gguf_file_is_exit_2_naming_weights(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    path = tmp_path / "w.yaml"
    path.write_text("model: tinyllama-1.1b\nengine: llama.cpp\nprecision: bf16\ncloud: aws\n"
                    "traffic: {concurrent_users: 2, prompt_tokens: 256, output_tokens: 64}\n")
    proc = subprocess.run([sys.executable, "-m", "infragen", "plan", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "weights" in proc.stderr and "GGUF" in proc.stderr and "Traceback" not in proc.stderr


def test_auto_engine_never_plans_llama_cpp_without_a_gguf_file() -> None:
    spec = WorkloadSpec.model_validate({
        "model": "tinyllama-1.1b", "precision": ["bf16"], "cloud": "aws", "regions": ["us-east-1"],
        "traffic": {"concurrent_users": 2, "prompt_tokens": 256, "output_tokens": 64}})
    plan = plan_workload(spec, catalog=load_catalog(), model=load_model_registry()["tinyllama-1.1b"],
                         workload_name="t")
    assert plan.deployment.engine == "vllm"
    assert all(a.engine != "llama.cpp" or "GGUF file" in a.rejected_because for a in plan.alternatives)


def test_the_pinned_vllm_wheel_runs_on_blackwell_but_not_volta_nor_amd() -> None:
    from infragen.catalog.compat import wheel_problem

    for gpu in ("b200-180gb", "b300-288gb", "alibaba-blackwell-pro-48gb", "h100-sxm-80gb", "l4-24gb", "t4-16gb"):
        assert wheel_problem(_acc(gpu)) is None, gpu  # sm_100f covers 10.3, sm_120f the RTX PRO parts
    assert "has kernels for sm_75" in (wheel_problem(_acc("v100-32gb")) or "")
    assert "NVIDIA CUDA only" in (wheel_problem(_acc("mi300x-192gb")) or "")


def test_a_wheel_without_blackwell_targets_refuses_b200() -> None:
    from dataclasses import replace

    from infragen.catalog.compat import wheel_problem
    from infragen.catalog.engines import pinned_release

    old = replace(pinned_release("vllm"), version="0.7.3", cuda_targets=("sm_70", "sm_75", "sm_80", "sm_86",
                                                                           "sm_89", "sm_90"))
    assert "0.7.3 wheel has kernels for" in (wheel_problem(_acc("b200-180gb"), old) or "")
    assert wheel_problem(_acc("h100-sxm-80gb"), old) is None


def test_a_release_without_qwen3_moe_is_refused_with_the_first_release_that_serves_it() -> None:
    from dataclasses import replace

    from infragen.catalog.compat import architecture_problem
    from infragen.catalog.engines import pinned_release

    pinned = pinned_release("vllm")
    assert architecture_problem("vllm", "qwen3_moe") is None
    old = replace(pinned, version="0.7.3", architectures=pinned.architectures - {"Qwen3MoeForCausalLM"})
    assert architecture_problem("vllm", "qwen3_moe", old) == (
        "vllm 0.7.3 does not serve Qwen3MoeForCausalLM (first served by vLLM 0.8.4)")


def test_every_registry_model_type_is_served_by_both_pinned_engines() -> None:
    from infragen.catalog.compat import architecture_problem

    for model in load_model_registry().values():
        assert architecture_problem("vllm", model.family) is None, model.id
        assert architecture_problem("llama.cpp", model.family) is None, model.id


def test_v100_is_never_planned_with_the_pinned_vllm() -> None:
    spec = WorkloadSpec.model_validate({
        "model": "llama-3.1-8b", "precision": ["fp16"], "cloud": "aws", "regions": ["us-east-1"],
        "instance_families": {"allow": ["p3", "g6"]},
        "traffic": {"concurrent_users": 4, "prompt_tokens": 512, "output_tokens": 128}})
    plan = plan_workload(spec, catalog=load_catalog(), model=load_model_registry()["llama-3.1-8b"], workload_name="t")
    assert not plan.deployment.instance_type.startswith("p3")
    assert any(a.instance_type.startswith("p3") and "wheel has kernels for" in a.rejected_because
               for a in plan.alternatives)


def test_an_awq_repo_is_served_as_awq_never_with_quantization_fp8() -> None:
    spec = WorkloadSpec.model_validate({
        "model": "qwen2-7b", "precision": ["fp8", "int4-awq"], "weights": "Qwen/Qwen2-7B-Instruct-AWQ",
        "cloud": "aws", "regions": ["us-east-1"], "instance_families": {"allow": ["g6", "g6e"]},
        "traffic": {"concurrent_users": 8, "prompt_tokens": 512, "output_tokens": 128}})
    plan = plan_workload(spec, catalog=load_catalog(), model=load_model_registry()["qwen2-7b"], workload_name="t")
    assert plan.deployment.precision == "int4-awq" and "--quantization" not in plan.engine.argv
    assert all(a.precision != "fp8" or "served as int4-awq, never as fp8" in a.rejected_because
               for a in plan.alternatives)


def _plan_fp8(**extra):  # type: ignore[no-untyped-def]
    spec = WorkloadSpec.model_validate({
        "model": "llama-3.1-8b", "cloud": "aws", "regions": ["us-east-1"], "instance_families": {"allow": ["g6e"]},
        "traffic": {"concurrent_users": 8, "prompt_tokens": 512, "output_tokens": 128}, **extra})
    return plan_workload(spec, catalog=load_catalog(), model=load_model_registry()["llama-3.1-8b"], workload_name="t")


def _quantization(argv: list[str]) -> str | None:
    return argv[argv.index("--quantization") + 1] if "--quantization" in argv else None


def test_a_16_bit_checkpoint_served_as_fp8_is_quantized_at_load_with_the_current_flag() -> None:
    # vLLM 0.34 deprecates `--quantization fp8` for online quantization in favour of fp8_per_tensor
    plan = _plan_fp8(precision=["fp8"])
    assert plan.deployment.precision == "fp8" and _quantization(plan.engine.argv) == "fp8_per_tensor"
    own = _plan_fp8(precision=["bf16", "fp8"], weights="acme/llama-3.1-8b-finetune", slo={"tpot_ms": 20})
    assert own.deployment.precision == "fp8" and _quantization(own.engine.argv) == "fp8_per_tensor"


def test_a_given_fp8_checkpoint_decides_its_own_method() -> None:
    # RedHatAI FP8 repos are compressed-tensors: vLLM refuses `--quantization fp8` on them
    # ("Quantization method specified in the model config (compressed-tensors) does not match ...")
    plan = _plan_fp8(precision=["fp8"], weights="RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8")
    assert plan.deployment.precision == "fp8" and _quantization(plan.engine.argv) is None
    assert any("served as an FP8 checkpoint" in w for w in plan.warnings)


def test_a_block_fp8_reference_checkpoint_gets_no_quantization_flag() -> None:
    from infragen.sizing.compat_gate import checkpoint_kind

    model = load_model_registry()["deepseek-v3"]
    spec = WorkloadSpec.model_validate({
        "model": "deepseek-v3", "precision": ["fp8"], "cloud": "aws", "regions": ["us-east-1"],
        "traffic": {"concurrent_users": 8, "prompt_tokens": 512, "output_tokens": 128}})
    assert model.weight_block_size is not None and checkpoint_kind(spec, model, "fp8") == "quantized"


def test_every_non_16_bit_vllm_precision_has_a_quantization_rule() -> None:
    from infragen.catalog.compat import quantization_flag
    from infragen.spec import PREQUANTIZED_PRECISIONS, VLLM_PRECISIONS

    for precision in sorted(VLLM_PRECISIONS - {"bf16", "fp16"}):
        quantization_flag(precision, "quantized")  # raises DataError without a rule
    assert quantization_flag("fp8", "sixteen_bit") == "fp8_per_tensor"
    assert all(quantization_flag(p, "quantized") is None for p in PREQUANTIZED_PRECISIONS & VLLM_PRECISIONS)
    assert all(r.source.strip() for r in load_compat().quantization_flags)
