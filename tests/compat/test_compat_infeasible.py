"""Exit 3 when compatibility rules refused candidates: the message counts them per rule, and `To fix` names the
rule with a workload change that re-planning proved feasible (explain.advise)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from infragen.catalog import load_catalog
from infragen.catalog.models import load_model_registry
from infragen.errors import InfeasibleError
from infragen.sizing import plan_workload
from infragen.spec import WorkloadSpec

REGISTRY = load_model_registry()


def _spec(**kw: Any) -> WorkloadSpec:
    data: dict[str, Any] = {
        "traffic": {"concurrent_users": 8, "prompt_tokens": 1024, "output_tokens": 256},
        "slo": {"tpot_ms": 200, "ttft_p99_ms": 20000}, "cloud": "aws", "regions": ["us-east-1"]}
    data.update(kw)
    return WorkloadSpec.model_validate(data)


def _infeasible(spec: WorkloadSpec) -> InfeasibleError:
    with pytest.raises(InfeasibleError) as info:
        plan_workload(spec, catalog=load_catalog(), model=REGISTRY[str(spec.model)], workload_name="t")
    return info.value


def _replans(spec: WorkloadSpec, **update: Any) -> None:
    data = spec.model_dump(exclude_unset=True) | update
    plan = plan_workload(WorkloadSpec.model_validate(data), catalog=load_catalog(), model=REGISTRY[str(spec.model)],
                         workload_name="t")
    assert plan.deployment.instance_type


def test_block_fp8_checkpoint_planned_as_bf16_says_add_fp8() -> None:
    spec = _spec(model="deepseek-v3", precision=["bf16"], instance_families={"allow": ["p5en", "p5"]})
    err = _infeasible(spec)
    assert re.search(r"Compatibility rules \(docs/compat-rules.md\) refused \d+: checkpoint method", err.message)
    assert err.fix and re.match(r"checkpoint method \(\d+ refused\): precision: \[bf16, fp8\] would make .*p5",
                                err.fix)
    _replans(spec, precision=["bf16", "fp8"])


def test_fp8_kv_cache_on_ampere_says_auto() -> None:
    spec = _spec(model="llama-3.1-8b", precision=["bf16"], kv_cache_dtype="fp8",
                 instance_families={"allow": ["p4d"]})
    err = _infeasible(spec)
    assert "fp8 KV cache kernels" in err.message
    assert err.fix and "fp8 KV cache kernels" in err.fix and "kv_cache_dtype: auto would make" in err.fix
    _replans(spec, kv_cache_dtype="auto")


def test_a_gpu_the_wheel_does_not_cover_says_widen_the_families() -> None:
    spec = _spec(model="llama-3.1-8b", precision=["fp16"], instance_families={"allow": ["p3"]})
    err = _infeasible(spec)
    assert "vLLM wheel" in err.message
    assert err.fix and "vLLM wheel" in err.fix and "instance_families: {} (every family) would make" in err.fix
    _replans(spec, instance_families={})


def test_no_compat_rule_no_compat_fix() -> None:
    spec = _spec(model="llama-3.1-8b", precision=["bf16"], slo={"tpot_ms": 0.5}, instance_families={"allow": ["g6"]})
    err = _infeasible(spec)
    assert "Compatibility rules" not in err.message and "refused)" not in (err.fix or "")
