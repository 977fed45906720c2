"""Sizing: the memory/performance model and the search that turns a workload into one Plan.

Pure and offline: no Pulumi, jinja2, click, clock or network. `plan_file` is the entry point the CLI,
the Pulumi program and CI use; `plan_workload` takes everything as arguments (tests pass tiny catalogs).
"""

from __future__ import annotations

from pathlib import Path

from infragen import __version__
from infragen.architecture import ModelArchitecture
from infragen.catalog import Catalog, load_catalog
from infragen.catalog.engines import pinned_release, pinned_version
from infragen.catalog.load_balancers import load_balancer_facts
from infragen.catalog.services import load_service_prices
from infragen.plan import (
    CalibrationPlan,
    CostPlan,
    DeploymentPlan,
    EnginePlan,
    EstimatePlan,
    HardwarePlan,
    MemoryPlan,
    ModelPlan,
    NetworkPlan,
    Plan,
    ScalingPlan,
    SecretsPlan,
    SpotPlan,
    StoragePlan,
)
from infragen.sizing import bill, bootstrap, compat_gate, daily, engine_args, explain, queueing, resources, spot
from infragen.sizing.calibration import Calibration, load_calibration
from infragen.sizing.constants import load_constants
from infragen.sizing.context import select_model_len
from infragen.sizing.estimate import (
    PREFIX_CACHE_NOTE,
    cached_prompt_tokens,
    estimate,
    estimate_memory,
    hardware_from_gpu,
    hardware_from_instance,
    load_hardware_file,
)
from infragen.sizing.scope import OVERRIDE_SOURCE, apply_price_overrides, check_scope, load_price_file
from infragen.sizing.search import (
    GPU_MEMORY_UTILIZATION,
    Candidate,
    Estimator,
    SearchResult,
    llama_cpp_loaded_gib,
    search,
)
from infragen.sizing.types import Estimate, Hardware, MemoryEstimate
from infragen.spec import GGUF_PRECISIONS, WorkloadSpec, load_spec
from infragen.units import HOURS_PER_MONTH

__all__ = [
    "Estimate", "Hardware", "MemoryEstimate", "SearchResult", "estimate", "estimate_memory", "explain_file",
    "hardware_from_gpu", "hardware_from_instance", "load_hardware_file", "plan_file", "plan_workload", "search",
]



def plan_file(path: Path | str, *, catalog: Catalog | None = None, prices: Path | None = None,
              calibration: Path | None = None) -> Plan:
    """Load a workload file, resolve its model relative to the file, and plan it.

    `prices`: a `--prices` file whose entries are added to the workload's own `prices:` (exit 2 when one
    names an unknown type or region). Regions and family filters are checked first (exit 2 with the reason).
    `calibration`: a `--calibration` profile, in place of the workload's `calibration:` (exit 2 when unreadable).
    """
    spec, model, catalog, name, cal = _prepare(path, catalog, prices, calibration)
    return plan_workload(spec, catalog=catalog, model=model, workload_name=name, calibration=cal)


def _calibration(path: Path, spec: WorkloadSpec, option: Path | None) -> Calibration | None:
    """The profile of `--calibration` (as given) or of the workload's field (relative to the workload)."""
    if option is not None:
        return load_calibration(option, where="--calibration")
    if spec.calibration is None:
        return None
    return load_calibration(path.parent / spec.calibration, shown=spec.calibration, where=f"{path}: calibration")


def _prepare(path: Path | str, catalog: Catalog | None, prices: Path | None, calibration: Path | None = None,
             ) -> tuple[WorkloadSpec, ModelArchitecture, Catalog, str, Calibration | None]:
    """The workload, its model, the catalog with every price override applied, the workload's name and the
    calibration profile (None without one)."""
    from infragen.catalog.models import resolve_model

    path = Path(path)
    spec = load_spec(path)
    model = resolve_model(spec.model, base_dir=path.parent, where=f"{path}: model")
    spec.check_model(model, path=path)
    catalog = catalog or load_catalog()
    catalog = apply_price_overrides(catalog, spec.prices, where=str(path))
    if prices is not None:
        extra = load_price_file(prices)
        catalog = apply_price_overrides(catalog, extra, where=str(prices))
        spec = spec.model_copy(update={"prices": [*spec.prices, *extra]})
    check_scope(spec, catalog, where=str(path))
    cal = _calibration(path, spec, calibration)
    return spec, model, catalog, spec.resolved_name(path), None if cal is None else cal.for_model(model)


def explain_file(path: Path | str, instance_type: str, *, catalog: Catalog | None = None,
                 prices: Path | None = None, calibration: Path | None = None) -> str:
    """`infragen plan WORKLOAD --explain TYPE`: one paragraph on why TYPE was or was not chosen (also when the
    workload is infeasible)."""
    spec, model, catalog, _, cal = _prepare(path, catalog, prices, calibration)
    return explain.explain_type(spec, catalog, search(spec, model, catalog, calibration=cal), instance_type, cal)


def plan_workload(spec: WorkloadSpec, *, catalog: Catalog, model: ModelArchitecture, workload_name: str,
                  estimator: Estimator = estimate, calibration: Calibration | None = None) -> Plan:
    """The cheapest candidate meeting every constraint, as a Plan (InfeasibleError when there is none).
    `calibration`: a profile applied to the candidates on its hardware and engine (when it was measured with a
    model of this one's shapes), recorded in the plan."""
    if calibration is not None:
        calibration = calibration.for_model(model)
    result = search(spec, model, catalog, estimator, calibration)
    feasible = result.feasible
    if not feasible:
        raise explain.infeasible(spec, model, catalog, estimator, result, calibration)
    chosen = feasible[0]
    floor = spot.select_spot(spec, chosen, catalog)
    plan = _build_plan(spec, model, workload_name, chosen, result, floor)
    if calibration is not None:
        plan = _with_calibration(plan, calibration, result, chosen)
    return plan.model_copy(update={"bill": bill.select_bill(plan, spec.traffic, load_service_prices())})


def _with_calibration(plan: Plan, cal: Calibration, result: SearchResult, chosen: Candidate) -> Plan:
    """The plan with the profile recorded (digest, factors, the instance types it changed) and said."""
    applied, other = explain.calibrated_types(cal, result)
    p = cal.profile
    record = CalibrationPlan(file=cal.file, sha256=cal.sha256, engine=p.engine, hardware=cal.measured_on,
                             decode_factor=p.decode_factor, prefill_factor=p.prefill_factor,
                             serving_overhead_ms=p.serving_overhead_ms, applied_to=applied, not_applied=len(other))
    sentence = explain.calibration_sentence(cal, applied, other, chosen)
    return plan.model_copy(update={"calibration": record, "explanation": [*plan.explanation, sentence]})


def _weights(spec: WorkloadSpec, model: ModelArchitecture, precision: str) -> tuple[str, str, str | None, list[str]]:
    """(source, uri, file, warnings) for the checkpoint."""
    warnings: list[str] = []
    uri = spec.weights or model.hf_repo or model.id
    if spec.weights is None and precision not in {"bf16", "fp16", "fp8"}:
        warnings.append(f"precision {precision} needs a pre-quantized checkpoint: set `weights` "
                        f"(the reference repo {model.hf_repo} holds unquantized weights)")
    if (spec.weights is not None and precision == "fp8" and not compat_gate.serves_reference(spec, model)
            and compat_gate.checkpoint_kind(spec, model, precision) == "quantized"):
        warnings.append(f"weights {spec.weights} is served as an FP8 checkpoint (precision lists fp8 and no 16-bit "
                        "format): vLLM takes the method from its quantization_config; to quantize a 16-bit "
                        "checkpoint at load instead, list bf16 in precision as well")
    source = "s3" if uri.startswith("s3://") else "oss" if uri.startswith("oss://") else "huggingface"
    if uri.startswith("modelscope://"):  # a ModelScope repo id: same `org/name[/file.gguf]` form as Hugging Face
        source, uri = "modelscope", uri.removeprefix("modelscope://")
    file = None
    if source in {"huggingface", "modelscope"} and uri.endswith(".gguf"):
        repo, _, file = uri.rpartition("/")
        uri = repo
    elif precision in GGUF_PRECISIONS and uri.endswith(".gguf"):
        file = uri.rpartition("/")[2]
    return source, uri, file, warnings


def _targets_warning(cloud: str, replicas: int) -> str | None:
    """Every serving engine is one load-balancer target (instance + port); above the cloud's default quota the
    deploy fails until the quota is raised (load_balancers.yaml)."""
    facts = load_balancer_facts(cloud)
    quota = facts.max_targets_per_load_balancer
    if quota is None or replicas <= quota:
        return None
    raise_it = "request an increase before deploying" if facts.targets_adjustable else "it cannot be raised"
    return (f"{replicas:,} engines are {replicas:,} load-balancer targets, above the default quota of {quota:,} "
            f"per load balancer: {raise_it} ({facts.targets_source.split(';')[0]})")


def _build_plan(spec: WorkloadSpec, model: ModelArchitecture, name: str, c: Candidate, result: SearchResult,
                floor: SpotPlan | None = None) -> Plan:
    s, est, lay, inst = c.sizing, c.sizing.estimate, c.sizing.layout, c.sizing.instance
    assert est is not None
    t = spec.traffic
    source, uri, file, warnings = _weights(spec, model, lay.precision)
    weights_total_gib = est.weights_gib_per_gpu * (lay.tp * lay.pp if lay.engine == "vllm" else 1)

    def capacity_at(length: int) -> int | None:
        mem = estimate_memory(model, s.hardware, precision=lay.precision, kv_cache_dtype=spec.kv_cache_dtype,
                              engine=lay.engine, tp=lay.tp, pp=lay.pp, nodes=lay.nodes_per_replica,
                              max_model_len=length, gpu_memory_utilization=GPU_MEMORY_UTILIZATION)
        return mem.kv_cache_capacity_tokens if mem.fits else None

    context = select_model_len(spec, model, engine=lay.engine, capacity_tokens=est.kv_cache_capacity_tokens,
                               batch=s.batch, capacity_at=capacity_at)
    mml = context.max_model_len
    served = model.id if model.id != "custom" else name
    if lay.engine == "vllm":
        argv = engine_args.vllm_argv(
            weights=uri if source == "huggingface" else engine_args.MODEL_DIR + "/" + model.id,
            served_name=served, port=spec.port, tp=lay.tp, pp=lay.pp, max_model_len=mml, max_num_seqs=s.batch,
            gpu_memory_utilization=GPU_MEMORY_UTILIZATION, precision=lay.precision,
            checkpoint=compat_gate.checkpoint_kind(spec, model, lay.precision), kv_cache_dtype=spec.kv_cache_dtype,
            multi_node=lay.nodes_per_replica > 1, model=model, prefix_caching=t.prefix_cache_hit_rate > 0,
            expert_parallel=lay.expert_parallel)
        threads = None
        visible = [list(range(i * lay.tp, (i + 1) * lay.tp)) for i in range(lay.replicas_per_node)]
    else:
        threads = inst.physical_cores or max(1, (inst.vcpus or 2) // (inst.threads_per_core or 2))
        argv = engine_args.llama_cpp_argv(weights_file=file or f"{model.id}.gguf", served_name=served,
                                          port=spec.port, ctx_per_slot=mml, slots=s.batch, threads=threads)
        visible = []
    env: dict[str, str] = {}
    if lay.nodes_per_replica > 1:
        # EFA: NCCL_NET makes a missing aws-ofi-nccl fatal instead of a silent TCP fallback, and INIT/NET info
        # logs carry the NET/OFI line readiness checks (docs/aws.md). No NCCL_PROTO=simple: only aws-ofi-nccl
        # <= 1.5 needed it (aws-ofi-nccl doc/efa-env-var.md) and it slows NVLink all-reduce.
        env = ({"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_NET": "AWS Libfabric",
                "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
               if inst.rdma == "efa" else bootstrap.erdma_nccl_env())
    engine_version = pinned_version(lay.engine)
    boot, boot_warnings = bootstrap.select_bootstrap(
        cloud=c.cloud, engine=lay.engine, engine_version=engine_version, gpu_count=inst.gpu_count,
        erdma=lay.nodes_per_replica > 1 and inst.rdma == "erdma", nodes=c.nodes, weights_source=source,
        hf_endpoint=spec.hf_endpoint, family=inst.family)
    warnings.extend(boot_warnings)
    download_mbit_s = boot.download_mbit_s if boot else None
    storage = resources.select_storage(c.cloud, weights_total_gib, inst.local_nvme_count, inst.local_nvme_gib)
    loaded = (est.weights_gib_per_gpu * lay.tp * lay.replicas_per_node if lay.engine == "vllm"
              else llama_cpp_loaded_gib(spec, est, s.batch))
    total_out_tps = est.output_tokens_per_s * s.replicas
    pipe_gbps = (resources.pipeline_gbps(model.hidden_size, est.output_tokens_per_s + est.requests_per_s
                                         * t.prompt_tokens) if lay.nodes_per_replica > 1 else 0.0)
    client_gbps = total_out_tps * 64 * 8 / 1e9 + (t.peak_requests_per_s or 1) * t.prompt_tokens * 32 * 8 / 1e9
    slow = bootstrap.download_warning(weights_total_gib, download_mbit_s, c.nodes)
    if slow:
        warnings.append(slow)
    if c.usd_per_hour is None:
        warnings.append(f"{inst.id} has no price in {c.cloud}/{c.region}: cost unknown (allow_unpriced); give one "
                        "with `prices:` in the workload or `infragen plan --prices FILE`")
    elif c.price_source.startswith(OVERRIDE_SOURCE):
        warnings.append(f"priced with your own price for {inst.id} in {c.region}, not the catalog's: {c.price_source}")
    warnings.extend(n for n in est.notes if n not in warnings and not n.startswith(PREFIX_CACHE_NOTE))
    targets = _targets_warning(c.cloud, s.replicas)
    if targets:
        warnings.append(targets)
    if spec.slo.ttft_p99_ms is None and spec.slo.tpot_ms is None and spec.slo.e2e_p99_ms is None:
        # the figures the plan's estimate reports (rounded as there first, so the two never disagree by a rounding)
        warnings.append(f"no slo given: sized for throughput alone (batches of up to {s.batch}), so at peak expect "
                        f"TTFT {round(est.ttft_ms, 1):,.0f} ms, TPOT {round(est.tpot_ms, 2):.1f} ms, "
                        f"E2E {round(est.e2e_ms, 1) / 1000:,.1f} s; "
                        "set slo.ttft_p99_ms / slo.tpot_ms to size for latency")
    if est.relative_uncertainty >= 0.3:
        warnings.append(f"estimates in regime {est.regime} carry a ±{est.relative_uncertainty:.0%} band")
    gpus_per_replica = lay.tp * lay.pp if lay.engine == "vllm" else 0
    peak = t.peak_requests_per_s
    cap_total = est.requests_per_s * s.replicas
    in_flight, arrival = _load_at_peak(spec, est.e2e_ms / 1000.0)
    util = (peak / cap_total) if peak else in_flight / (s.batch * s.replicas)
    explanation = [
        f"{s.replicas} replica(s) of {model.display_name or model.id} ({lay.precision}, {lay.engine}, "
        f"tp={lay.tp}{' expert-parallel' if lay.expert_parallel else ''} pp={lay.pp}) on {c.nodes} x {inst.id} in "
        f"{c.region}: the cheapest of "
        f"{len(result.feasible)} feasible candidates out of {len(result.candidates)} considered.",
        *_load_sentences(spec, s.replicas, s.batch, est, util, in_flight, arrival, lay.engine),
        context.why,
    ]
    if t.prefix_cache_hit_rate > 0:
        explanation.append(_prefix_sentence(spec, lay.engine))
    if lay.replicas_per_node > 1:
        explanation.append(f"{lay.replicas_per_node} engines share each node, one per group of {lay.tp} GPU(s).")
    idle = inst.gpu_count - lay.tp * lay.replicas_per_node * (lay.pp if lay.nodes_per_replica == 1 else 1)
    if lay.engine == "vllm" and idle > 0:
        explanation.append(f"{idle} of the node's {inst.gpu_count} GPUs stay idle: the {c.cloud} load balancer "
                           "or the node's RAM/vCPUs allow no more engines, and this is still the cheapest option.")
    if lay.nodes_per_replica > 1:
        explanation.append(f"One replica spans {lay.nodes_per_replica} nodes: pipeline parallel over "
                           f"{inst.rdma.upper()} in a cluster placement group.")
    price_source = c.price_source
    per_mtok = explain.token_costs(c, t)
    boot_time = resources.boot_time(weights_total_gib, inst.network_gbps,
                                    download_gbps=download_mbit_s / 1000 if download_mbit_s else None)
    scaling = _scaling(spec, c, est.requests_per_s, boot_time, floor)
    if scaling is not None:
        explanation.append(_scaling_sentence(scaling))
    return Plan(
        infragen_version=__version__, workload=name,
        deployment=DeploymentPlan(
            cloud=c.cloud, region=c.region, instance_type=inst.id, gpu=inst.gpu, gpus_per_node=inst.gpu_count,
            gpus_per_replica=gpus_per_replica, replicas_per_node=lay.replicas_per_node,
            nodes_per_replica=lay.nodes_per_replica, replicas=s.replicas, nodes=c.nodes, tp=lay.tp, pp=lay.pp,
            expert_parallel=lay.expert_parallel, engine=lay.engine, precision=lay.precision,
            kv_cache_dtype=spec.kv_cache_dtype, pricing=spec.pricing,
            cpu_arch=inst.cpu_arch),
        model=ModelPlan(id=model.id, display_name=model.display_name or model.id, served_model_name=served,
                        weights_source=source, weights_uri=uri, weights_file=file,
                        weights_gib=round(weights_total_gib, 2), params_b=round(model.total_params() / 1e9, 3),
                        active_params_b=round(model.active_params() / 1e9, 3)),
        engine=EnginePlan(name=lay.engine, version=engine_version,
                          argv=argv, port=spec.port, max_model_len=mml, max_num_seqs=s.batch,
                          gpu_memory_utilization=GPU_MEMORY_UTILIZATION if lay.engine == "vllm" else None,
                          threads=threads, visible_devices=visible, env=env,
                          distributed_executor_backend="ray" if lay.nodes_per_replica > 1 else None,
                          build_flags=list(pinned_release(lay.engine).build_cflags)),
        memory=MemoryPlan(device_memory_gib=round(s.hardware.memory_per_gpu_gib if inst.gpu_count
                                                  else (inst.memory_gib or 0), 2),
                          weights_gib_per_gpu=round(est.weights_gib_per_gpu, 3),
                          kv_cache_gib_per_gpu=round(est.kv_cache_gib_per_gpu, 3),
                          overhead_gib_per_gpu=round(est.overhead_gib_per_gpu, 3),
                          kv_cache_bytes_per_token=est.kv_cache_bytes_per_token,
                          kv_cache_capacity_tokens=est.kv_cache_capacity_tokens),
        hardware=HardwarePlan(vcpus=inst.vcpus or 0, memory_gib=inst.memory_gib or 0,
                              required_memory_gib=round(resources.required_ram_gib(loaded), 2),
                              gpu_memory_gib=round(inst.gpu_memory_gib or 0, 2), network_gbps=inst.network_gbps or 0),
        storage=StoragePlan(kind=storage.kind, required_gib=storage.required_gib, nvme_devices=storage.nvme_devices,
                            nvme_total_gib=round(storage.nvme_total_gib, 1), volume_gib=storage.volume_gib,
                            volume_type=storage.volume_type, volume_iops=storage.volume_iops,
                            volume_throughput_mb_per_s=storage.volume_throughput_mb_per_s,
                            performance_level=storage.performance_level),  # type: ignore[arg-type]
        network=NetworkPlan(rdma=inst.rdma if lay.nodes_per_replica > 1 else "none",
                            efa_interfaces=inst.efa_interfaces if (lay.nodes_per_replica > 1 and inst.rdma == "efa")
                            else 0,
                            placement="cluster" if lay.nodes_per_replica > 1 else "none",
                            health_check_grace_s=boot_time.grace_s,
                            required_gbps=round(client_gbps + pipe_gbps, 3)),
        estimate=EstimatePlan(ttft_ms=round(est.ttft_ms, 1), tpot_ms=round(est.tpot_ms, 2), e2e_ms=round(est.e2e_ms, 1),
                              concurrency_per_replica=est.concurrency,
                              capacity_requests_per_s=round(est.requests_per_s, 4),
                              output_tokens_per_s=round(total_out_tps, 1), utilisation=round(util, 3),
                              relative_uncertainty=est.relative_uncertainty,
                              queueing_method=_queueing_method(spec, lay.engine),
                              in_flight_requests=round(in_flight, 3), arrival_requests_per_s=round(arrival, 4),
                              slo_confidence=spec.slo_confidence, latency_factor=est.latency_factor,
                              **_open_loop_figures(est)),
        cost=CostPlan(pricing=spec.pricing, usd_per_hour=round(c.usd_per_hour or 0.0, 4),
                      usd_per_month=round((c.usd_per_hour or 0.0) * HOURS_PER_MONTH, 2),
                      on_demand_usd_per_month=None if c.on_demand_usd_per_hour is None
                      else round(c.on_demand_usd_per_hour * HOURS_PER_MONTH, 2),
                      spot_usd_per_month=None if c.spot_usd_per_hour is None
                      else round(c.spot_usd_per_hour * HOURS_PER_MONTH, 2),
                      price_source=price_source,
                      usd_per_million_output_tokens_at_capacity=per_mtok[0],
                      usd_per_million_output_tokens_at_peak=per_mtok[1]),
        secrets=SecretsPlan(hf_token_name=f"infragen/{name}/hf-token", api_key_name=f"infragen/{name}/api-key"),
        explanation=explanation, warnings=warnings, alternatives=explain.alternatives(c, result, t), bootstrap=boot,
        scaling=scaling, spot=floor,
    )


def _load_at_peak(spec: WorkloadSpec, e2e_s: float) -> tuple[float, float]:
    """(mean requests in flight, arrival requests/s) over the whole deployment at peak, at latency `e2e_s`."""
    t = spec.traffic
    if t.peak_requests_per_s is not None:
        return t.peak_requests_per_s * e2e_s, t.peak_requests_per_s  # Little's law
    users = float(t.concurrent_users or 0)
    return queueing.in_flight(users, e2e_s, t.think_time_s), queueing.arrival_rate(users, e2e_s, t.think_time_s)


def _prefix_sentence(spec: WorkloadSpec, engine: str) -> str:
    t = spec.traffic
    if engine != "vllm":
        return (f"traffic.prefix_cache_hit_rate {t.prefix_cache_hit_rate:g} is not credited: llama.cpp reuses only "
                "each slot's own previous prompt.")
    block = load_constants().vllm_memory.block_size_tokens
    cached = cached_prompt_tokens(t.prompt_tokens, t.prefix_cache_hit_rate, block)
    return (f"Prefix cache (traffic.prefix_cache_hit_rate {t.prefix_cache_hit_rate:g}): prefill computes "
            f"{t.prompt_tokens - cached:,} of {t.prompt_tokens:,} prompt tokens ({cached:,} cached, whole "
            f"{block}-token blocks); KV memory is not credited; --enable-prefix-caching keeps the cache on.")


def _open_loop_figures(est: Estimate) -> dict[str, float | None]:
    """The load model's percentiles for EstimatePlan (None when the replica was sized at a fixed batch)."""
    def r(value: float | None, digits: int) -> float | None:
        return None if value is None else round(value, digits)

    return {"ttft_p50_ms": r(est.ttft_p50_ms, 1), "ttft_p99_ms": r(est.ttft_p99_ms, 1),
            "e2e_p99_ms": r(est.e2e_p99_ms, 1), "running_batch": r(est.running_batch, 2)}


def _load_sentences(spec: WorkloadSpec, replicas: int, batch: int, est: Estimate, util: float, in_flight: float,
                    arrival: float, engine: str) -> list[str]:
    """The explanation's lines on batching and load: the load model's (open loop) or the fixed batch's.

    The admitted count is named by the setting the user will find in the command line: vLLM's max_num_seqs,
    llama-server's --parallel slots."""
    t = spec.traffic
    setting = "max_num_seqs" if engine == "vllm" else "--parallel slots"
    conf = f"{spec.slo_confidence} confidence, latencies x{est.latency_factor:.2f}"
    if t.peak_requests_per_s is not None and est.ttft_p99_ms is not None:
        return [
            f"Each replica admits up to {batch} requests at once ({setting}: the running batch at its SLO rate "
            f"plus 3.09 standard deviations, within what the KV cache holds); at peak "
            f"{est.running_batch or 0:.1f} run at once, TTFT p50 {est.ttft_p50_ms or 0:,.0f} ms / p99 "
            f"{est.ttft_p99_ms:,.0f} ms, TPOT {est.tpot_ms:.1f} ms (±{est.relative_uncertainty:.0%}).",
            f"Peak {t.peak_requests_per_s:g} requests/s over {replicas} replicas: one replica meets the SLOs up to "
            f"{est.requests_per_s:.2f} Poisson requests/s ({conf}; utilisation {util:.0%} of that).",
        ]
    first = (f"Each replica runs batches of up to {batch}: the largest meeting the SLOs ({conf}; TTFT "
             f"{est.ttft_ms:.0f} ms, TPOT {est.tpot_ms:.1f} ms at peak, ±{est.relative_uncertainty:.0%}).")
    if t.peak_requests_per_s is not None:
        return [first, f"Peak {t.peak_requests_per_s:g} requests/s over {replicas} replicas of "
                       f"{est.requests_per_s:.2f} requests/s each ({queueing.RHO_MAX:.0%} of a batch's capacity; "
                       f"utilisation {util:.0%} of that)."]
    return [first, _users_sentence(spec, replicas, batch, in_flight, arrival)]


def _queueing_method(spec: WorkloadSpec, engine: str) -> str:
    t = spec.traffic
    if t.peak_requests_per_s is not None:
        return queueing.METHOD_QPS if engine == "vllm" else queueing.METHOD_QPS_SLOTS
    return queueing.METHOD_USERS_THINK if t.think_time_s > 0 else queueing.METHOD_USERS


def _users_sentence(spec: WorkloadSpec, replicas: int, batch: int, in_flight: float, arrival: float) -> str:
    t = spec.traffic
    if t.think_time_s <= 0:
        return f"{t.concurrent_users} concurrent users over {replicas} replicas of batch {batch}."
    return (f"{t.concurrent_users} concurrent users who think {t.think_time_s:g} s between requests: "
            f"{in_flight:.1f} requests in flight and {arrival:.2f} requests/s at peak (users x E2E / (think + E2E) "
            f"and users / (think + E2E)) over {replicas} replica(s) of batch {batch}.")


def _scaling(spec: WorkloadSpec, c: Candidate, capacity_requests_per_s: float,
             boot_time: resources.BootTime, floor: SpotPlan | None) -> ScalingPlan | None:
    """The daily view of the chosen candidate, when the workload gives a profile or an average."""
    t = spec.traffic
    if t.hourly_profile is None and t.average_requests_per_s is None:
        return None
    lay = c.sizing.layout
    shape = daily.shape_for(t, capacity_requests_per_s=capacity_requests_per_s, batch=c.sizing.batch,
                            min_replicas=spec.min_replicas, nodes_per_replica=lay.nodes_per_replica,
                            replicas_per_node=lay.replicas_per_node)
    # A spot plan's nodes: spot price each, the floor at the on-demand price (the candidate's figure mixes both).
    hourly = c.spot_usd_per_hour if floor and floor.on_demand_base_nodes else c.usd_per_hour
    node_usd = None if hourly is None else hourly / c.nodes
    od_node_usd = None if c.on_demand_usd_per_hour is None else c.on_demand_usd_per_hour / c.nodes
    return daily.select_scaling(t, shape, boot_time, node_usd_per_hour=node_usd,
                                on_demand_base_nodes=floor.on_demand_base_nodes if floor else 0,
                                on_demand_node_usd_per_hour=od_node_usd if floor else None)


def _scaling_sentence(s: ScalingPlan) -> str:
    cost = ("" if s.usd_per_month_at_profile is None or s.usd_per_month_at_peak is None else
            f"; ${s.usd_per_month_at_profile:,.0f}/month at the profile vs ${s.usd_per_month_at_peak:,.0f} at a "
            "constant peak")
    by_hour = s.replicas_by_hour
    hours = "" if by_hour is None else f"{min(by_hour)}-{max(by_hour)} replicas by hour, "
    return (f"Over the day ({s.average_load_fraction:.0%} of the peak on average): {hours}autoscaling between "
            f"{s.min_replicas} and {s.max_replicas} ({s.strategy}), a new replica serves after about "
            f"{s.boot.total_s // 60} min{cost}.")
