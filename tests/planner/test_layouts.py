"""Layouts on multi-GPU nodes: every data-parallel packing the cloud's load balancer can reach, fewer engines only
when the node's RAM or vCPUs cannot host more, ties broken by fewer nodes."""

from __future__ import annotations

from infragen.catalog import catalog_from_records, load_catalog
from infragen.catalog.models import load_model_registry
from infragen.sizing import plan_workload, search
from infragen.sizing.search import MAX_ENGINES_PER_NODE
from infragen.spec import WorkloadSpec


def _catalog(*instances):
    full = load_catalog()
    return catalog_from_records(full.accelerators.values(), full.cpus.values(), list(instances),
                                usd_per_cny=full.usd_per_cny, fx_source=full.fx_source)


def _layouts(spec: WorkloadSpec, catalog) -> dict[tuple[int, int], str | None]:
    """(tp, engines per node) -> rejection, for every vLLM candidate of the search."""
    out = {}
    for c in search(spec, load_model_registry()["llama-3.1-8b"], catalog).candidates:
        lay = c.sizing.layout
        if lay.engine == "vllm":
            out[(lay.tp, lay.replicas_per_node)] = c.sizing.rejected
    return out


def _spec(cloud: str, region: str) -> WorkloadSpec:
    return WorkloadSpec.model_validate({"model": "llama-3.1-8b", "cloud": cloud, "regions": [region],
                                        "traffic": {"peak_requests_per_s": 20}, "slo": {"tpot_ms": 60}})


def test_alibaba_packs_one_engine_per_gpu_on_an_8_gpu_node() -> None:
    inst = load_catalog().instance("ecs.gn7i-8x.16xlarge")
    layouts = _layouts(_spec("alicloud", "cn-hangzhou"), _catalog(inst))
    assert (1, 8) in layouts and (2, 4) in layouts and (4, 2) in layouts and (8, 1) in layouts
    assert layouts[(1, 8)] is None


def test_aws_packs_up_to_its_load_balancer_limit_instead_of_rejecting_tp1() -> None:
    inst = load_catalog().instance("p4d.24xlarge")
    layouts = _layouts(_spec("aws", "us-east-1"), _catalog(inst))
    cap = MAX_ENGINES_PER_NODE["aws"]
    assert (1, cap) in layouts and layouts[(1, cap)] is None  # 5 engines, 3 GPUs idle: an option, not a rejection
    assert not any(engines > cap for _, engines in layouts)


def test_fewer_engines_per_node_when_ram_cannot_host_a_full_node() -> None:
    full = load_catalog().instance("ecs.gn7i-8x.16xlarge")
    # 8B bf16 loads ~15 GiB per engine; 1.5 x that per engine: 64 GiB of RAM hosts 2 engines, not 8
    small = full.model_copy(update={"memory_gib": 64.0})
    layouts = _layouts(_spec("alicloud", "cn-hangzhou"), _catalog(small))
    tp1 = {engines: why for (tp, engines), why in layouts.items() if tp == 1}
    assert list(tp1) == [2] and tp1[2] is None


def test_equal_cost_and_latency_prefers_fewer_nodes() -> None:
    spec = _spec("alicloud", "cn-hangzhou")
    inst = load_catalog().instance("ecs.gn7i-8x.16xlarge")
    catalog = _catalog(inst)
    result = search(spec, load_model_registry()["llama-3.1-8b"], catalog)
    keys = [c.sort_key() for c in result.feasible]
    assert keys == sorted(keys) and all(k[4] == c.nodes for k, c in zip(keys, result.feasible, strict=True))
    plan = plan_workload(spec, catalog=catalog, model=load_model_registry()["llama-3.1-8b"], workload_name="t")
    assert plan.deployment.replicas_per_node * plan.deployment.tp <= inst.gpu_count


def test_an_alibaba_plan_of_8_engines_per_node_renders_every_engine_port() -> None:
    from infragen.render import render_all
    from infragen.sizing import _build_plan

    inst = load_catalog().instance("ecs.gn7i-8x.16xlarge")
    spec = WorkloadSpec.model_validate({"model": "qwen2-7b", "cloud": "alicloud", "regions": ["cn-hangzhou"],
                                        "traffic": {"peak_requests_per_s": 120}, "slo": {"tpot_ms": 80}})
    model = load_model_registry()["qwen2-7b"]
    result = search(spec, model, _catalog(inst))
    packed = next(c for c in result.feasible if (c.sizing.layout.tp, c.sizing.layout.replicas_per_node) == (1, 8))
    plan = _build_plan(spec, model, "t", packed, result)
    assert plan.engine.visible_devices == [[i] for i in range(8)]
    user_data = render_all(plan)["replica.yaml"]  # the argv passes the pinned vLLM parser
    assert all(str(plan.engine.port + i) in user_data for i in range(8))
