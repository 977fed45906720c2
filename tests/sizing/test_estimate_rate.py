"""`infragen estimate --rate`: the open-loop answer, its JSON, exit 3 past capacity, exit 2 on bad options."""

from __future__ import annotations

import json

import pytest

from infragen.catalog import load_catalog
from infragen.cli import main
from infragen.sizing.constants import load_constants
from infragen.sizing.load_estimate import vllm_default_scheduler

A100 = ["--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "a100-80gb", "--gpus", "1",
        "--input-len", "1024", "--output-len", "256"]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["estimate", *args])
        raise SystemExit(0)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_rate_prints_ttft_percentiles_and_tpot(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run([*A100, "--rate", "4"], capsys)
    assert code == 0, out
    for text in ("TTFT p50 / p90 / p99", "TPOT", "running batch", "capacity", "max_num_batched_tokens 2048"):
        assert text in out


def test_rate_json_is_consistent(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run([*A100, "--rate", "2", "--format", "json"], capsys)
    assert code == 0
    doc = json.loads(out)
    load = doc["load"]
    ttft = load["ttft_ms"]
    assert 0 < ttft["p50"] <= ttft["p90"] <= ttft["p99"]
    assert load["stable"] and 0 < load["utilisation"] < 1 and load["running_batch"] > 0
    assert load["scheduler"] == {"max_num_seqs": 256, "max_num_batched_tokens": 2048,
                                 "source": "vLLM 0.34.0 defaults"}
    assert doc["throughput"]["requests_per_s"] == 2 and doc["throughput"]["output_tokens_per_s"] == 512
    # Little's law ties the running batch to the rate and the time in the batch
    assert load["running_batch"] == pytest.approx(2 * load["e2e_ms"]["mean"] / 1e3, rel=0.15)
    assert load["capacity_per_s"] > 2


def test_more_rate_means_a_larger_batch_and_slower_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    docs = []
    for rate in ("1", "3"):
        code, out, _ = _run([*A100, "--rate", rate, "--format", "json"], capsys)
        assert code == 0
        docs.append(json.loads(out))
    lo, hi = docs
    assert hi["load"]["running_batch"] > lo["load"]["running_batch"]
    assert hi["latency"]["tpot_ms"] > lo["latency"]["tpot_ms"]
    assert hi["load"]["ttft_ms"]["p99"] > lo["load"]["ttft_ms"]["p99"]


def test_rate_past_capacity_exits_3_with_the_capacity(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run([*A100, "--rate", "100"], capsys)
    assert code == 3
    assert "exceed the capacity" in err and "requests/s" in err and "grows without bound" in err


@pytest.mark.parametrize("extra", [[], ["--rate", "1", "--concurrency", "4"]])
def test_exactly_one_of_rate_and_concurrency(capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    code, _, err = _run([*A100, *extra], capsys)
    assert code == 2 and "exactly one of --concurrency" in err


@pytest.mark.parametrize("rate", ["0", "-1", "nan", "inf"])
def test_bad_rate_exits_2(capsys: pytest.CaptureFixture[str], rate: str) -> None:
    code, _, err = _run([*A100, "--rate", rate], capsys)
    assert code == 2 and "--rate" in err


def test_scheduler_flags_need_rate(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run([*A100, "--concurrency", "4", "--max-num-seqs", "8"], capsys)
    assert code == 2 and "go with --rate" in err


def test_fewer_slots_queue_sooner(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run([*A100, "--rate", "2", "--max-num-seqs", "8", "--format", "json"], capsys)
    assert code == 3 or json.loads(out)["load"]["slot_wait_probability"] > 0.1


def test_vllm_0_34_defaults_by_gpu() -> None:
    """EngineArgs.get_batch_defaults of vLLM 0.34.0 (`vllm serve`): by total memory, A100s kept small."""
    cat = load_catalog()
    h100, a100, l4 = cat.accelerator("h100-sxm"), cat.accelerator("a100-80gb"), cat.accelerator("l4")
    assert vllm_default_scheduler(h100, h100.usable_memory_gib)[:2] == (1024, 8192)
    assert vllm_default_scheduler(a100, a100.usable_memory_gib)[:2] == (256, 2048)
    assert vllm_default_scheduler(l4, l4.usable_memory_gib)[:2] == (256, 2048)
    assert vllm_default_scheduler(h100, 180.0)[:2] == (1024, 16384)
    known = set(cat.accelerators)
    for tier in load_constants().vllm_scheduler_defaults.tiers:
        assert set(tier.except_gpus) <= known


CPU = ["--model", "llama-3.1-8b", "--precision", "q4_0", "--instance", "c7i.4xlarge", "--input-len", "100",
       "--output-len", "100"]


def test_llama_cpp_rate_uses_llama_server_slots_and_batch_size(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run([*CPU, "--rate", "0.2", "--format", "json"], capsys)
    assert code == 0, out
    doc = json.loads(out)
    load = doc["load"]
    assert doc["engine"] == "llama.cpp" and load["stable"]
    # the slots infragen's plan renders (--parallel: what the RAM holds, at most 16) and llama-server's default
    assert load["scheduler"]["max_num_seqs"] == 16 and load["scheduler"]["max_num_batched_tokens"] == 2048
    assert 0 < load["ttft_ms"]["p50"] <= load["ttft_ms"]["p90"] <= load["ttft_ms"]["p99"]
    assert doc["regime"] in ("cpu-generation", "cpu-prompt")
    code, out, _ = _run([*CPU, "--rate", "0.2"], capsys)
    assert code == 0 and "16 slots (--parallel), --batch-size 2048" in out and "weights in RAM" in out


def test_llama_cpp_light_rate_is_one_request_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """At a trickle every request runs alone: TTFT and TPOT are the concurrency-1 estimate's."""
    code, out, _ = _run([*CPU, "--rate", "0.001", "--format", "json"], capsys)
    assert code == 0
    at_rate = json.loads(out)
    code, out, _ = _run([*CPU, "--concurrency", "1", "--format", "json"], capsys)
    alone = json.loads(out)
    assert at_rate["latency"]["tpot_ms"] == pytest.approx(alone["latency"]["tpot_ms"], rel=0.01)
    assert at_rate["load"]["ttft_ms"]["p50"] == pytest.approx(alone["latency"]["ttft_ms"], rel=0.02)


def test_llama_cpp_fewer_slots_and_past_capacity(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run([*CPU, "--rate", "0.15", "--max-num-seqs", "2", "--format", "json"], capsys)
    assert code == 0
    two = json.loads(out)["load"]
    assert two["scheduler"]["max_num_seqs"] == 2 and two["slot_wait_probability"] > 0
    code, _, err = _run([*CPU, "--rate", "50"], capsys)
    assert code == 3 and "exceed the capacity" in err


def test_llama_cpp_closed_loop_throughput_is_within_the_open_loop_capacity(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Every slot re-prompts after its output: the other slots' prompts ride in each of a request's steps, so the
    closed loop at all slots cannot serve more requests/s than the open loop's capacity (the same server)."""
    code, out, _ = _run([*CPU, "--concurrency", "max", "--format", "json"], capsys)
    assert code == 0
    closed = json.loads(out)["throughput"]["requests_per_s"]
    code, out, _ = _run([*CPU, "--rate", "0.01", "--format", "json"], capsys)
    capacity = json.loads(out)["load"]["capacity_per_s"]
    assert closed == pytest.approx(capacity, rel=0.15)
