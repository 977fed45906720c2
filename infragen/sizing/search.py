"""The search: every (instance, engine, precision, layout) the spec allows, each kept or rejected with a reason.

Pure and deterministic: takes the catalog, the resolved model and an estimator; prints nothing, reads no files.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from infragen.architecture import ModelArchitecture
from infragen.catalog import Catalog
from infragen.catalog.compat import load_compat
from infragen.catalog.engines import expert_parallel_support
from infragen.catalog.load_balancers import load_balancer_facts
from infragen.catalog.records import InstanceType
from infragen.errors import InfragenError, InputError
from infragen.sizing import open_loop, queueing, resources
from infragen.sizing import spot as spot_floor
from infragen.sizing.calibration import Calibration
from infragen.sizing.compat_gate import layout_rejection
from infragen.sizing.context import search_model_len
from infragen.sizing.estimate import estimate as default_estimator
from infragen.sizing.hardware import hardware_from_instance
from infragen.sizing.memo import EstimateMemo, OpenLoopMemo
from infragen.sizing.types import Estimate, Hardware
from infragen.sizing.uncertainty import latency_factor
from infragen.spec import LLAMA_CPP_PRECISIONS, VLLM_PRECISIONS, WorkloadSpec
from infragen.units import HOURS_PER_MONTH

Estimator = Callable[..., Estimate]
DEFAULT_REGION = {"aws": "us-east-1", "alicloud": "cn-hangzhou"}
#: Batch sizes probed for the best SLO-meeting batch (plus the engine's maximum).
BATCH_LEVELS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
MAX_NODES_PER_REPLICA = 4
#: vLLM's --gpu-memory-utilization the plans use (the share of each GPU's memory vLLM may take).
GPU_MEMORY_UTILIZATION = 0.9


@dataclass(frozen=True)
class Layout:
    engine: str
    precision: str
    tp: int
    pp: int
    nodes_per_replica: int
    replicas_per_node: int
    expert_parallel: bool = False
    """vLLM --enable-expert-parallel: the tp group's GPUs hold whole routed experts (MoE models, tp > 1)."""


@dataclass(frozen=True)
class Sizing:
    """How one instance type performs for the workload with one layout (region independent)."""

    instance: InstanceType
    hardware: Hardware
    layout: Layout
    estimate: Estimate | None
    batch: int
    replicas: int
    rejected: str | None
    best_ttft_ms: float | None = None
    best_tpot_ms: float | None = None
    miss: float = math.inf
    """How far the binding constraint is missed (needed / allowed, > 1); inf when there is no measure."""
    first: Estimate | None = None
    """The estimate at batch 1 (the lowest latency reachable), when the layout fits."""
    least_ms: tuple[float, float, float] | None = None
    """Open loop on vLLM: (TTFT p99, TPOT, E2E p99) at a trickle of requests with the confidence factor applied,
    the least each SLO could be for this layout; None: the batch-1 estimate times the factor stands in."""


@dataclass(frozen=True)
class Candidate:
    """A sizing priced in one region."""

    cloud: str
    region: str
    sizing: Sizing
    nodes: int
    usd_per_hour: float | None
    on_demand_usd_per_hour: float | None
    spot_usd_per_hour: float | None
    price_source: str
    rejected: str | None
    miss: float = math.inf
    """How far the binding constraint is missed (1.0 = met, or only a price is missing)."""

    @property
    def usd_per_month(self) -> float | None:
        return None if self.usd_per_hour is None else self.usd_per_hour * HOURS_PER_MONTH

    def sort_key(self) -> tuple[int, float, float, float, int, str, str]:
        """Cheapest first, then lower TTFT, TPOT, fewer nodes; unpriced after every priced one (by fewest GPUs).
        Computed once per candidate: the ranking and the explanations sort the same candidates several times."""
        key: tuple[int, float, float, float, int, str, str] | None = self.__dict__.get("_sort_key")
        if key is None:
            est = self.sizing.estimate
            gpus = self.nodes * max(self.sizing.hardware.gpu_count, 1)
            cost = self.usd_per_month if self.usd_per_month is not None else float(gpus)
            key = (0 if self.usd_per_hour is not None else 1, round(cost, 6),
                   est.ttft_ms if est else math.inf, est.tpot_ms if est else math.inf, self.nodes,
                   self.sizing.instance.id, self.region)
            object.__setattr__(self, "_sort_key", key)  # a cache beside the frozen fields, not one of them
        return key


@dataclass
class SearchResult:
    candidates: list[Candidate] = field(default_factory=list)
    _feasible: tuple[int, list[Candidate]] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def feasible(self) -> list[Candidate]:
        """The candidates meeting every constraint, cheapest first (sorted once per list of candidates: the plan,
        the explanations and the report ask several times; a copy, so a caller's edit cannot reach the cache)."""
        if self._feasible is None or self._feasible[0] != len(self.candidates):
            ranked = sorted((c for c in self.candidates if c.rejected is None), key=Candidate.sort_key)
            self._feasible = (len(self.candidates), ranked)
        return list(self._feasible[1])


def _layouts(spec: WorkloadSpec, model: ModelArchitecture, inst: InstanceType) -> Iterator[tuple[Layout | None, str]]:
    """Layouts this type can run, or (None, reason) for what it cannot."""
    for precision in spec.precision:
        for engine in spec.engines():
            if engine == "llama.cpp":
                if inst.gpu_count:
                    if spec.engine == "llama.cpp":
                        yield None, (f"{precision}/llama.cpp: GPU instances are served with vLLM "
                                     "(llama.cpp GPU offload is not modelled)")
                    continue
                if precision not in LLAMA_CPP_PRECISIONS:
                    if spec.engine == "llama.cpp":
                        yield None, f"llama.cpp cannot load {precision}"
                    continue
                if not (spec.weights or "").endswith(".gguf"):
                    yield None, f"{precision}/llama.cpp: llama-server needs a GGUF file in weights (org/repo/file.gguf)"
                    continue
                yield Layout("llama.cpp", precision, 1, 1, 1, 1), ""
                continue
            if not inst.gpu_count:
                if spec.engine == "vllm":
                    yield None, "no GPU: vLLM needs GPUs"
                continue
            if precision not in VLLM_PRECISIONS:
                continue
            g = inst.gpu_count
            for tp in (1, 2, 4, 8):
                if tp > g or g % tp:  # what the model allows is compat.yaml's (tp_rules), with a reason
                    continue
                # How many engines the load balancer reaches on one node is a fact of the cloud's
                # (load_balancers.yaml: one target group / server group of instance+port pairs, no limit today).
                cap = load_balancer_facts(inst.cloud).max_engines_per_node
                per_node = g // tp if cap is None else min(g // tp, cap)
                yield Layout("vllm", precision, tp, 1, 1, per_node), ""
                if tp > 1 and model.num_experts and expert_parallel_support("vllm") is not None:
                    yield Layout("vllm", precision, tp, 1, 1, per_node, expert_parallel=True), ""
            if spec.allow_multi_node and g >= 2:
                if inst.rdma == "none":
                    yield None, f"{precision} multi-node: {inst.id} has no RDMA (EFA/eRDMA)"
                    continue
                for n in range(2, MAX_NODES_PER_REPLICA + 1):
                    if n <= model.num_layers:
                        yield Layout("vllm", precision, g, n, n, 1), ""


def _meets(spec: WorkloadSpec, est: Estimate) -> str | None:
    """None when the estimate meets every SLO (values x the regime's slo_confidence factor), else why not."""
    k = latency_factor(est.regime, spec.slo_confidence)
    slo = spec.slo
    checks = (("TTFT", slo.ttft_p99_ms, est.ttft_ms), ("TPOT", slo.tpot_ms, est.tpot_ms),
              ("E2E", slo.e2e_p99_ms, est.e2e_ms))
    for name, target, value in checks:
        if target is not None and value * k > target:
            return (f"{name} {value:.1f} ms (x{k:.2f} for {spec.slo_confidence} confidence = {value * k:.1f} ms) "
                    f"exceeds the {target:g} ms SLO")
    return None


def _slo_miss(spec: WorkloadSpec, est: Estimate) -> float:
    """Largest ratio of a confidence-inflated latency to its SLO (<= 1 when every SLO is met)."""
    k = latency_factor(est.regime, spec.slo_confidence)
    slo = spec.slo
    pairs = ((slo.ttft_p99_ms, est.ttft_ms), (slo.tpot_ms, est.tpot_ms), (slo.e2e_p99_ms, est.e2e_ms))
    return max((value * k / target for target, value in pairs if target is not None), default=0.0)


def _memory_miss(hw: Hardware, layout: Layout, est: Estimate, mml: int) -> float:
    """Memory one sequence of max_model_len needs per GPU (weights, overheads, its KV) over what is usable."""
    if hw.gpu_count:
        usable = GPU_MEMORY_UTILIZATION * hw.memory_per_gpu_gib
        kv = est.kv_cache_bytes_per_token * mml / (layout.tp * layout.pp) / 2**30
    else:
        usable, kv = hw.memory_gib or 0.0, est.kv_cache_bytes_per_token * mml / 2**30
    need = est.weights_gib_per_gpu + est.overhead_gib_per_gpu + kv
    return max(need / usable, 1.0 + 1e-9) if usable > 0 else math.inf


def size_instance(spec: WorkloadSpec, model: ModelArchitecture, inst: InstanceType, hw: Hardware, layout: Layout,
                  estimator: Estimator, open_loop_memo: OpenLoopMemo | None = None,
                  calibrated: dict[str, float] | None = None) -> Sizing:
    """The best SLO-meeting batch of one layout on one type, and the replicas the peak needs (`open_loop_memo`:
    the search's table of open-loop sizings, shared by the sizes of a family as the estimates are; `calibrated`: a
    calibration profile's estimate() arguments (Calibration.estimate_kwargs) when it holds for this hardware and
    engine)."""
    t = spec.traffic
    mml = search_model_len(spec, model, layout.engine)  # the plan raises vLLM's to what memory holds (context.py)

    # Passed only when credited, so an estimator without the option (a test's) keeps working at 0.
    cache = {"prefix_cache_hit_rate": t.prefix_cache_hit_rate} if t.prefix_cache_hit_rate else {}
    calibrated = calibrated or {}
    ep = {"expert_parallel": True} if layout.expert_parallel else {}

    def run(conc: int | None) -> Estimate:
        return estimator(model, hw, precision=layout.precision, kv_cache_dtype=spec.kv_cache_dtype,
                         engine=layout.engine, tp=layout.tp, pp=layout.pp, nodes=layout.nodes_per_replica,
                         input_len=t.prompt_tokens, output_len=t.output_tokens, concurrency=conc,
                         max_model_len=mml, **cache, **calibrated, **ep)

    def reject(reason: str, **kw: object) -> Sizing:
        return Sizing(inst, hw, layout, None, 0, 0, reason, **kw)  # type: ignore[arg-type]

    if layout.expert_parallel:
        why = _expert_parallel_problem(spec, model, hw, layout)
        if why:
            return reject(why)
    rejection = layout_rejection(spec, model, hw, engine=layout.engine, precision=layout.precision, tp=layout.tp,
                                 expert_parallel=layout.expert_parallel)
    if rejection:  # compat.yaml, with the rule named (sizing/compat_gate.py)
        return reject(rejection.reason)
    try:
        top = run(None)
    except InfragenError as exc:  # missing figures, impossible layouts: a reason, not a crash
        return reject(exc.message)
    if not top.fits or top.max_concurrency < 1:
        return reject(top.reason or "does not fit", miss=_memory_miss(hw, layout, top, mml))
    if t.peak_requests_per_s is not None:
        # llama.cpp on a CPU host: no GPU-only view to share, each node is sized on its own
        return _size_open_loop(spec, model, inst, hw, layout, mml, top, run(1),
                               open_loop_memo if layout.engine == "vllm" else None, calibrated)
    levels = sorted({b for b in BATCH_LEVELS if b < top.max_concurrency} | {top.max_concurrency})
    first, best = largest_meeting_batch(levels, run, lambda est: _meets(spec, est) is None)
    if best is None:
        return reject(f"at batch 1: {_meets(spec, first)}", best_ttft_ms=first.ttft_ms, best_tpot_ms=first.tpot_ms,
                      miss=_slo_miss(spec, first), first=first)
    batch = best.concurrency
    assert t.concurrent_users is not None  # a peak rate took the open loop above (spec: one of the two)
    replicas = queueing.replicas_for_users(t.concurrent_users, batch, spec.min_replicas,
                                           e2e_s=best.e2e_ms / 1000.0, think_time_s=t.think_time_s)
    runs: dict[int, Estimate] = {batch: best}

    def e2e_s_at(b: int) -> float:
        if b not in runs:
            runs[b] = run(b)
        return runs[b].e2e_ms / 1000.0

    in_flight = queueing.closed_loop_batch(t.concurrent_users / replicas, t.think_time_s, batch, e2e_s_at)
    e2e_s_at(in_flight)
    at_peak = runs[in_flight]
    return Sizing(inst, hw, layout, _with_capacity(at_peak, best, spec), batch, replicas, None,
                  best_ttft_ms=first.ttft_ms, best_tpot_ms=first.tpot_ms, miss=1.0, first=first)


def _expert_parallel_problem(spec: WorkloadSpec, model: ModelArchitecture, hw: Hardware, layout: Layout) -> str | None:
    """Why a layout's expert-parallel twin is not planned (None: it is). engines.yaml expert_parallel: only where
    plain tp of the layout is refused by a compat rule that EP lifts (the measured EP / tp pairs say EP is no
    faster where both run); the --rate load model does not take EP yet."""
    support = expert_parallel_support(layout.engine)
    assert support is not None  # _layouts yields EP twins only for engines that have it
    if support.only_where_tp_refused:
        plain = layout_rejection(spec, model, hw, engine=layout.engine, precision=layout.precision, tp=layout.tp)
        lifted = {r.id for r in load_compat().tp_rules if r.lifted_by_expert_parallel}
        if plain is None:
            return (f"expert parallel: plain tp {layout.tp} serves this layout, and EP is planned only where tp "
                    f"cannot shard the experts ({support.evidence})")
        if plain.rule not in lifted:
            return f"expert parallel: {plain.reason}"
    if spec.traffic.peak_requests_per_s is not None:
        return "expert parallel: the load model of traffic.peak_requests_per_s does not take it yet"
    return None


def largest_meeting_batch(levels: list[int], run: Callable[[int], Estimate],
                          meets: Callable[[Estimate], bool]) -> tuple[Estimate, Estimate | None]:
    """(the estimate at the smallest batch, the one at the largest batch meeting the SLOs, or None if none does).

    Latency grows and throughput does not fall with the batch (performance.py's step model), so the batches that
    meet the SLOs are a prefix of `levels` and the last of them serves the most requests: a bisection finds it
    with about log2(len(levels)) estimates instead of one per level (benchmarks/plan_speed.py).
    """
    seen: dict[int, Estimate] = {}

    def at(i: int) -> Estimate:
        if i not in seen:
            seen[i] = run(levels[i])
        return seen[i]

    if not meets(at(0)):
        return seen[0], None
    lo, hi = 0, len(levels) - 1  # levels[lo] meets; the answer is in lo..hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if meets(at(mid)):
            lo = mid
        else:
            hi = mid - 1
    return seen[0], seen[lo]


def _with_capacity(at_peak: Estimate, best: Estimate, spec: WorkloadSpec) -> Estimate:
    """The estimate at peak load, carrying the capacity (requests/s) of the best batch and the confidence factor."""
    return replace(at_peak, requests_per_s=best.requests_per_s, max_concurrency=best.max_concurrency,
                   latency_factor=latency_factor(best.regime, spec.slo_confidence))


def _size_open_loop(spec: WorkloadSpec, model: ModelArchitecture, inst: InstanceType, hw: Hardware, layout: Layout,
                    mml: int, top: Estimate, first: Estimate, memo: OpenLoopMemo | None = None,
                    calibrated: dict[str, float] | None = None) -> Sizing:
    """Under traffic.peak_requests_per_s (vLLM, llama.cpp): the load model's fewest replicas (sizing/open_loop.py)."""
    kw: dict[str, object] = {"precision": layout.precision, "tp": layout.tp, "pp": layout.pp,
                             "nodes": layout.nodes_per_replica, "max_model_len": mml, "regime": top.regime,
                             **(calibrated or {})}
    if layout.engine != "vllm":
        kw["engine"] = layout.engine  # the memo's keys stay vLLM's questions as before (llama.cpp passes none)
    # The load model starts from `top` (the same question estimate() answers) where the memo knows it may.
    ol = memo(spec, model, hw, base=top, **kw) if memo is not None else open_loop.size_open_loop(spec, model, hw, **kw)
    if ol.rejected is not None or ol.estimate is None:
        return Sizing(inst, hw, layout, None, 0, 0, ol.rejected or "does not fit", best_ttft_ms=first.ttft_ms,
                      best_tpot_ms=first.tpot_ms, miss=ol.miss, first=first, least_ms=ol.trickle_ms)
    return Sizing(inst, hw, layout, ol.estimate, ol.slots, ol.replicas, None, best_ttft_ms=first.ttft_ms,
                  best_tpot_ms=first.tpot_ms, miss=1.0, first=first)


def _check_node(spec: WorkloadSpec, s: Sizing) -> tuple[str, float] | None:
    """Why the node's RAM or vCPUs cannot host the layout, and by how much (need / have)."""
    inst, lay, est = s.instance, s.layout, s.estimate
    assert est is not None
    if inst.memory_gib is None or inst.vcpus is None:
        return f"{inst.id}: the catalog has no vCPU/RAM figures for it", math.inf
    if lay.engine == "vllm":
        loaded = est.weights_gib_per_gpu * lay.tp * lay.replicas_per_node
        need_cpus = resources.required_vcpus(lay.tp * lay.replicas_per_node, lay.replicas_per_node)
    else:
        loaded = llama_cpp_loaded_gib(spec, est, s.batch)
        need_cpus = 2
    need_ram = resources.required_ram_gib(loaded)
    if inst.memory_gib < need_ram:
        return f"RAM {inst.memory_gib:g} GiB < 1.5 x {loaded:.1f} GiB the node loads", need_ram / inst.memory_gib
    if inst.vcpus < need_cpus:
        return f"{inst.vcpus} vCPUs < {need_cpus} the engine needs", need_cpus / inst.vcpus
    return None


def _packed(spec: WorkloadSpec, sizing: Sizing) -> Sizing:
    """The most engines per node (up to the layout's) whose RAM and vCPUs the node has: more engines per node
    never need more nodes and change no latency, so fewer are considered only when the node cannot host more."""
    if sizing.rejected is not None:
        return sizing
    problem = _check_node(spec, sizing)
    engines = sizing.layout.replicas_per_node
    while problem is not None and engines > 1:
        engines -= 1
        fewer = replace(sizing, layout=replace(sizing.layout, replicas_per_node=engines))
        if _check_node(spec, fewer) is None:
            return fewer
    return sizing if problem is None else replace(sizing, rejected=problem[0], miss=problem[1])


def llama_cpp_loaded_gib(spec: WorkloadSpec, est: Estimate, slots: int) -> float:
    """Weights plus the f16 KV cache of `slots` slots of the context length (llama.cpp allocates it at start)."""
    return est.weights_gib_per_gpu + slots * est.kv_cache_bytes_per_token * _context(spec) / 2**30


def _context(spec: WorkloadSpec) -> int:
    t = spec.traffic
    return t.max_context_tokens or 4 * (t.prompt_tokens + t.output_tokens)


def _regions(spec: WorkloadSpec, catalog: Catalog, cloud: str, inst: InstanceType) -> list[str]:
    if spec.regions:  # asks the pinned regions only: the packaged catalog reads no other region's prices
        return [r for r in spec.regions if inst.price_in(r) is not None] or (
            [spec.regions[0]] if spec.allow_unpriced and not inst.priced_regions else [])
    priced = inst.priced_regions
    if priced:
        return sorted(priced)
    return [DEFAULT_REGION[cloud]] if spec.allow_unpriced else []


def _price(spec: WorkloadSpec, cloud: str, region: str, s: Sizing) -> Candidate:
    nodes = math.ceil(s.replicas * s.layout.nodes_per_replica / s.layout.replicas_per_node)
    price = s.instance.price_in(region)
    od = price.on_demand_usd_per_hour if price else None
    spot = price.spot_usd_per_hour if price else None
    source = f"{price.source} (as of {price.as_of})" if price else "no price in the catalog"
    rejected, miss = s.rejected, s.miss
    hourly = od if spec.pricing == "on-demand" else spot
    if rejected is None and hourly is None and not (spec.allow_unpriced and od is None and spot is None):
        rejected, miss = f"no {spec.pricing} price for {s.instance.id} in {region}", math.inf
    total = None if hourly is None else hourly * nodes
    held = spot_floor.base_nodes(spec, s, nodes)
    if held and total is not None:
        # A spot plan keeps its on-demand base on demand: candidates compete on that mix (sizing/spot.py).
        if od is None:
            total = None
            if rejected is None and not spec.allow_unpriced:
                rejected, miss = (f"no on-demand price for {s.instance.id} in {region} for the spot plan's on-demand "
                                  f"base ({held} node(s))"), math.inf
        else:
            total = held * od + (nodes - held) * hourly
    over = spec.budget_usd_per_month is not None and total is not None and (
        total * HOURS_PER_MONTH > spec.budget_usd_per_month)
    if rejected is None and over and total is not None and spec.budget_usd_per_month is not None:
        rejected = f"${total * HOURS_PER_MONTH:,.0f}/month exceeds the budget of ${spec.budget_usd_per_month:,.0f}"
        miss = total * HOURS_PER_MONTH / spec.budget_usd_per_month
    if rejected is None:
        limit = _limit_problem(spec, nodes, total)
        if limit is not None:
            rejected, miss = limit
    return Candidate(cloud, region, s, nodes, total, None if od is None else od * nodes,
                     None if spot is None else spot * nodes, source, rejected, miss)


#: Prefix of every rejection by `limits` (the infeasible message groups them).
LIMIT_PREFIX = "above the sanity limit"


def _limit_problem(spec: WorkloadSpec, nodes: int, usd_per_hour: float | None) -> tuple[str, float] | None:
    """Why a plan this large is refused (`limits`) and by how much, or None."""
    lim = spec.limits
    if nodes > lim.max_nodes:
        return f"{LIMIT_PREFIX}: {nodes:,} nodes > limits.max_nodes {lim.max_nodes:,}", nodes / lim.max_nodes
    if usd_per_hour is not None and usd_per_hour * HOURS_PER_MONTH > lim.max_usd_per_month:
        month = usd_per_hour * HOURS_PER_MONTH
        return (f"{LIMIT_PREFIX}: ${month:,.0f}/month > limits.max_usd_per_month ${lim.max_usd_per_month:,.0f}",
                month / lim.max_usd_per_month)
    return None


def search(spec: WorkloadSpec, model: ModelArchitecture, catalog: Catalog,
           estimator: Estimator = default_estimator, calibration: Calibration | None = None) -> SearchResult:
    """Evaluate every candidate in scope; nothing is dropped without a reason. `calibration`: a profile whose
    factors apply to the candidates on the hardware and engine it was measured on, when `model` has the shapes it
    was measured with (Calibration.for_model, Calibration.why_not)."""
    if calibration is not None:
        calibration = calibration.for_model(model)
    allow, deny = set(spec.instance_families.allow), set(spec.instance_families.deny)
    result = SearchResult()
    # Sizes and regions sharing their GPUs share estimates and open-loop sizings (sizing/memo.py); a load model
    # starts from the search's largest-batch estimate when that is estimate()'s own.
    open_loop_memo = OpenLoopMemo(share_base=estimator is default_estimator)
    estimator = EstimateMemo(estimator)
    for cloud in spec.clouds():
        for inst in catalog.instances_for(cloud):
            fam = inst.family
            fam_names = {fam, fam.removeprefix("ecs."), f"ecs.{fam}"}
            if (allow and not fam_names & allow) or fam_names & deny:
                continue  # the user's filter, reported in the explanation
            regions = _regions(spec, catalog, cloud, inst)
            if not regions:
                continue  # not offered in the regions in scope
            hw = hardware_from_instance(inst, catalog)
            for layout, why in _layouts(spec, model, inst):
                if layout is None:
                    engine = "vllm" if inst.gpu_count else "llama.cpp"  # the engine the reason is about
                    sizing = Sizing(inst, hw, Layout(engine, spec.precision[0], 1, 1, 1, 1), None, 0, 0, why)
                else:
                    calibrated = (calibration.estimate_kwargs() if calibration is not None
                                  and calibration.why_not(hw, layout.engine, layout.tp, layout.pp) is None else None)
                    sizing = _packed(spec, size_instance(spec, model, inst, hw, layout, estimator, open_loop_memo,
                                                         calibrated))
                for region in regions:
                    result.candidates.append(_price(spec, cloud, region, sizing))
    if not result.candidates:
        raise InputError("no instance type is in scope: check cloud, regions and instance_families "
                         f"(clouds {list(spec.clouds())}, regions {spec.regions or 'any'})")
    return result
