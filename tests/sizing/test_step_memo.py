"""A load model's step function remembers its answers (load_estimate._step_fn): the load model asks the same
steps many times, and a remembered step must be the very float the step model computes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infragen.catalog import load_catalog
from infragen.catalog.models import load_model_registry
from infragen.sizing import load_estimate
from infragen.sizing.load import Scheduler, capacity_per_s, serve_at_rate
from infragen.sizing.memory import vllm_memory
from infragen.sizing.performance import GpuSetup, gpu_figures, gpu_setup, token_step_s


@pytest.fixture()
def setup() -> Iterator[GpuSetup]:
    model = load_model_registry()["llama-3.1-8b"]
    acc = load_catalog().accelerator("a100-80gb")
    mem = vllm_memory(model, acc.usable_memory_gib, "bf16", "bf16", 1, 1, 0.9)
    yield gpu_setup(model, gpu_figures(acc), "bf16", mem.kv_bytes_per_token_gpu, "vllm", 1, 1, 1)
    load_estimate._step_fn_for.cache_clear()  # drop the step functions built on the counting stand-in below


def test_each_distinct_step_is_computed_once_and_equals_the_step_model(setup, monkeypatch) -> None:
    computed: list[tuple[float, ...]] = []

    def counting(s: GpuSetup, *args: float) -> float:
        computed.append(args)
        return token_step_s(s, *args)

    monkeypatch.setattr(load_estimate, "token_step_s", counting)
    load_estimate._step_fn_for.cache_clear()
    step = load_estimate._step_fn(setup, 0.9, 1.1, 1.25)  # calibration factors: two step-model calls per step
    asked: list[tuple[float, ...]] = []

    def asking(*args: float) -> float:
        asked.append(args)
        return step(*args)

    sched = Scheduler(64, 2048)
    cap = capacity_per_s(asking, 1024, 256, sched)
    serve_at_rate(asking, 0.5 * cap, 1024, 256, sched)
    serve_at_rate(asking, 0.5 * cap, 1024, 256, sched)
    assert len(set(asked)) < len(asked)  # the load model does repeat itself
    assert len(computed) == 2 * len(set(asked))  # ... and the step model is asked once per distinct step
    for n, ctx, p, pctx in set(asked):
        full, decode = token_step_s(setup, n, ctx, p, pctx), token_step_s(setup, n, ctx, 0.0, 0.0)
        assert step(n, ctx, p, pctx) == (decode / 0.9 + (full - decode) / 1.1) * 1.25


def test_a_constants_override_gets_fresh_step_functions(setup, monkeypatch) -> None:
    """The step model reads performance.yaml when it runs: remembered steps must not outlive the constants."""
    from infragen.sizing import constants

    before = load_estimate._step_fn(setup, 1.0, 1.0)
    assert load_estimate._step_fn(setup, 1.0, 1.0) is before  # equal setups share one function
    monkeypatch.setattr(constants, "OVERRIDE", [constants.load_constants().model_copy()])
    assert load_estimate._step_fn(setup, 1.0, 1.0) is not before
    monkeypatch.setattr(constants, "OVERRIDE", [])
    assert load_estimate._step_fn(setup, 1.0, 1.0) is before


def test_served_points_are_remembered_on_everything_they_read(setup) -> None:
    """LoadModel.at remembers its load points (load models that share a step function, scheduler and request shape
    ask the same rates): the point is serve_at_rate's, and every input it reads is part of the key."""
    step = load_estimate._step_fn(setup, 1.0, 1.0)
    sched = Scheduler(64, 2048)
    cap = capacity_per_s(step, 1024, 256, sched)
    base = (step, 0.5 * cap, 1024, 256, sched, (0.5, 0.99))
    first = load_estimate._served(*base)
    assert load_estimate._served(*base) is first
    assert first == serve_at_rate(step, 0.5 * cap, 1024, 256, sched, quantiles=(0.5, 0.99))
    changed = [(load_estimate._step_fn(setup, 1.0, 1.0, 1.25), *base[1:]), (step, 0.6 * cap, *base[2:]),
               (step, 0.5 * cap, 1000, *base[3:]), (step, 0.5 * cap, 1024, 200, *base[4:]),
               (step, 0.5 * cap, 1024, 256, Scheduler(48, 2048), (0.5, 0.99)),
               (step, 0.5 * cap, 1024, 256, Scheduler(64, 1024), (0.5, 0.99)),
               (step, 0.5 * cap, 1024, 256, Scheduler(64, 2048, 512), (0.5, 0.99)), (*base[:5], (0.99,)),
               (*base, 0.0102)]
    for args in changed:
        step_, rate, inp, out, sched_, qs, *first_token = args
        want = serve_at_rate(step_, rate, inp, out, sched_, quantiles=qs, first_token_s=sum(first_token))
        assert load_estimate._served(*args) == want != first
