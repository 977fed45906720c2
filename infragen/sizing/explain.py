"""Why the chosen plan beat every other instance type, and what would make an infeasible workload possible.

Pure: reads a search result and, for advice, re-runs the search on changed copies of the workload (every change it
suggests is one it has checked); prints nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from infragen.architecture import ModelArchitecture
from infragen.catalog import Catalog
from infragen.errors import InfeasibleError
from infragen.plan import MAX_PLAN_LIST, Alternative
from infragen.sizing import compat_fix, token_cost
from infragen.sizing.calibration import Calibration
from infragen.sizing.open_loop import TRICKLE_PREFIX
from infragen.sizing.search import LIMIT_PREFIX, Candidate, Estimator, SearchResult, search
from infragen.sizing.uncertainty import latency_factor
from infragen.spec import MAX_LIMIT_NODES, MAX_LIMIT_USD_PER_MONTH, TrafficSpec, WorkloadSpec

#: Closest candidates an infeasible message names (one per instance type).
CLOSEST = 3


def _rank(c: Candidate) -> tuple[bool, float, tuple[Any, ...]]:
    """Feasible first (cheapest), then by how far the binding constraint is missed."""
    return (c.rejected is not None, c.miss if c.rejected else 0.0, c.sort_key())


def best_per_type(candidates: Iterable[Candidate]) -> list[Candidate]:
    """The best candidate of each instance type, ranked: feasible by cost, then rejected by how close they came."""
    best: dict[str, Candidate] = {}
    for cand in sorted(candidates, key=_rank):
        best.setdefault(cand.sizing.instance.id, cand)
    return sorted(best.values(), key=_rank)


def describe(c: Candidate, *, region: bool = True) -> str:
    """`2 x g6.xlarge (fp8, vllm, tp=1) in us-east-1`."""
    lay = c.sizing.layout
    shape = f"tp={lay.tp}" + (" expert-parallel" if lay.expert_parallel else "") + (
        f" pp={lay.pp}" if lay.pp > 1 else "")
    if lay.replicas_per_node > 1:
        shape += f", {lay.replicas_per_node} engines/node"
    nodes = f"{c.nodes} x " if c.sizing.estimate is not None else ""
    where = f" in {c.region}" if region else ""
    return f"{nodes}{c.sizing.instance.id} ({lay.precision}, {lay.engine}, {shape}){where}"


def _tie_break(chosen: Candidate, other: Candidate) -> str:
    """What decided between two candidates of the same price (Candidate.sort_key's order after the cost)."""
    a, b = chosen.sort_key(), other.sort_key()
    if a[2] != b[2]:
        return "has the lower TTFT"
    if a[3] != b[3]:
        return "has the lower TPOT"
    if a[4] != b[4]:
        return f"needs fewer nodes ({chosen.nodes} vs {other.nodes})"
    return "comes first by instance id"


def token_costs(c: Candidate, traffic: TrafficSpec) -> tuple[float | None, float | None]:
    """$ per 1M output tokens of a serving, priced candidate: at its own capacity and at the workload's peak."""
    s, est = c.sizing, c.sizing.estimate
    if est is None or s.rejected or c.usd_per_hour is None:
        return None, None
    capacity = token_cost.capacity_output_tokens_per_s(s.replicas, est.requests_per_s, traffic.output_tokens)
    peak = token_cost.peak_output_tokens_per_s(traffic, s.replicas, est.output_tokens_per_s)
    return (token_cost.usd_per_million_tokens(c.usd_per_hour, capacity),
            token_cost.usd_per_million_tokens(c.usd_per_hour, peak))


def alternatives(chosen: Candidate, result: SearchResult, traffic: TrafficSpec) -> list[Alternative]:
    """The best candidate of every other instance type considered, and why it lost."""
    out = []
    for cand in best_per_type(result.candidates):
        if cand.sizing.instance.id == chosen.sizing.instance.id:
            continue
        est, lay, s = cand.sizing.estimate, cand.sizing.layout, cand.sizing
        if cand.rejected:
            why = cand.rejected
        elif cand.usd_per_month is not None and chosen.usd_per_month is not None:
            extra = cand.usd_per_month - chosen.usd_per_month
            why = (f"costs ${extra:,.0f}/month more than the chosen plan" if extra >= 0.5
                   else f"same price; the chosen plan {_tie_break(chosen, cand)} (tie break)")
        else:
            why = "ranked after the chosen plan (price unknown or higher)"
        serves = est is not None and not s.rejected
        at_capacity, at_peak = token_costs(cand, traffic)
        out.append(Alternative(
            cloud=cand.cloud, region=cand.region, instance_type=s.instance.id, engine=lay.engine,
            precision=lay.precision, tp=lay.tp, pp=lay.pp, expert_parallel=lay.expert_parallel,
            replicas_per_node=lay.replicas_per_node,
            nodes_per_replica=lay.nodes_per_replica,
            replicas=s.replicas if serves else None, nodes=cand.nodes if serves else None,
            usd_per_month=None if cand.usd_per_month is None or s.rejected else round(cand.usd_per_month, 2),
            ttft_ms=round(est.ttft_ms, 1) if est else None, tpot_ms=round(est.tpot_ms, 2) if est else None,
            usd_per_million_output_tokens_at_capacity=at_capacity, usd_per_million_output_tokens_at_peak=at_peak,
            feasible=cand.rejected is None,
            miss=None if cand.rejected is None or math.isinf(cand.miss) else round(min(cand.miss, 1e9), 3),
            rejected_because=why))
        if len(out) == MAX_PLAN_LIST:
            break
    return out


def _load(spec: WorkloadSpec) -> str:
    t = spec.traffic
    if t.peak_requests_per_s is not None:
        return f"traffic.peak_requests_per_s {t.peak_requests_per_s:g}"
    think = f" (think_time_s {t.think_time_s:g})" if t.think_time_s else ""
    return f"traffic.concurrent_users {t.concurrent_users}{think}"


def over_limits(spec: WorkloadSpec, model: ModelArchitecture, result: SearchResult) -> InfeasibleError | None:
    """Exit 3 naming the size the workload needs, when every candidate that could serve it is above `limits`."""
    serving = [c for c in result.candidates if c.rejected is None or c.rejected.startswith(LIMIT_PREFIX)]
    if not serving:
        return None
    smallest = min(serving, key=Candidate.sort_key)
    lim, load = spec.limits, _load(spec)
    cost = f", ${smallest.usd_per_month:,.0f}/month" if smallest.usd_per_month is not None else ""
    raise_to = [f"limits.max_nodes: {smallest.nodes}"] if smallest.nodes > lim.max_nodes else []
    if smallest.usd_per_month is not None and smallest.usd_per_month > lim.max_usd_per_month:
        raise_to.append(f"limits.max_usd_per_month: {math.ceil(smallest.usd_per_month)}")
    if smallest.nodes > MAX_LIMIT_NODES or (smallest.usd_per_month or 0) > MAX_LIMIT_USD_PER_MONTH:
        fix = (f"check {load} and min_replicas for a typo: this is beyond what infragen plans (limits go up to "
               f"{MAX_LIMIT_NODES:,} nodes and ${MAX_LIMIT_USD_PER_MONTH:,.0f}/month)")
    else:
        fix = f"check {load} and min_replicas for a typo; if this size is intended, set " + " and ".join(raise_to)
    return InfeasibleError(
        f"the cheapest plan for {model.id} needs {smallest.nodes:,} x {smallest.sizing.instance.id}{cost}, "
        f"above the sanity limits of {lim.max_nodes:,} nodes and ${lim.max_usd_per_month:,.0f}/month "
        f"({load}, min_replicas {spec.min_replicas})", fix=fix)


def _memo(estimator: Estimator) -> Estimator:
    """The estimator with its answers kept: the advice re-plans mostly repeat the same estimates. Keyed on what an
    estimate reads of the node beside its name: a GPU-only view (sizing/memo.py) is named by its GPUs alone, so
    memory per GPU and, across nodes, the network tell two such views apart."""
    cache: dict[tuple[Any, ...], Any] = {}

    def cached(model: ModelArchitecture, hw: Any, **kw: Any) -> Any:
        key = (id(model), hw.name, hw.gpu_count, hw.gpu_memory_gib, hw.network_gbps, hw.rdma,
               tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = estimator(model, hw, **kw)
        return cache[key]

    return cached


def _slo_changes(spec: WorkloadSpec, rejected: list[Candidate]) -> list[tuple[str, dict[str, Any]]]:
    """SLO relaxations: the least that lets the closest SLO-rejected candidate pass at batch 1, and 1.5 times that
    (batch 1 serves few requests per replica; a little more room often needs far fewer nodes)."""
    slo_misses = [c for c in rejected if c.sizing.first is not None and c.sizing.rejected
                  and c.sizing.rejected.startswith(("at batch 1", TRICKLE_PREFIX))]
    if not slo_misses:
        return []
    closest = min(slo_misses, key=_rank).sizing
    first = closest.first
    assert first is not None
    if closest.least_ms is not None:  # open loop: the load model's trickle, already inflated
        least = closest.least_ms
    else:  # the batch-1 estimate times the confidence factor (as search._meets)
        k = latency_factor(first.regime, spec.slo_confidence)
        least = (first.ttft_ms * k, first.tpot_ms * k, first.e2e_ms * k)
    slo, out = spec.slo, []
    for factor in (1.0, 1.5):
        new, labels = {}, []
        for name, target, value in (("ttft_p99_ms", slo.ttft_p99_ms, least[0]), ("tpot_ms", slo.tpot_ms, least[1]),
                                    ("e2e_p99_ms", slo.e2e_p99_ms, least[2])):
            if target is not None and value > target:
                need = value * factor * 1.0001  # rounded up: 0.1 ms below 100 ms, 1 ms above
                need = math.ceil(need * 10) / 10 if need < 100 else float(math.ceil(need))
                new[name] = need
                labels.append(f"slo.{name} >= {need:g}")
        out.append((" and ".join(labels), {"slo": spec.slo.model_copy(update=new)}))
    return out


def _changes(spec: WorkloadSpec, result: SearchResult) -> list[tuple[str, dict[str, Any]]]:
    """Workload changes worth trying, each only where a rejection points at it."""
    rejected = [c for c in result.candidates if c.rejected]
    reasons = [c.rejected or "" for c in rejected]
    out: list[tuple[str, dict[str, Any]]] = []
    slo = _slo_changes(spec, rejected)
    out.extend(slo)
    budget = spec.budget_usd_per_month
    if budget is not None and any("exceeds the budget" in r for r in reasons):
        out.append(("budget_usd_per_month", {"budget_usd_per_month": None}))
    memory = any(c.sizing.estimate is None and c.sizing.first is None and not math.isinf(c.miss) for c in rejected)
    if memory and not spec.allow_multi_node:
        out.append(("allow_multi_node: true", {"allow_multi_node": True}))
    if (memory or slo) and "fp8" not in spec.precision:
        out.append((f"precision: [{', '.join([*spec.precision, 'fp8'])}]", {"precision": [*spec.precision, "fp8"]}))
    if spec.pricing == "spot" and any(r.startswith("no spot price") for r in reasons):
        out.append(("pricing: on-demand", {"pricing": "on-demand"}))
    if not spec.allow_unpriced:  # types without any price are not even candidates until it is set
        out.append(("allow_unpriced: true", {"allow_unpriced": True}))
    families = spec.instance_families
    if families.allow or families.deny:
        out.append(("instance_families: {} (every family)", {"instance_families": families.model_copy(
            update={"allow": [], "deny": []})}))
    if spec.regions:
        out.append(("regions: [] (every priced region)", {"regions": []}))
    if spec.cloud != "any":
        out.append(("cloud: any", {"cloud": "any"}))
    return out


def advise(spec: WorkloadSpec, model: ModelArchitecture, catalog: Catalog, estimator: Estimator,
           result: SearchResult, calibration: Calibration | None = None) -> list[str]:
    """Single changes that make the workload feasible, each checked by planning it again."""
    memo = _memo(estimator)
    advice = []
    slo_cost: float | None = None
    compat = compat_fix.compat_changes(spec, compat_fix.compat_rules_hit(spec, model, result))
    tried = [update for _, update in compat]  # a compat change first, labelled with its rules; never twice
    for label, update in [*compat, *((lb, up) for lb, up in _changes(spec, result) if up not in tried)]:
        try:
            again = search(spec.model_copy(update=update), model, catalog, memo, calibration)
        except InfeasibleError:
            continue
        feasible = again.feasible
        if not feasible:
            continue
        best = feasible[0]
        if label.startswith("slo."):
            cost_now = best.usd_per_month if best.usd_per_month is not None else math.inf
            if slo_cost is not None and cost_now > 0.9 * slo_cost:
                continue  # the wider SLO is listed only when it saves at least 10%
            slo_cost = cost_now
        if label == "budget_usd_per_month":
            label = f"budget_usd_per_month >= {math.ceil(best.usd_per_month or 0):,}"
        cost = ("(no price: cost unknown)" if best.usd_per_month is None
                else f"at ${best.usd_per_month:,.0f}/month")
        advice.append(f"{label} would make {describe(best)} feasible {cost}")
    return advice


def infeasible(spec: WorkloadSpec, model: ModelArchitecture, catalog: Catalog, estimator: Estimator,
               result: SearchResult, calibration: Calibration | None = None) -> InfeasibleError:
    """Exit 3: the closest candidate of each type (by how far it misses) and the changes that would work."""
    over = over_limits(spec, model, result)
    if over is not None:
        return over
    ranked = best_per_type(result.candidates)
    closest = ranked[:CLOSEST]
    lines = "; ".join(f"{describe(c)}: {c.rejected}" for c in closest)
    advice = advise(spec, model, catalog, estimator, result, calibration)
    top = closest[0]
    return InfeasibleError(
        f"no candidate serves {model.id} under the workload's constraints ({len(result.candidates)} candidates "
        f"over {len(ranked)} instance types). "
        + compat_fix.rules_summary(compat_fix.compat_rules_hit(spec, model, result)) + f"Closest: {lines}",
        fix=("; or ".join(advice) if advice else
             "no single change to the SLOs, budget, precision, multi-node, pricing, families, regions or cloud "
             "makes it feasible; relax several at once"),
        hint=f"infragen plan WORKLOAD --explain {top.sizing.instance.id} says why each type failed",
    )



#: Instance types the plan's calibration sentence names (the plan JSON lists them all).
CALIBRATED_SHOWN = 8


def _layout_key(c: Candidate) -> tuple[str, str, int, int, int, bool]:
    lay = c.sizing.layout
    return (lay.engine, lay.precision, lay.tp, lay.pp, lay.replicas_per_node, lay.expert_parallel)


def _lost(c: Candidate, best: Candidate) -> str:
    """Why a feasible layout lost to the type's best one."""
    if c.usd_per_month is not None and best.usd_per_month is not None and c.usd_per_month > best.usd_per_month + 0.5:
        return f"feasible at ${c.usd_per_month:,.0f}/month"
    return "feasible at the same cost, ranked after it on latency or node count"


def explain_type(spec: WorkloadSpec, catalog: Catalog, result: SearchResult, instance_type: str,
                 calibration: Calibration | None = None) -> str:
    """One paragraph: why `instance_type` was (or was not) chosen, layout by layout (and whether the calibration
    profile changed its estimates)."""
    inst = catalog.instance(instance_type)  # UnknownNameError (exit 2, did you mean) for a typo
    mine = [c for c in result.candidates if c.sizing.instance.id == inst.id]
    if not mine:
        families = spec.instance_families
        if inst.cloud not in spec.clouds():
            why = f"it is an {inst.cloud} type and the workload's cloud is {spec.cloud}"
        elif families.deny and {inst.family, inst.family.removeprefix("ecs.")} & set(families.deny):
            why = f"instance_families.deny lists its family {inst.family}"
        elif families.allow and not {inst.family, inst.family.removeprefix("ecs.")} & set(families.allow):
            why = f"its family {inst.family} is not in instance_families.allow"
        else:
            why = (f"no region in scope ({', '.join(spec.regions) or 'any'}) lists a price for it; give one with "
                   "`prices:` or set allow_unpriced: true")
        return f"{inst.id} was not considered: {why}."
    feasible = result.feasible
    chosen = feasible[0] if feasible else None
    best = best_per_type(mine)[0]
    if chosen is not None and chosen.sizing.instance.id == inst.id:
        head = f"{inst.id} is the chosen plan: {describe(chosen)}"
        head += "" if chosen.usd_per_month is None else f" at ${chosen.usd_per_month:,.0f}/month"
    elif best.rejected is None:
        cost = "price unknown" if best.usd_per_month is None else f"${best.usd_per_month:,.0f}/month"
        than = "" if chosen is None or chosen.usd_per_month is None else (
            f" than {describe(chosen)} at ${chosen.usd_per_month:,.0f}/month")
        head = f"{inst.id} can serve the workload, best as {describe(best)} at {cost}, but it costs more{than}"
    else:
        head = (f"{inst.id} cannot serve the workload: its best candidate, {describe(best)}, fails because "
                f"{best.rejected}")
    layouts: dict[tuple[str, str, int, int, int], Candidate] = {}
    for cand in sorted(mine, key=_rank):
        layouts.setdefault(_layout_key(cand), cand)
    others = [c for c in layouts.values() if c is not best]
    parts = [head + "."]
    if others:
        parts.append(f"Its other layouts ({len(mine)} candidates over {len(layouts)} layouts and "
                     f"{len({c.region for c in mine})} region(s)): " + "; ".join(
                         f"{describe(c, region=False)}: {c.rejected or _lost(c, best)}" for c in others) + ".")
    if calibration is not None:
        parts.append(_calibration_for(calibration, mine) + ".")
    return " ".join(parts)


def _factors_text(cal: Calibration) -> str:
    p = cal.profile
    path = "" if p.serving_overhead_ms is None else f", serving path {p.serving_overhead_ms:.1f} ms"
    types = f", measured with {', '.join(p.weight_types)} weights" if p.weight_types else ""
    return (f"{p.engine} on {cal.measured_on}: generation x{p.decode_factor:.3f}, prompt x{p.prefill_factor:.3f}"
            f"{path}{types}; sha256 {cal.sha256[:12]}")


def _why_not(cal: Calibration, c: Candidate) -> str | None:
    layout = c.sizing.layout
    return cal.why_not(c.sizing.hardware, layout.engine, layout.tp, layout.pp)


def calibrated_types(cal: Calibration, result: SearchResult) -> tuple[list[str], list[str]]:
    """(instance types whose estimates the profile changed, the other types considered), each sorted."""
    applied = {c.sizing.instance.id for c in result.candidates if _why_not(cal, c) is None}
    others = {c.sizing.instance.id for c in result.candidates} - applied
    return sorted(applied), sorted(others)


def calibration_sentence(cal: Calibration, applied: list[str], others: list[str], chosen: Candidate) -> str:
    """The plan's line on the profile: what it changed, what it could not, whether the chosen plan is calibrated."""
    head = f"The calibration {cal.file} ({_factors_text(cal)})"
    if not applied:
        if cal.other_model is not None:
            return f"{head} applied to no candidate: {cal.other_model}."
        return (f"{head} applied to no candidate: every one of the {len(others)} instance types considered is "
                f"other hardware or another engine (a profile holds only where it was measured).")
    shown = ", ".join(applied[:CALIBRATED_SHOWN]) + (f" and {len(applied) - CALIBRATED_SHOWN} more"
                                                     if len(applied) > CALIBRATED_SHOWN else "")
    other = cal.other_type(chosen.sizing.layout.precision)
    chosen_too = ("the chosen plan is calibrated" + (f" ({other})" if other else "") if _why_not(cal, chosen) is None
                  else f"the chosen {chosen.sizing.instance.id} is not calibrated ({_why_not(cal, chosen)})")
    return (f"{head} changed the estimates of {len(applied)} instance type(s) ({shown}); the other "
            f"{len(others)} are other hardware or another engine and are estimated uncalibrated; {chosen_too}.")


def _calibration_for(cal: Calibration, mine: list[Candidate]) -> str:
    """Whether the profile changed this type's estimates, and if not why."""
    reasons = [_why_not(cal, c) for c in mine]
    if all(r is None for r in reasons):
        return f"Its estimates are calibrated with the calibration {cal.file} ({_factors_text(cal)})"
    if all(r is not None for r in reasons):
        return f"The calibration {cal.file} does not apply to it: {reasons[0]}"
    # a vLLM profile of one engine size: this type's layouts of that tp are calibrated, the others not
    tps = sorted({c.sizing.layout.tp for c, r in zip(mine, reasons, strict=True) if r is None})
    why = next(r for r in reasons if r is not None)
    return (f"Its estimates at tp={'/'.join(map(str, tps))} are calibrated with the calibration {cal.file} "
            f"({_factors_text(cal)}); the others are not ({why})")
