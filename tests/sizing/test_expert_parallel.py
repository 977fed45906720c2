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
from infragen.sizing.estimate import estimate
from infragen.sizing.hardware import hardware_from_gpu
from infragen.sizing.memory import linear_bytes_per_weight, param_groups
from infragen.sizing.performance import gpu_figures, gpu_setup, stage_step_s, tp_comm_s
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
def test_even_ep_step_time_is_tp_time_less_the_intermediate_traffic(engine: str) -> None:
    """Same touched bytes and padded FLOPs per GPU when EP divides E (uniform routing): EP is never slower here,
    and without the intermediate-tensor term (engines without the measured kernel) exactly as fast."""
    for tokens in (1.0, 64.0, 4096.0):
        ep = stage_step_s(_setup(MIXTRAL, 4, True, engine=engine), tokens, 500.0, 0.0, 0.0)
        tp = stage_step_s(_setup(MIXTRAL, 4, False, engine=engine), tokens, 500.0, 0.0, 0.0)
        if engine == "vllm":
            assert ep <= tp
        else:
            assert ep == pytest.approx(tp)


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
