"""The load model's fast paths (load.py) give the very floats of its definitions: the gap the batch solves search
is _steady's, the TTFT CDF is the composition of _wait_cdf over the step in progress, Erlang C is the textbook
recursion, and remembered CDF values are the values. Plans must not move when the planner gets faster."""

from __future__ import annotations

import itertools
import math

import pytest

from infragen.sizing import load
from infragen.sizing.load import Scheduler, capacity_per_s, erlang_c, serve_at_rate


def _step(n: float, ctx: float, p: float, pctx: float) -> float:
    """A step-time shape like performance.py's: a fixed cost, per sequence, attention and prompt compute."""
    return 0.012 + 2.5e-5 * n + 3.1e-9 * n * ctx + 4.0e-5 * p + 1.7e-9 * p * pctx


def _gap_by_definition(rate: float, n: float, inp: int, out: int, budget: int, cached: int) -> float:
    st = load._steady(_step, rate, n, inp, out, budget, cached)
    return math.inf if st.prefill_busy >= 1.0 else rate * st.time_in_batch - n


SHAPES = [(1024, 256, 2048, 0), (2000, 300, 8192, 512), (300, 800, 512, 0), (8000, 100, 2048, 4096), (100, 1, 256, 0),
          (4096, 2, 300, 0)]


@pytest.mark.parametrize(("inp", "out", "budget", "cached"), SHAPES)
def test_the_gap_is_steadys_to_the_bit(inp, out, budget, cached) -> None:
    compared = saturated = 0
    for rate in (1e-4, 0.05, 0.9, 3.7, 11.0, 40.0, 300.0):
        gap = load._gap_fn(_step, rate, inp, out, budget, cached)
        for n in (0.0, 0.37, 1.0, 7.5, 63.999, 64.0, 255.0, budget - 0.5, budget + 3.0):
            want = _gap_by_definition(rate, n, inp, out, budget, cached)
            assert gap(n) == want, (rate, n)
            compared += 1
            saturated += math.isinf(want)
    assert compared == 63 and 0 < saturated < compared  # both branches taken


def _ttft_cdf_by_definition(t: float, s_pf: float, busy: float, tau: float,
                            waits: tuple[tuple[float, float], ...]) -> float:
    x = t - s_pf
    if x < 0:
        return 0.0
    idle = (1.0 - busy) * load._wait_cdf(x, waits)
    residual = sum(load._wait_cdf(x - (i + 0.5) / load._RESIDUAL_POINTS * tau, waits)
                   for i in range(load._RESIDUAL_POINTS))
    return idle + busy * residual / load._RESIDUAL_POINTS


#: Both waits with a positive mean (what serve_at_rate builds), equal means, tiny atoms, and no waits at all.
WAITS = [((0.3, 0.02), (0.1, 0.5)), ((0.97, 0.4), (0.6, 0.4)), ((0.2, 0.05), (0.2, 0.05 * (1 + 1e-12))),
         ((0.0, 0.0), (0.0, 0.0)), ((1e-300, 3.0), (2e-17, 1e-3))]


@pytest.mark.parametrize("waits", WAITS)
def test_the_ttft_cdf_is_the_composition_of_the_waits_to_the_bit(waits) -> None:
    s_pf = 0.08
    for busy, tau in itertools.product((0.0, 0.35, 1.0), (0.0, 0.013, 0.9)):
        cdf = load._ttft_cdf_fn(s_pf, busy, tau, waits)
        for t in (0.0, 0.079, 0.08, 0.081, 0.085, 0.1, 0.5, 1.7, 12.0, 1e3):
            assert cdf(t) == _ttft_cdf_by_definition(t, s_pf, busy, tau, waits), (busy, tau, t)
            assert load._ttft_cdf(t, s_pf, busy, tau, waits) == cdf(t)


def test_erlang_c_is_the_textbook_recursion_to_the_bit() -> None:
    def textbook(servers: int, offered: float) -> float:
        b = 1.0
        for k in range(1, servers + 1):
            b = offered * b / (k + offered * b)
        return servers * b / (servers - offered * (1.0 - b))

    for servers in (1, 2, 7, 64, 256, 1024, 4096, 4097, 5000):  # the float table ends at 4096
        for share in (1e-6, 0.01, 0.3, 0.8, 0.999):
            assert erlang_c(servers, share * servers) == textbook(servers, share * servers)


def test_remembered_cdf_values_are_the_values() -> None:
    asked: list[float] = []

    def f(t: float) -> float:
        asked.append(t)
        return t * 0.1

    g = load._remembered(f)
    got = [g(0.3), g(0.7), g(0.3), g(0.3), g(0.7)]
    assert asked == [0.3, 0.7]  # each t computed once
    assert got == [f(0.3), f(0.7), f(0.3), f(0.3), f(0.7)]


@pytest.mark.parametrize(("inp", "out", "budget", "cached"), SHAPES)
def test_percentiles_do_not_depend_on_which_are_asked(inp, out, budget, cached) -> None:
    """serve_at_rate remembers CDF values across the percentiles of one point: each is what it is alone."""
    sched = Scheduler(64, budget, cached)
    cap = capacity_per_s(_step, inp, out, sched)
    for share in (0.01, 0.5, 0.9):
        every = serve_at_rate(_step, share * cap, inp, out, sched)
        for q, attr in ((0.5, "ttft_p50_s"), (0.9, "ttft_p90_s"), (0.99, "ttft_p99_s")):
            alone = serve_at_rate(_step, share * cap, inp, out, sched, quantiles=(q,))
            assert getattr(alone, attr) == getattr(every, attr)
        assert math.isnan(serve_at_rate(_step, share * cap, inp, out, sched, quantiles=(0.99,)).ttft_p50_s)


@pytest.mark.parametrize(("inp", "out", "budget", "cached"), SHAPES)
def test_capacity_asks_only_whether_a_batch_exists(inp, out, budget, cached) -> None:
    """capacity_per_s's stability test: one gap at full slots, else _little's start alone (no root search), and
    the same answer as solving: stable exactly when _little finds a batch."""
    sched = Scheduler(48, budget, cached)
    cap = capacity_per_s(_step, inp, out, sched)
    assert cap > 0
    for share in (0.5, 0.99, 1.0, 1.02, 1.5):
        gap = load._gap_fn(_step, share * cap, inp, out, budget, cached)
        solved = load._little(_step, share * cap, inp, out, sched)
        assert (load._upper(gap, sched.slots) is not None) == (solved is not None)
        assert (solved is not None) == (share <= 1.0)
