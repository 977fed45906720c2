"""Explanations: alternatives cover every instance type considered, `--explain TYPE` says why one lost, and an
infeasible workload gets one entry per type, ranked by how far it misses, with advice checked by re-planning."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from infragen.catalog import catalog_from_records, load_catalog
from infragen.catalog.models import load_model_registry
from infragen.errors import InfeasibleError
from infragen.sizing import plan_workload, search
from infragen.spec import WorkloadSpec
from tests.spec.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
GPU_TYPES = ["g6.xlarge", "g6e.xlarge", "g6.12xlarge", "g5.xlarge", "g6e.12xlarge"]


def _catalog(ids: list[str]):
    full = load_catalog()
    return catalog_from_records(full.accelerators.values(), full.cpus.values(), [full.instance(i) for i in ids],
                                usd_per_cny=full.usd_per_cny, fx_source=full.fx_source)


def _spec(**fields: object) -> WorkloadSpec:
    return WorkloadSpec.model_validate({"model": "llama-3.1-8b", "cloud": "aws", "regions": ["us-east-1"],
                                        "traffic": {"peak_requests_per_s": 2}, **fields})


def _refusal(spec: WorkloadSpec, ids: list[str]) -> InfeasibleError:
    with pytest.raises(InfeasibleError) as info:
        plan_workload(spec, catalog=_catalog(ids), model=load_model_registry()[str(spec.model)], workload_name="t")
    return info.value


def _closest(err: InfeasibleError) -> list[str]:
    """Instance types named under Closest, in order."""
    text = err.message.split("Closest: ", 1)[1]
    return [m.group(1) for m in re.finditer(r"(?:^|; )(?:\d+ x )?([a-z0-9.-]+) \(", text)]


def test_json_alternatives_cover_every_instance_type_considered() -> None:
    spec = _spec(slo={"tpot_ms": 60})
    catalog, model = _catalog(GPU_TYPES), load_model_registry()["llama-3.1-8b"]
    plan = plan_workload(spec, catalog=catalog, model=model, workload_name="t")
    considered = {c.sizing.instance.id for c in search(spec, model, catalog).candidates}
    listed = [a.instance_type for a in plan.alternatives]
    assert len(listed) == len(set(listed))  # one row per type
    assert set(listed) | {plan.deployment.instance_type} == considered
    for alt in plan.alternatives:
        assert alt.feasible == alt.rejected_because.startswith(("costs", "same price"))
        if alt.feasible:
            assert alt.nodes and alt.replicas and alt.usd_per_month and alt.ttft_ms and alt.tpot_ms


def test_the_table_shows_top_rows_and_all_shows_every_one(tmp_path: Path) -> None:
    default = run_cli("plan", str(ROOT / "examples" / "light-api.yaml"))
    everything = run_cli("plan", str(ROOT / "examples" / "light-api.yaml"), "--all")
    assert default.code == everything.code == 0
    rows = lambda out: [x for x in out.split("Candidates")[1].splitlines()[2:] if x.startswith("   ")]  # noqa: E731
    assert len(rows(default.out)) <= 11 < len(rows(everything.out))
    assert "more instance types: --all lists them" in default.out
    doc = json.loads(run_cli("plan", str(ROOT / "examples" / "light-api.yaml"), "--format", "json").out)
    assert len(doc["alternatives"]) >= len(rows(everything.out)) - 1


def test_explain_says_why_a_type_lost_in_one_paragraph(tmp_path: Path) -> None:
    wl = tmp_path / "w.yaml"
    wl.write_text("model: llama-3.1-8b\ntraffic: {peak_requests_per_s: 2}\nslo: {tpot_ms: 30}\ncloud: aws\n"
                  "regions: [us-east-1]\ninstance_families: {deny: [p5]}\n")
    r = run_cli("plan", str(wl), "--explain", "g6.xlarge")
    assert r.code == 0 and r.out.count("\n") == 1, r.out
    assert r.out.startswith("g6.xlarge cannot serve the workload") and "exceeds the 30 ms SLO" in r.out
    denied = run_cli("plan", str(wl), "--explain", "p5.48xlarge")
    assert denied.code == 0 and "instance_families.deny lists its family p5" in denied.out
    typo = run_cli("plan", str(wl), "--explain", "g6x.xlarge")
    assert typo.code == 2 and "did you mean 'g6.xlarge'" in typo.err


def test_explain_works_when_the_workload_is_infeasible(tmp_path: Path) -> None:
    wl = tmp_path / "w.yaml"
    wl.write_text("model: llama-3.1-8b\ntraffic: {peak_requests_per_s: 2}\nslo: {tpot_ms: 1}\ncloud: aws\n"
                  "regions: [us-east-1]\n")
    r = run_cli("plan", str(wl), "--explain", "g6e.xlarge")
    assert r.code == 0 and "exceeds the 1 ms SLO" in r.out


def test_infeasible_lists_each_type_once_ranked_by_how_far_it_misses() -> None:
    err = _refusal(_spec(slo={"tpot_ms": 8}), GPU_TYPES)
    names = _closest(err)
    assert len(names) == len(set(names)) == 3
    search_result = search(_spec(slo={"tpot_ms": 8}), load_model_registry()["llama-3.1-8b"], _catalog(GPU_TYPES))
    best: dict[str, float] = {}
    for c in search_result.candidates:
        best[c.sizing.instance.id] = min(best.get(c.sizing.instance.id, float("inf")), c.miss)
    assert names == sorted(best, key=lambda t: (best[t], t))[:3] or [best[n] for n in names] == sorted(
        best[n] for n in names)


def test_slo_advice_compares_correctly_and_re_planning_with_it_succeeds() -> None:
    spec = _spec(slo={"tpot_ms": 8})
    err = _refusal(spec, GPU_TYPES)
    assert "below the best reachable" not in str(err.fix)
    match = re.search(r"slo\.tpot_ms >= ([\d.]+) would make (\d+) x ([a-z0-9.]+) [^;]*? feasible at \$([\d,]+)/month",
                      err.fix or "")
    assert match, err.fix
    relaxed = _spec(slo={"tpot_ms": float(match.group(1))})
    plan = plan_workload(relaxed, catalog=_catalog(GPU_TYPES), model=load_model_registry()["llama-3.1-8b"],
                         workload_name="t")
    assert plan.deployment.instance_type == match.group(3) and plan.deployment.nodes == int(match.group(2))
    assert f"{plan.cost.usd_per_month:,.0f}" == match.group(4)


def test_advice_never_repeats_the_current_pricing_and_names_allow_unpriced_when_it_is_the_fix() -> None:
    unpriced = [i.id for i in load_catalog().instances_for("alicloud") if not i.priced_regions and i.gpu_count][:3]
    assert unpriced, "the catalog has unpriced GPU types (gn8v...)"
    spec = WorkloadSpec.model_validate({"model": "llama-3.1-8b", "cloud": "alicloud", "traffic": {
        "peak_requests_per_s": 1}})
    err = _refusal(spec, [*unpriced, "ecs.g7.8xlarge"])
    assert "pricing: on-demand" not in (err.fix or "")
    assert (err.fix or "").startswith("allow_unpriced: true would make") and "(no price: cost unknown)" in err.fix


def test_budget_advice_is_the_cheapest_plan_and_checked() -> None:
    err = _refusal(_spec(budget_usd_per_month=100), GPU_TYPES)
    match = re.search(r"budget_usd_per_month >= ([\d,]+) would make", err.fix or "")
    assert match, err.fix
    plan = plan_workload(_spec(budget_usd_per_month=float(match.group(1).replace(",", ""))),
                         catalog=_catalog(GPU_TYPES), model=load_model_registry()["llama-3.1-8b"], workload_name="t")
    assert plan.cost.usd_per_month <= float(match.group(1).replace(",", ""))
