"""One estimate per distinct question within a search: the sizes of a family that share their GPUs ask the same.

A vLLM replica on one node is modelled from its GPUs alone (model, count, memory per GPU): the node's CPU, RAM and
network are checked after the estimate (search._check_node). So g6e.xlarge ... g6e.16xlarge (one L40S each),
which differ only in vCPUs, RAM and price, share one estimate per layout and batch, and every region is a price
lookup. The estimator is called with that GPU-only view of the node, so a shared answer cannot depend on what the
key leaves out. A replica across nodes also keys on the network and RDMA. llama.cpp (CPU) estimates pass through.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from infragen.architecture import ModelArchitecture
from infragen.sizing.types import Estimate, Hardware

if TYPE_CHECKING:
    from infragen.sizing.open_loop import OpenLoopSizing
    from infragen.spec import WorkloadSpec

_Estimator = Callable[..., Estimate]
_Key = tuple[Any, ...]
_T = TypeVar("_T")


def _hw_key(hw: Hardware, *, multi_node: bool) -> _Key:
    assert hw.accelerator is not None
    return (hw.accelerator.id, hw.gpu_count, hw.gpu_memory_gib, (hw.network_gbps, hw.rdma) if multi_node else None)


def gpu_side(hw: Hardware, *, multi_node: bool) -> Hardware:
    """What a vLLM estimate of `hw` may read: its GPUs (and, across nodes, the network), named by them."""
    assert hw.accelerator is not None
    return Hardware(name=f"{hw.gpu_count} x {hw.accelerator.id}", accelerator=hw.accelerator,
                    gpu_count=hw.gpu_count, gpu_memory_gib=hw.gpu_memory_gib, cpu=None, vcpus=None,
                    memory_gib=None, network_gbps=hw.network_gbps if multi_node else None,
                    rdma=hw.rdma if multi_node else "none")


class _GpuViewTable(Generic[_T]):
    """Answers keyed on the model, the node's GPU-only view and the other arguments; each view built once and the
    answer computed from it, so a shared answer cannot depend on what the key leaves out."""

    def __init__(self) -> None:
        self._table: dict[_Key, _T] = {}
        self._views: dict[_Key, Hardware] = {}

    def answer(self, model: ModelArchitecture, hw: Hardware, kw: dict[str, Any],
               compute: Callable[[Hardware], _T]) -> _T:
        multi = kw.get("nodes", 1) > 1
        hw_key = _hw_key(hw, multi_node=multi)
        key = (id(model), hw_key, tuple(sorted(kw.items())))
        hit = self._table.get(key)
        if hit is None:
            view = self._views.get(hw_key)
            if view is None:
                view = self._views[hw_key] = gpu_side(hw, multi_node=multi)
            hit = self._table[key] = compute(view)
        return hit


@dataclass
class EstimateMemo:
    """An estimator that answers a repeated question from its table (one search's lifetime)."""

    estimator: _Estimator
    asked: int = 0
    """Estimates asked for."""
    computed: int = 0
    """Estimates actually computed (the rest were answered from the table)."""
    _memo: _GpuViewTable[Estimate] = field(default_factory=_GpuViewTable)

    def __call__(self, model: ModelArchitecture, hw: Hardware, **kw: Any) -> Estimate:
        self.asked += 1
        if kw.get("engine") != "vllm" or hw.accelerator is None:
            self.computed += 1
            return self.estimator(model, hw, **kw)

        def compute(view: Hardware) -> Estimate:
            self.computed += 1
            return self.estimator(model, view, **kw)

        return self._memo.answer(model, hw, kw, compute)


@dataclass
class OpenLoopMemo:
    """open_loop.size_open_loop answered once per GPU-only question within one search (one spec): the sizes of a
    family that share their GPUs share the load model, the SLO rate and the replicas, as estimates do above."""

    share_base: bool = False
    """Whether the caller's largest-batch estimate is estimate()'s own (the search's default estimator), so the
    load model may start from it instead of estimating the same again (`base` below)."""
    asked: int = 0
    computed: int = 0
    _memo: _GpuViewTable[OpenLoopSizing] = field(default_factory=_GpuViewTable)

    def __call__(self, spec: WorkloadSpec, model: ModelArchitecture, hw: Hardware, *, base: Estimate | None = None,
                 **kw: Any) -> OpenLoopSizing:
        """`base`: estimate() of this layout at its largest batch (concurrency None) with the spec's request shape,
        when the caller has it; used only under `share_base`. Not part of the key: the key decides it."""
        from infragen.sizing.open_loop import size_open_loop

        self.asked += 1

        def compute(view: Hardware) -> OpenLoopSizing:
            self.computed += 1
            return size_open_loop(spec, model, view, base=base if self.share_base else None, **kw)

        return self._memo.answer(model, hw, kw, compute)
