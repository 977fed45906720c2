"""Sanity limits (`limits`): an absurd plan is refused with exit 3 and the size it would need; a workload without
any SLO is warned what latency it was sized to."""

from __future__ import annotations

from pathlib import Path

import pytest

from infragen.catalog import catalog_from_records, load_catalog
from infragen.catalog.models import load_model_registry
from infragen.errors import InfeasibleError
from infragen.sizing import plan_workload
from infragen.spec import WorkloadSpec
from tests.spec.conftest import run_cli


def _catalog(ids: list[str]):
    full = load_catalog()
    return catalog_from_records(full.accelerators.values(), full.cpus.values(), [full.instance(i) for i in ids],
                                usd_per_cny=full.usd_per_cny, fx_source=full.fx_source)


def _plan(**fields: object):
    spec = WorkloadSpec.model_validate({"model": "llama-3.1-8b", "cloud": "aws", "regions": ["us-east-1"],
                                        **fields})
    return plan_workload(spec, catalog=_catalog(["g6.xlarge", "g6e.xlarge"]),
                         model=load_model_registry()["llama-3.1-8b"], workload_name="t")


@pytest.mark.parametrize("text", ["traffic: {peak_requests_per_s: 1000000000000}\n",
                                  "traffic: {peak_requests_per_s: 1}\nmin_replicas: 100000\n"])
def test_absurd_plans_exit_3_naming_the_size_and_the_limit(tmp_path: Path, text: str) -> None:
    wl = tmp_path / "w.yaml"
    wl.write_text("model: llama-3.1-8b\ncloud: aws\nregions: [us-east-1]\n" + text)
    r = run_cli("plan", str(wl))
    assert r.code == 3, r.err
    assert "above the sanity limits of 1,000 nodes and $1,000,000/month" in r.err
    assert "Traceback" not in r.err and "typo" in r.err


def test_the_advice_to_raise_limits_is_exactly_what_makes_the_plan() -> None:
    with pytest.raises(InfeasibleError) as info:
        _plan(traffic={"peak_requests_per_s": 2}, min_replicas=1500)
    fix = info.value.fix or ""
    assert "limits.max_nodes: 1500" in fix
    usd = int(fix.split("limits.max_usd_per_month: ")[1].split()[0])
    plan = _plan(traffic={"peak_requests_per_s": 2}, min_replicas=1500,
                 limits={"max_nodes": 1500, "max_usd_per_month": usd})
    assert plan.deployment.nodes == 1500 and plan.cost.usd_per_month <= usd


def test_a_cost_limit_below_every_candidate_exits_3_naming_it() -> None:
    cheap = _plan(traffic={"peak_requests_per_s": 2}, min_replicas=3)
    # the cheapest plan costs more than this limit: the search keeps looking, and here nothing is cheaper
    with pytest.raises(InfeasibleError) as info:
        _plan(traffic={"peak_requests_per_s": 2}, min_replicas=3,
              limits={"max_usd_per_month": cheap.cost.usd_per_month - 1})
    assert "limits.max_usd_per_month" in (info.value.fix or "")


def test_no_slo_warns_the_latency_it_was_sized_to() -> None:
    plan = _plan(traffic={"peak_requests_per_s": 2})
    warning = next(w for w in plan.warnings if w.startswith("no slo given"))
    assert f"TTFT {plan.estimate.ttft_ms:,.0f} ms" in warning and f"TPOT {plan.estimate.tpot_ms:.1f} ms" in warning
    with_slo = _plan(traffic={"peak_requests_per_s": 2}, slo={"tpot_ms": 200})
    assert not any(w.startswith("no slo given") for w in with_slo.warnings)


def test_limits_are_bounded_so_plans_stay_finite(tmp_path: Path) -> None:
    wl = tmp_path / "w.yaml"
    wl.write_text("model: llama-3.1-8b\ntraffic: {peak_requests_per_s: 1}\nlimits: {max_nodes: 10000000}\n")
    r = run_cli("plan", str(wl))
    assert r.code == 2 and "limits.max_nodes" in r.err
