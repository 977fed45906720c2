"""Planner behaviour: examples plan, constraints hold by the planner's own estimator, brute-force optimality on a
tiny catalog, determinism, JSON round-trip, infeasible exits 3 with guidance."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infragen.catalog import catalog_from_records, load_catalog
from infragen.catalog.models import load_model_registry
from infragen.errors import InfeasibleError
from infragen.plan import Plan
from infragen.sizing import estimate, plan_file, plan_workload, search
from infragen.sizing.hardware import hardware_from_instance
from infragen.sizing.load_estimate import LoadModel, prepare_load
from infragen.sizing.open_loop import NO_SLO_UTILISATION, slo_miss
from infragen.sizing.uncertainty import latency_factor
from infragen.spec import WorkloadSpec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_plans_and_meets_its_slos(path: Path) -> None:
    plan = plan_file(path)
    spec = WorkloadSpec.model_validate(__import__("yaml").safe_load(path.read_text()))
    d = plan.deployment
    assert d.cloud == spec.cloud
    assert d.replicas >= spec.min_replicas
    assert d.precision in spec.precision
    slo = spec.slo
    est = plan.estimate
    assert est.slo_confidence == spec.slo_confidence and est.latency_factor is not None
    k = est.latency_factor  # the SLOs hold on the estimate times the confidence factor
    if slo.tpot_ms:
        assert est.tpot_ms * k <= slo.tpot_ms
    if slo.ttft_p99_ms:
        assert (est.ttft_p99_ms if est.ttft_p99_ms is not None else est.ttft_ms) * k <= slo.ttft_p99_ms
    if spec.traffic.peak_requests_per_s:
        assert est.capacity_requests_per_s * d.replicas >= spec.traffic.peak_requests_per_s - 1e-9
        if d.engine == "vllm":  # the load model: percentiles at the peak's per-replica rate
            assert est.ttft_p50_ms <= est.ttft_p99_ms and est.running_batch > 0
    assert plan.hardware.memory_gib >= plan.hardware.required_memory_gib
    assert "--api-key" not in plan.engine.argv
    if d.nodes_per_replica > 1:
        assert spec.allow_multi_node and plan.network.rdma in {"efa", "erdma"} and plan.network.placement == "cluster"


def test_plan_json_has_the_promised_keys_and_round_trips() -> None:
    plan = plan_file(ROOT / "examples" / "team-chatbot.yaml")
    doc = json.loads(plan.to_json())
    for key in ("schema_version", "digest", "deployment", "engine", "estimate", "cost", "alternatives"):
        assert key in doc
    for key in ("cloud", "region", "instance_type", "gpus_per_node", "nodes_per_replica", "replicas", "tp", "pp",
                "engine", "precision"):
        assert key in doc["deployment"]
    assert doc["engine"]["argv"][:2] == ["vllm", "serve"] and doc["engine"]["port"] == 8000
    assert {"ttft_ms", "tpot_ms", "capacity_requests_per_s"} <= doc["estimate"].keys()
    assert {"usd_per_hour", "usd_per_month"} <= doc["cost"].keys()
    alt = doc["alternatives"][0]
    assert {"instance_type", "usd_per_month", "rejected_because"} <= alt.keys()
    again = Plan.model_validate_json(plan.to_json())
    assert again == plan and again.digest == plan.digest


def test_same_input_same_digest() -> None:
    a = plan_file(ROOT / "examples" / "enterprise-70b.yaml")
    load_catalog.cache_clear()
    b = plan_file(ROOT / "examples" / "enterprise-70b.yaml")
    assert a.digest == b.digest


def _tiny_catalog(ids: list[str]):
    full = load_catalog()
    insts = [full.instance(i) for i in ids]
    return catalog_from_records(full.accelerators.values(), full.cpus.values(), insts,
                                usd_per_cny=full.usd_per_cny, fx_source=full.fx_source)


TINY = ["g6.xlarge", "g6e.xlarge", "g6e.12xlarge", "g4dn.xlarge", "p5.4xlarge", "g6.12xlarge"]


@settings(max_examples=25, deadline=None)
@given(qps=st.floats(0.2, 40), tpot=st.sampled_from([None, 30.0, 60.0, 120.0]),
       ttft=st.sampled_from([None, 500.0, 2000.0]), prompt=st.sampled_from([256, 1024, 4096]),
       precision=st.sampled_from(["bf16", "int4-awq", "fp8"]))
def test_no_cheaper_feasible_candidate_exists(qps, tpot, ttft, prompt, precision) -> None:
    """Brute force on a small catalog: every candidate meeting the constraints costs at least the chosen plan."""
    spec = WorkloadSpec(model="qwen2-7b", precision=precision, weights="Qwen/Qwen2-7B-Instruct-AWQ",
                        traffic={"peak_requests_per_s": qps, "prompt_tokens": prompt, "output_tokens": 128,
                                 "max_context_tokens": 8192},
                        slo={"tpot_ms": tpot, "ttft_p99_ms": ttft}, cloud="aws", regions=["us-east-1"])
    catalog = _tiny_catalog(TINY)
    model = load_model_registry()["qwen2-7b"]
    try:
        plan = plan_workload(spec, catalog=catalog, model=model, workload_name="t")
    except InfeasibleError:
        plan = None
    feasible_costs = []
    for inst_id in TINY:
        inst = catalog.instance(inst_id)
        hw = hardware_from_instance(inst, catalog)
        price = inst.price_in("us-east-1").on_demand_usd_per_hour
        for tp in (1, 2, 4):
            if tp > inst.gpu_count or inst.gpu_count % tp:
                continue
            if precision == "fp8" and hw.accelerator.fp8_tflops is None:
                continue
            # Brute force over replicas with the load model: the fewest whose per-replica Poisson rate meets the
            # SLOs with every step slowed by the confidence factor (the planner bisects on the rate instead).
            load = prepare_load(model, hw, precision=precision, tp=tp, input_len=prompt, output_len=128,
                                max_model_len=8192, plan_flags=True)
            if not isinstance(load, LoadModel):
                continue
            top = estimate(model, hw, precision=precision, tp=tp, input_len=prompt, output_len=128,
                           concurrency=None, max_model_len=8192)
            slow = load.slowed(latency_factor(top.regime, spec.slo_confidence))
            slo = (spec.slo.ttft_p99_ms, spec.slo.tpot_ms, spec.slo.e2e_p99_ms)
            if slo_miss(slo, slow.at(slow.capacity_per_s() * 1e-3))[0] > 1:  # the planner's trickle
                continue
            if slo == (None, None, None):  # no SLO: the policy's utilisation cap of the saturation rate
                replicas = max(1, math.ceil(qps / (NO_SLO_UTILISATION * slow.capacity_per_s()) - 1e-9))
            else:
                replicas = max(1, math.ceil(qps / slow.capacity_per_s()))
                while slo_miss(slo, slow.at(qps / replicas))[0] > 1:
                    replicas += 1
            per_node = inst.gpu_count // tp
            if inst.memory_gib < 1.5 * load.base.weights_gib_per_gpu * tp * per_node:
                continue
            feasible_costs.append(-(-replicas // per_node) * price)
    if plan is None:
        assert not feasible_costs
    else:
        assert plan.cost.usd_per_hour <= min(feasible_costs) + 1e-6


def test_search_gives_every_rejection_a_reason() -> None:
    spec = WorkloadSpec(model="llama-3.1-70b", traffic={"peak_requests_per_s": 2}, cloud="aws",
                        regions=["us-east-1"])
    result = search(spec, load_model_registry()["llama-3.1-70b"], load_catalog())
    assert result.candidates
    assert all(c.rejected is None or c.rejected.strip() for c in result.candidates)
    small = [c for c in result.candidates if c.sizing.instance.id == "g6.xlarge"]
    assert small and all("GiB" in (c.rejected or "") for c in small)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "infragen", *args], capture_output=True, text=True, cwd=ROOT)


def test_infeasible_exits_3_with_guidance(tmp_path: Path) -> None:
    wl = tmp_path / "w.yaml"
    wl.write_text("model: llama-3.1-8b\ntraffic: {peak_requests_per_s: 5}\nslo: {tpot_ms: 1}\ncloud: aws\n")
    out = _run("plan", str(wl))
    assert out.returncode == 3
    assert "Traceback" not in out.stderr
    assert "exceeds the 1 ms SLO" in out.stderr and "below the best reachable" not in out.stderr
    assert re.search(r"To fix: slo\.tpot_ms >= [\d.]+ would make \d+ x \S+ .* feasible at \$", out.stderr)


def test_multinode_needs_allow_multi_node(tmp_path: Path) -> None:
    wl = tmp_path / "w.yaml"
    wl.write_text("model: llama-3.1-405b\nprecision: bf16\ntraffic: {concurrent_users: 4, max_context_tokens: 8192}\n"
                  "cloud: aws\nregions: [us-east-1]\ninstance_families: {allow: [p4d, p4de, p5]}\n")
    out = _run("plan", str(wl))
    assert out.returncode == 3
    assert "allow_multi_node" in out.stderr


def test_plan_cli_formats(tmp_path: Path) -> None:
    out_file = tmp_path / "plan.json"
    res = _run("plan", "examples/light-api.yaml", "--format", "markdown", "--out", str(out_file))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("### `light-api`")
    plan = Plan.model_validate_json(out_file.read_text())
    assert plan.digest in res.stdout
    table = _run("plan", "examples/light-api.yaml")
    assert "CHOSEN" in table.stdout and plan.deployment.instance_type in table.stdout


def test_planning_never_imports_pulumi_or_jinja2() -> None:
    code = ("import sys\nfrom infragen.cli import main\n"
            "try:\n    main(['plan', 'examples/cpu-edge.yaml', '--format', 'json'])\nexcept SystemExit:\n    pass\n"
            "print('HEAVY', [m for m in ('pulumi', 'jinja2') if m in sys.modules], file=sys.stderr)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "HEAVY []" in res.stderr, res.stderr


def test_the_explanation_names_each_engines_own_concurrency_flag() -> None:
    """llama-server takes its concurrent requests as --parallel slots; vLLM's is max_num_seqs."""
    cpu = plan_file(ROOT / "examples" / "cpu-edge.yaml")
    argv = cpu.engine.argv
    slots = argv[argv.index("--parallel") + 1]
    line = next(s for s in cpu.explanation if s.startswith("Each replica admits"))
    assert f"up to {slots} requests at once (--parallel slots:" in line
    assert "max_num_seqs" not in " ".join(cpu.explanation)
    gpu = plan_file(ROOT / "examples" / "light-api.yaml")
    line = next(s for s in gpu.explanation if s.startswith("Each replica admits"))
    assert "requests at once (max_num_seqs:" in line
