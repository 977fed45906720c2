"""What keeps the search fast without changing a plan: estimates shared by the sizes of a family that share their GPUs
(sizing/memo.py), and the largest SLO-meeting batch found by bisection (search.largest_meeting_batch). The speed
itself is measured by benchmarks/plan_speed.py, not here."""

from __future__ import annotations

import dataclasses
import importlib
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infragen.catalog import catalog_from_records, load_catalog
from infragen.catalog.models import load_model_registry, resolve_model
from infragen.sizing import Estimate, estimate, open_loop, search
from infragen.sizing.hardware import hardware_from_instance
from infragen.sizing.memo import EstimateMemo, OpenLoopMemo, gpu_side
from infragen.sizing.search import BATCH_LEVELS, largest_meeting_batch
from infragen.spec import WorkloadSpec, load_spec

ROOT = Path(__file__).resolve().parents[2]
SEARCH = importlib.import_module("infragen.sizing.search")


def _catalog(*ids: str):
    full = load_catalog()
    return catalog_from_records(full.accelerators.values(), full.cpus.values(), [full.instance(i) for i in ids],
                                usd_per_cny=full.usd_per_cny, fx_source=full.fx_source)


def _spec(**extra: Any) -> WorkloadSpec:
    return WorkloadSpec.model_validate({"model": "llama-3.1-8b", "cloud": "aws", "traffic": {"peak_requests_per_s": 20},
                                        "slo": {"tpot_ms": 60}, **extra})


class Counting:
    """The real estimator, counting the estimates it computes."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args: Any, **kw: Any) -> Estimate:
        self.calls += 1
        return estimate(*args, **kw)


def _computed(*ids: str) -> int:
    counting = Counting()
    search(_spec(), load_model_registry()["llama-3.1-8b"], _catalog(*ids), counting)
    return counting.calls


def test_sizes_that_share_their_gpus_share_their_estimates() -> None:
    """g6e.xlarge, 2xlarge, 4xlarge (one L40S each, other vCPUs, RAM and prices) cost the estimates of one size,
    in every region they are priced in; a different GPU count (g6e.12xlarge, 4 x L40S) asks its own."""
    one = _computed("g6e.xlarge")
    assert one > 0
    assert _computed("g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge") == one
    assert _computed("g6e.xlarge", "g6e.12xlarge") > one


def test_shared_estimates_equal_the_estimates_of_each_full_node() -> None:
    """An answer from the table is exactly what the estimator gives each full node (CPU, RAM, network and all)."""
    model = load_model_registry()["llama-3.1-8b"]
    catalog = load_catalog()
    memo = EstimateMemo(estimate)
    for itype, layouts in (("g6e.xlarge", [(1, 1, 1)]), ("g6e.2xlarge", [(1, 1, 1)]), ("g6e.4xlarge", [(1, 1, 1)]),
                           ("p4d.24xlarge", [(8, 1, 1), (8, 2, 2)]), ("p4de.24xlarge", [(8, 2, 2)])):
        hw = hardware_from_instance(catalog.instance(itype), catalog)
        for tp, pp, nodes in layouts:
            for conc in (1, 8, 64, None):
                kw = dict(precision="bf16", engine="vllm", tp=tp, pp=pp, nodes=nodes, input_len=512,
                          output_len=256, concurrency=conc, max_model_len=768)
                assert memo(model, hw, **kw) == estimate(model, hw, **kw), (itype, tp, pp, conc)
    assert memo.computed < memo.asked


def test_a_replica_across_nodes_keys_on_the_network() -> None:
    """Across nodes the interconnect may matter: the GPU-only view keeps network and RDMA, a single node drops them."""
    inst = load_catalog().instance("p4d.24xlarge")
    hw = hardware_from_instance(inst, load_catalog())
    assert gpu_side(hw, multi_node=True).rdma == "efa" and gpu_side(hw, multi_node=True).network_gbps
    single = gpu_side(hw, multi_node=False)
    assert single.rdma == "none" and single.network_gbps is None and single.cpu is None and single.vcpus is None
    assert (single.accelerator, single.gpu_count, single.gpu_memory_gib) == (hw.accelerator, hw.gpu_count,
                                                                             hw.gpu_memory_gib)
    calls: list[Any] = []
    memo = EstimateMemo(lambda model, hw, **kw: calls.append(hw) or "estimate")  # type: ignore[arg-type,func-returns-value]
    other = dataclasses.replace(hw, name="same GPUs, other network", network_gbps=(hw.network_gbps or 1) / 2)
    for node in (hw, other):
        memo(None, node, engine="vllm", nodes=2, tp=8, pp=2)  # type: ignore[arg-type]
        memo(None, node, engine="vllm", nodes=1, tp=8, pp=1)  # type: ignore[arg-type]
    assert len(calls) == 3 and memo.asked == 4 and memo.computed == 3  # two multi-node keys, one single-node


def test_cpu_estimates_pass_through() -> None:
    calls: list[str] = []
    memo = EstimateMemo(lambda model, hw, **kw: calls.append(hw.name) or "estimate")  # type: ignore[arg-type,func-returns-value]
    hw = hardware_from_instance(load_catalog().instance("c7i.2xlarge"), load_catalog())
    for _ in range(2):
        memo(None, hw, engine="llama.cpp", concurrency=1)  # type: ignore[arg-type]
    assert calls == ["c7i.2xlarge", "c7i.2xlarge"]


@dataclasses.dataclass(frozen=True)
class _Est:
    batch: int
    latency_ms: float
    requests_per_s: float


def _linear(levels: list[int], run: Any, meets: Any) -> tuple[Any, Any]:
    """The scan the bisection replaces: the best requests/s among the SLO-meeting batches before the first miss."""
    best = None
    for b in levels:
        est = run(b)
        if meets(est):
            if best is None or est.requests_per_s >= best.requests_per_s:
                best = est
        elif best is not None:
            break
    return run(levels[0]), best


@given(top=st.integers(1, 300), slo=st.floats(1, 2000), base=st.floats(1, 50), per=st.floats(0, 20),
       plateau=st.floats(1, 300))
def test_bisection_finds_what_the_linear_scan_finds(top: int, slo: float, base: float, per: float,
                                                    plateau: float) -> None:
    """Latency grows with the batch and throughput does not fall (it may level off): the same answer, with about
    log2(levels) + 1 estimates instead of one per level."""
    levels = sorted({b for b in BATCH_LEVELS if b < top} | {top})
    asked: list[int] = []

    def run(b: int) -> _Est:
        asked.append(b)
        latency = base + per * b
        return _Est(b, latency, min(b / latency, plateau) if latency else plateau)

    def meets(e: _Est) -> bool:
        return e.latency_ms <= slo

    first, best = largest_meeting_batch(levels, run, meets)
    assert len(set(asked)) <= math.ceil(math.log2(len(levels))) + 1
    assert (first, best) == _linear(levels, run, meets)


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").glob("*.yaml")))
def test_every_example_sizes_as_the_linear_scan_would(example: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bisection's premise holds for the estimator as it is: every candidate of every example gets the batch,
    replicas and estimates a scan of every batch level gives (a model change that breaks the premise fails here)."""
    path = ROOT / "examples" / example
    spec = load_spec(path)
    model = resolve_model(spec.model, base_dir=path.parent, where="model")
    catalog = load_catalog()

    bisected = _sizings(spec, model, catalog)
    monkeypatch.setattr(SEARCH, "largest_meeting_batch", _linear)
    assert _sizings(spec, model, catalog) == bisected


def _sizings(spec: WorkloadSpec, model: Any, catalog: Any, estimator: Any = estimate) -> list[tuple[Any, ...]]:
    return [(c.sizing.instance.id, c.sizing.layout, c.sizing.batch, c.sizing.replicas, c.sizing.rejected,
             c.sizing.estimate, c.sizing.miss, c.sizing.first, c.sizing.least_ms, c.region, c.usd_per_hour, c.rejected)
            for c in search(spec, model, catalog, estimator).candidates]


class _EveryNode:
    """The open-loop sizing without the table: each full node (CPU, RAM, network and all) sized on its own, its
    load model starting from its own estimate (not the search's)."""

    def __init__(self, **_: Any) -> None:
        pass

    def __call__(self, spec: WorkloadSpec, model: Any, hw: Any, *, base: Any = None,
                 **kw: Any) -> open_loop.OpenLoopSizing:
        return open_loop.size_open_loop(spec, model, hw, **kw)


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").glob("*.yaml")))
def test_every_example_sizes_open_loop_as_each_full_node_would(example: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The open-loop table (sizing/memo.OpenLoopMemo) answers every candidate of every example exactly as sizing
    each full node does; with traffic.peak_requests_per_s the sizes sharing their GPUs are sized once."""
    path = ROOT / "examples" / example
    spec = load_spec(path)
    model = resolve_model(spec.model, base_dir=path.parent, where="model")
    catalog = load_catalog()
    memos: list[OpenLoopMemo] = []
    monkeypatch.setattr(SEARCH, "OpenLoopMemo", lambda **kw: memos.append(OpenLoopMemo(**kw)) or memos[-1])
    shared = _sizings(spec, model, catalog)
    monkeypatch.setattr(SEARCH, "OpenLoopMemo", _EveryNode)
    assert _sizings(spec, model, catalog) == shared
    if spec.traffic.peak_requests_per_s is not None and spec.engine != "llama.cpp":
        assert 0 < memos[0].computed < memos[0].asked


def test_open_loop_sizes_that_share_their_gpus_are_sized_once() -> None:
    """g6e.xlarge, 2xlarge and 4xlarge (one L40S each) ask one open-loop question per layout; the answers equal
    sizing each full node."""
    catalog = load_catalog()
    model = load_model_registry()["llama-3.1-8b"]
    memo = OpenLoopMemo()
    kw = dict(precision="bf16", tp=1, pp=1, nodes=1, max_model_len=4096, regime="gpu-decode-memory-bound")
    for itype in ("g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge"):
        hw = hardware_from_instance(catalog.instance(itype), catalog)
        assert memo(_spec(), model, hw, **kw) == open_loop.size_open_loop(_spec(), model, hw, **kw)
    assert (memo.asked, memo.computed) == (3, 1)


def test_the_advice_memo_keys_on_what_an_estimate_reads() -> None:
    """explain's re-plans share estimates across searches (explain._memo): two GPU-only views that differ in memory
    per GPU or, across nodes, in the network are different questions even when their names are the same."""
    explain = importlib.import_module("infragen.sizing.explain")
    hw = hardware_from_instance(load_catalog().instance("p4d.24xlarge"), load_catalog())
    view = gpu_side(hw, multi_node=True)
    calls: list[Any] = []
    memo = explain._memo(lambda model, hw, **kw: calls.append(hw) or len(calls))  # type: ignore[func-returns-value]
    for node in (view, dataclasses.replace(view, gpu_memory_gib=(view.gpu_memory_gib or 1) / 2),
                 dataclasses.replace(view, network_gbps=(view.network_gbps or 1) / 2), view):
        memo(None, node, engine="vllm", nodes=2, tp=8, pp=2)  # type: ignore[arg-type]
    assert len(calls) == 3


@pytest.mark.parametrize("example", ["team-chatbot.yaml", "light-api.yaml"])
def test_load_models_start_from_the_searchs_largest_batch_estimate(example: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """With estimate() as the search's estimator, a load model starts from the search's own estimate of the layout
    at its largest batch (the question prepare_load would ask again); with any other estimator it asks estimate()
    itself. The candidates are the same."""
    from infragen.sizing import load_estimate

    path = ROOT / "examples" / example
    spec = load_spec(path)
    model = resolve_model(spec.model, base_dir=path.parent, where="model")
    catalog = load_catalog()
    asked: list[int] = []
    real = load_estimate.estimate
    monkeypatch.setattr(load_estimate, "estimate", lambda *a, **kw: asked.append(1) or real(*a, **kw))
    shared = _sizings(spec, model, catalog)
    assert asked == []
    assert _sizings(spec, model, catalog, lambda *a, **kw: estimate(*a, **kw)) == shared
    assert len(asked) > 10
