"""Every engine command line infragen renders for the examples, the test workloads and the hand-built test plans,
one JSON `[label, argv]` per line, for vllm_argv_check.py to run through the pinned vLLM's real parser (which
CI does not install). Run from the repository root in the project's venv: `python -m tests.rendered_argvs`.
tests/render/test_engine_flags.py replays the same set against the generated option data on every test run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from infragen.catalog import load_catalog
from infragen.catalog.models import load_model_registry
from infragen.errors import InfragenError
from infragen.sizing import plan_file, plan_workload
from infragen.spec import WorkloadSpec
from tests.plan_factory import make_plan

#: FP8 workloads none of the examples covers: a 16-bit checkpoint quantized at load, a given FP8 checkpoint, and
#: a block-FP8 reference checkpoint (each renders a different --quantization).
FP8_WORKLOADS = {
    "fp8 from the 16-bit reference": {"model": "llama-3.1-8b", "precision": ["fp8"]},
    "fp8 checkpoint in weights": {"model": "llama-3.1-8b", "precision": ["fp8"],
                                  "weights": "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8"},
    "block-fp8 reference": {"model": "deepseek-v3", "precision": ["fp8"]},
}


def rendered_argvs(root: Path) -> list[tuple[str, list[str]]]:
    """(label, argv) for every vLLM plan of the examples and test workloads, and the hand-built test plans."""
    out: list[tuple[str, list[str]]] = []
    for path in sorted([*root.glob("examples/*.yaml"), *root.glob("tests/**/fixtures/*.yaml")]):
        if "traffic:" not in path.read_text(encoding="utf-8"):
            continue
        try:
            plan = plan_file(path)
        except InfragenError as exc:  # an infeasible or deliberately bad fixture has no command line
            print(f"# {path}: {type(exc).__name__}", file=sys.stderr)
            continue
        out.append((str(path.relative_to(root)), list(plan.engine.argv)))
    for label, fields in FP8_WORKLOADS.items():
        spec = WorkloadSpec.model_validate({
            **fields, "cloud": "aws", "regions": ["us-east-1"],
            "traffic": {"concurrent_users": 8, "prompt_tokens": 512, "output_tokens": 128}})
        plan = plan_workload(spec, catalog=load_catalog(), model=load_model_registry()[fields["model"]],
                             workload_name="argv-check")
        out.append((label, list(plan.engine.argv)))
    # expert parallelism: the block-FP8 Qwen3-235B checkpoint on 8 x A100, where only tp 8 + EP holds the blocks
    spec = WorkloadSpec.model_validate({
        "model": "qwen3-235b-a22b", "precision": ["fp8"], "cloud": "aws", "regions": ["us-east-1"],
        "instance_families": {"allow": ["p4de"]},
        "traffic": {"concurrent_users": 8, "prompt_tokens": 1024, "output_tokens": 256}})
    q235_fp8 = load_model_registry()["qwen3-235b-a22b"].model_copy(update={"weight_block_size": (128, 128)})
    plan = plan_workload(spec, catalog=load_catalog(), model=q235_fp8, workload_name="argv-check")
    out.append(("expert parallel (block-fp8 Qwen3-235B, 8 x A100)", list(plan.engine.argv)))
    for cloud in ("aws", "alicloud"):
        for kind in ("single", "packed", "tp", "multinode"):
            out.append((f"plan_factory {kind} {cloud}", list(make_plan(kind, cloud).engine.argv)))  # type: ignore[arg-type]
    return out


if __name__ == "__main__":
    for label, argv in rendered_argvs(Path.cwd()):
        print(json.dumps([label, argv]))
