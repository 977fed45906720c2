"""Expert parallelism (vllm serve --enable-expert-parallel): each GPU of the tp group holds E/EP whole routed experts
instead of a 1/tp slice of every expert (vLLM 0.34.0 fused_moe/config.py FusedMoEParallelConfig.make: EP size =
dp x pcp x tp, the experts' tp_size 1; expert_map_manager.py: E // EP experts a rank, the remainder to the low
ranks). With one engine (dp 1) the tokens are on every rank already and the MoE output is all-reduced over the tp
group as under plain tp (runner/moe_runner.py: no dispatch / combine unless dp > 1 or sequence-parallel MoE)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from infragen.cli import main
from infragen.errors import InputError
from infragen.sizing.constants import load_constants
from infragen.sizing.estimate import estimate
from infragen.sizing.hardware import hardware_from_gpu
from infragen.sizing.memory import linear_bytes_per_weight, param_groups
from infragen.sizing.performance import busiest_rank_factor, gpu_figures, gpu_setup, stage_step_s, tp_comm_s
from tests.sizing.conftest import DEEPSEEK_V2_LITE, LLAMA3_8B, MIXTRAL, gpu

FIG = gpu_figures(gpu())


def _setup(model, tp: int, ep: bool, precision: str = "bf16", engine: str = "vllm"):  # type: ignore[no-untyped-def]
    return gpu_setup(model, FIG, precision, 1000.0, engine, tp, 1, 1, expert_parallel=ep)


def _one_expert_bytes(model, precision: str = "bf16") -> float:  # type: ignore[no-untyped-def]
    """Bytes of one expert (routed or shared) summed over the model's MoE layers."""
    g = param_groups(model)
    return g.moe_experts_per_layer / (model.num_experts + model.num_shared_experts) * g.moe_layers \
        * linear_bytes_per_weight(precision)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_each_gpu_holds_e_over_ep_whole_experts(tp: int) -> None:
    s = _setup(MIXTRAL, tp, True)
    assert s.expert_parallel == tp
    assert s.expert_bytes_gpu == pytest.approx(8 // tp * _one_expert_bytes(MIXTRAL))
    assert s.expert_share_gpu == pytest.approx((8 // tp) / 8)
    # with E divisible by EP a GPU holds as many expert bytes as a tp slice of every expert
    assert s.expert_bytes_gpu == pytest.approx(_setup(MIXTRAL, tp, False).expert_bytes_gpu)


def test_an_uneven_split_gives_the_low_ranks_one_expert_more() -> None:
    """8 experts over 3 ranks: 3, 3, 2 (vLLM: base 8 // 3 = 2, remainder 2 to ranks 0 and 1); the busiest rank
    holds and computes 3/8 of the experts, not 1/3."""
    s = _setup(MIXTRAL, 3, True)
    assert s.expert_bytes_gpu == pytest.approx(3 * _one_expert_bytes(MIXTRAL))
    assert s.expert_share_gpu == pytest.approx(3 / 8)
    assert _setup(MIXTRAL, 3, False).expert_share_gpu == pytest.approx(1 / 3)


def test_shared_experts_stay_tensor_parallel() -> None:
    """DeepSeek's shared experts are a plain MLP: tp-sharded with or without EP; only routed experts move."""
    s = _setup(DEEPSEEK_V2_LITE, 4, True)
    one = _one_expert_bytes(DEEPSEEK_V2_LITE)
    assert s.expert_bytes_gpu == pytest.approx(64 // 4 * one + 2 * one / 4)
    assert s.routed_expert_bytes_gpu == pytest.approx(16 * one)
    tp = _setup(DEEPSEEK_V2_LITE, 4, False)
    assert tp.routed_expert_bytes_gpu == pytest.approx(64 * one / 4)


def test_intermediate_tensors_of_whole_experts_for_the_local_pairs_only() -> None:
    """Under tp every GPU writes every routed pair's 3N/tp-wide intermediates and a hidden-wide output; under EP a
    GPU writes the full 3N for the pairs routed to its experts (E_local / E of them): the hidden-wide part shrinks."""
    ep, tp = _setup(MIXTRAL, 4, True), _setup(MIXTRAL, 4, False)
    three_n, h = 3 * MIXTRAL.intermediate_size, MIXTRAL.hidden_size
    assert tp.moe_activation_bytes_per_pair == pytest.approx(2 * 2 * (three_n / 4 + h))
    assert ep.moe_activation_bytes_per_pair == pytest.approx(2 * 2 * (three_n + h) / 4)
    assert ep.moe_activation_bytes_per_pair < tp.moe_activation_bytes_per_pair


@pytest.mark.parametrize("engine", ["vllm", "vllm-0.5", "tensorrt-llm"])
def test_even_ep_at_a_full_batch_is_tp_less_the_intermediate_traffic(engine: str) -> None:
    """Once a step touches every expert, each GPU reads its experts and computes its padded tiles as under tp (E
    divisible by EP): EP is never slower, and without the intermediate-tensor term (engines without the measured
    kernel) exactly as fast."""
    for tokens in (512.0, 4096.0):
        ep = stage_step_s(_setup(MIXTRAL, 4, True, engine=engine), tokens, 500.0, 0.0, 0.0)
        tp = stage_step_s(_setup(MIXTRAL, 4, False, engine=engine), tokens, 500.0, 0.0, 0.0)
        if engine == "vllm":
            assert ep <= tp
        else:
            assert ep == pytest.approx(tp)


def test_the_busiest_rank_is_the_expected_maximum_of_binomials() -> None:
    """Mixtral over 2 ranks (4 experts each), one token (k 2 of 8): each expert touched with p = 1/4, a rank's count
    Binomial(4, 1/4); E[max of two] = sum_j 1 - F(j)^2 over j = 0..3, against the mean 4 p = 1."""
    s = _setup(MIXTRAL, 2, True)
    p = 0.25
    pmf = [math.comb(4, j) * p**j * (1 - p) ** (4 - j) for j in range(5)]
    cdf = [sum(pmf[: j + 1]) for j in range(4)]
    expected = sum(1 - c**2 for c in cdf) / (4 * p)
    assert busiest_rank_factor(s, 1.0) == pytest.approx(expected)
    assert busiest_rank_factor(_setup(MIXTRAL, 2, False), 1.0) == 1.0  # tp: every GPU holds every expert's slice
    assert busiest_rank_factor(s, 4096.0) == pytest.approx(1.0)  # every expert touched on every rank


@pytest.mark.parametrize("model", [MIXTRAL, DEEPSEEK_V2_LITE])
def test_at_small_batches_ep_is_slower_than_tp(model) -> None:  # type: ignore[no-untyped-def]
    """A decode step of a few tokens reads the touched experts: under tp every GPU reads a slice of each, under EP
    the GPU holding the most touched experts reads them whole, more than the average (8 and 64 experts)."""
    for tokens in (1.0, 4.0):
        ep = stage_step_s(_setup(model, 4, True), tokens, 500.0, 0.0, 0.0)
        tp = stage_step_s(_setup(model, 4, False), tokens, 500.0, 0.0, 0.0)
        assert ep > tp


def test_an_uneven_split_is_slower_than_tp() -> None:
    """The busiest of 3 ranks computes 3/8 of the experts' tiles where tp gives each 1/3: at a prefill-sized
    (compute-bound) step EP at 3 ranks costs more."""
    ep = stage_step_s(_setup(MIXTRAL, 3, True), 0.0, 0.0, 8192.0, 4096.0)
    tp = stage_step_s(_setup(MIXTRAL, 3, False), 0.0, 0.0, 8192.0, 4096.0)
    assert ep > tp


def test_comm_is_the_tp_groups_allreduce_and_grows_with_tokens() -> None:
    """dp 1: the tokens are on every rank (attention is tp-sharded and all-reduced), each rank runs its experts on
    them and the partial outputs are all-reduced over the tp group (moe_runner._maybe_reduce_final_output), the
    same two all-reduces a layer as plain tp."""
    ep, tp = _setup(MIXTRAL, 8, True), _setup(MIXTRAL, 8, False)
    for tokens in (1.0, 256.0, 8192.0):
        assert tp_comm_s(ep, tokens) == pytest.approx(tp_comm_s(tp, tokens))
    assert tp_comm_s(ep, 1.0) < tp_comm_s(ep, 256.0) < tp_comm_s(ep, 8192.0)
    free = dataclasses.replace(ep, allreduce_latency_s=0.0, link_bytes_per_s=math.inf)
    assert stage_step_s(ep, 64.0, 500.0, 0.0, 0.0) - stage_step_s(free, 64.0, 500.0, 0.0, 0.0) == \
        pytest.approx(tp_comm_s(ep, 64.0))


def test_ep_on_one_gpu_is_no_ep() -> None:
    """vLLM turns EP on only when dp x pcp x tp > 1 (FusedMoEParallelConfig.make: use_ep)."""
    one = _setup(MIXTRAL, 1, True)
    assert one.expert_parallel == 1
    assert dataclasses.replace(one) == _setup(MIXTRAL, 1, False)
    hw = hardware_from_gpu(gpu(memory_gib=141.0), 1)
    kw = dict(precision="fp8", input_len=512, output_len=128, concurrency=16, tp=1)
    with_ep = estimate(MIXTRAL, hw, expert_parallel=True, **kw)  # type: ignore[arg-type]
    without = estimate(MIXTRAL, hw, **kw)  # type: ignore[arg-type]
    assert (with_ep.tpot_ms, with_ep.ttft_ms, with_ep.weights_gib_per_gpu) == \
        (without.tpot_ms, without.ttft_ms, without.weights_gib_per_gpu)
    assert not with_ep.expert_parallel
    assert any("expert parallelism" in n and "tp 1" in n for n in with_ep.notes)


def test_estimate_records_ep_and_prices_it() -> None:
    hw = hardware_from_gpu(gpu(), 4)
    kw = dict(precision="bf16", input_len=512, output_len=128, concurrency=64, tp=4)
    ep = estimate(MIXTRAL, hw, expert_parallel=True, **kw)  # type: ignore[arg-type]
    tp = estimate(MIXTRAL, hw, **kw)  # type: ignore[arg-type]
    assert ep.fits and ep.expert_parallel and not tp.expert_parallel
    assert ep.weights_gib_per_gpu == pytest.approx(tp.weights_gib_per_gpu)  # 8 experts / 4: same bytes
    assert ep.tpot_ms < tp.tpot_ms  # the intermediate tensors' hidden-wide part, nothing else


def test_a_dense_model_refuses_ep() -> None:
    hw = hardware_from_gpu(gpu(), 2)
    with pytest.raises(InputError, match="no routed experts"):
        estimate(LLAMA3_8B, hw, precision="bf16", input_len=512, output_len=128, concurrency=8, tp=2,
                 expert_parallel=True)


def test_llama_cpp_refuses_ep() -> None:
    with pytest.raises(InputError, match="expert parallelism"):
        estimate(MIXTRAL, hardware_from_gpu(gpu(), 1), precision="q4_0", engine="llama.cpp", input_len=512,
                 output_len=128, concurrency=1, expert_parallel=True)


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(["estimate", *args])
        raise SystemExit(0)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out + err


def test_cli_estimate_expert_parallel(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--model", "qwen3-30b-a3b", "--precision", "bf16", "--gpu", "h100-sxm-80gb", "--gpus", "2",
            "--input-len", "512", "--output-len", "128", "--concurrency", "32"]
    code, out = _run([*args, "--expert-parallel"], capsys)
    assert code == 0, out
    assert "tp=2 (expert parallel) pp=1" in out
    code, out = _run([*args, "--expert-parallel", "--format", "json"], capsys)
    assert json.loads(out)["parallelism"] == {"tp": 2, "pp": 1, "nodes": 1, "expert_parallel": True}
    code, out = _run([*args, "--format", "json"], capsys)
    assert json.loads(out)["parallelism"]["expert_parallel"] is False
    code, out = _run(["--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm-80gb", "--gpus", "2",
                      "--input-len", "512", "--output-len", "128", "--concurrency", "8", "--expert-parallel"], capsys)
    assert code == 2 and "no routed experts" in out


def test_the_ep_rows_are_predicted_with_ep_and_kept_out_of_fits_and_bands() -> None:
    """EX0051-EX0054 (gpustack's Qwen3-235B-FP8 pages, vLLM 0.11.0, --enable-expert-parallel): estimate() with
    expert_parallel=True; fit() (evaluate_all filtered by engine) never sees them, and no band or p90 factor counts
    them."""
    from benchmarks import accuracy

    rows = {r["id"]: r for r in accuracy.read_rows()}
    ep_ids = [i for i, r in rows.items() if accuracy.is_expert_parallel_check(r)]
    assert ep_ids == ["EX0051", "EX0052", "EX0053", "EX0054"]
    assert not any(accuracy.is_current_vllm_check(rows[i]) for i in ep_ids)
    assert not {o.row_id for o in accuracy.evaluate_all(("vLLM",))[0]} & set(ep_ids)
    outcomes = [accuracy.evaluate_row(rows[i]) for i in (*ep_ids, "EX0030", "EX0032")]
    assert all(not isinstance(o, str) for o in outcomes), outcomes
    assert {o.regime for o in outcomes[:4]} == {accuracy.EXPERT_PARALLEL_REGIME}  # type: ignore[union-attr]
    assert accuracy.EXPERT_PARALLEL_REGIME not in accuracy.bands(outcomes)  # type: ignore[arg-type]
    lines = accuracy.expert_parallel_report(outcomes)  # type: ignore[arg-type]
    text = "\n".join(lines)
    # the page's own figures: TP4+EP 3376.99 vs TP4 3592.57 tok/s (H100), 1332.94 vs 1428.16 (A100)
    assert "EP / tp: measured 0.940" in text and "EP / tp: measured 0.933" in text
    assert text.count("no tp twin") == 2  # the tp 8 FP8 runs: tp 8 alone refuses the checkpoint's blocks


# ---------------------------------------------------------------- the planner


def _q235_fp8():  # type: ignore[no-untyped-def]
    """Qwen3-235B-A22B as its block-FP8 checkpoint (-FP8 repo: weight_block_size [128, 128]): at tp 8 an expert's
    1536 / 8 = 192 rows split the 128 x 128 blocks, which Ampere cannot refine (compat.yaml fp8-block-experts);
    gpustack's A100 page served it with `-tp 8 --enable-expert-parallel` (EX0054)."""
    from infragen.catalog.models import load_model_registry

    return load_model_registry()["qwen3-235b-a22b"].model_copy(update={"weight_block_size": (128, 128),
                                                                      "id": "q235-fp8"})


def _a100x8():  # type: ignore[no-untyped-def]
    from infragen.catalog import load_catalog

    return hardware_from_gpu(load_catalog().accelerator("a100-80gb"), 8)


def test_ep_lifts_the_expert_width_rules_only() -> None:
    from infragen.catalog.compat import load_compat, tp_check

    lifted = {r.id for r in load_compat().tp_rules if r.lifted_by_expert_parallel}
    assert lifted == {"expert-width", "fp8-block-experts"}  # whole experts: no expert slice to divide
    acc = _a100x8().accelerator
    model = _q235_fp8()
    assert tp_check(model, 8, weight_block_size=(128, 128), acc=acc).rule == "fp8-block-experts"
    assert tp_check(model, 8, weight_block_size=(128, 128), acc=acc, expert_parallel=True).problem is None
    # attention heads are still tp-sharded under EP: 64 heads over tp 3 stays refused
    assert tp_check(model, 3, expert_parallel=True).rule == "attention-heads"


def test_estimate_serves_the_block_fp8_checkpoint_at_tp8_with_ep() -> None:
    kw = dict(precision="fp8", tp=8, input_len=217, output_len=197, concurrency=None)
    refused = estimate(_q235_fp8(), _a100x8(), **kw)  # type: ignore[arg-type]
    assert not refused.fits and "fp8-block-experts" in (refused.reason or "")
    ep = estimate(_q235_fp8(), _a100x8(), expert_parallel=True, **kw)  # type: ignore[arg-type]
    assert ep.fits and ep.expert_parallel


def _spec(**kw: object):  # type: ignore[no-untyped-def]
    from tests.sizing.conftest import qwen3_235b_fp8_p4de_spec

    return qwen3_235b_fp8_p4de_spec(**kw)


def test_the_planner_plans_ep_where_tp_cannot_shard_the_experts_only() -> None:
    """Every tp > 1 layout of a MoE model on vLLM gets an expert-parallel twin (engines.yaml expert_parallel); it is
    planned only where plain tp is refused by a rule EP lifts: where both run, the published pairs measured EP
    slower (EX0051 / EX0052: 0.94 / 0.93 of tp) while the model says 2-3 % faster."""
    from infragen.catalog import load_catalog
    from infragen.sizing.search import search

    result = search(_spec(), _q235_fp8(), load_catalog())
    by = {(c.sizing.layout.tp, c.sizing.layout.expert_parallel): c for c in result.candidates}
    assert {(8, False), (8, True), (4, False), (4, True), (2, True)} <= set(by)
    assert (1, True) not in by  # vLLM does not turn EP on at tp 1
    assert "fp8-block-experts" in (by[(8, False)].rejected or "")
    assert by[(8, True)].rejected is None or "fp8-block" not in by[(8, True)].rejected
    assert by[(8, True)].sizing.estimate is not None and by[(8, True)].sizing.estimate.expert_parallel
    why = by[(4, True)].rejected or ""
    assert why.startswith("expert parallel: plain tp 4 serves this layout") and "EX0051" in why


def test_dense_models_get_no_ep_layouts() -> None:
    from infragen.catalog import load_catalog
    from infragen.catalog.models import load_model_registry
    from infragen.sizing.search import search

    spec = _spec(model="llama-3.1-70b", precision=["bf16"])
    result = search(spec, load_model_registry()["llama-3.1-70b"], load_catalog())
    assert result.candidates and not any(c.sizing.layout.expert_parallel for c in result.candidates)


def test_a_plan_with_ep_renders_the_flag_and_records_it() -> None:
    """8 x A100 80GB (p4de): tp 4 serves the block-FP8 checkpoint (384-row expert slices), tp 8 only with EP; the
    node holds two tp 4 engines or one tp 8 EP engine at the same price, and the tp 8 engine's lower TTFT wins."""
    from infragen.catalog import load_catalog
    from infragen.report import _rows
    from infragen.sizing import plan_workload

    plan = plan_workload(_spec(), catalog=load_catalog(), model=_q235_fp8(), workload_name="ep")
    d = plan.deployment
    assert (d.tp, d.expert_parallel, d.replicas_per_node) == (8, True, 1)
    argv = list(plan.engine.argv)
    assert argv.count("--enable-expert-parallel") == 1 and argv[argv.index("--tensor-parallel-size") + 1] == "8"
    assert json.loads(plan.to_json())["deployment"]["expert_parallel"] is True
    assert _rows(plan)[0][5] == "8+EP/1"
    assert "tp=8 expert-parallel" in plan.explanation[0]
    band = plan.estimate.relative_uncertainty  # EP estimates keep the many-expert band
    assert band == load_constants().uncertainty["gpu-moe-many-experts"].relative
