"""`infragen estimate`: exit codes, error text, and the JSON keys other tools read."""

from __future__ import annotations

import json

import pytest

from infragen.cli import main
from infragen.cli.estimate_cmd import estimate_document, render_table
from infragen.sizing.estimate import estimate
from infragen.sizing.hardware import hardware_from_gpu
from tests.sizing.conftest import LLAMA3_8B, LLAMA3_70B, gpu

KEYS = {
    "memory": {"weights_gib_per_gpu", "kv_cache_bytes_per_token", "kv_cache_gib_per_gpu", "kv_cache_capacity_tokens",
               "overhead_gib_per_gpu", "max_concurrency"},
    "latency": {"ttft_ms", "tpot_ms", "e2e_ms"},
    "throughput": {"output_tokens_per_s", "requests_per_s"},
    "uncertainty": {"relative"},
}


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["estimate", *args])
        raise SystemExit(0)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_document_has_the_promised_keys() -> None:
    hw = hardware_from_gpu(gpu(), 1)
    doc = estimate_document(
        estimate(LLAMA3_8B, hw, precision="bf16", input_len=100, output_len=100, concurrency=4), hw, "llama-3-8b"
    )
    assert doc["fits"] is True and doc["reason"] is None
    for section, keys in KEYS.items():
        assert keys <= set(doc[section]), section
    assert doc["memory"]["kv_cache_bytes_per_token"] == 131_072
    json.dumps(doc)
    assert "TTFT" in render_table(doc)


def test_not_fitting_document_carries_the_reason() -> None:
    hw = hardware_from_gpu(gpu(memory_gib=24.0), 2)
    doc = estimate_document(
        estimate(LLAMA3_70B, hw, precision="bf16", tp=2, input_len=100, output_len=100, concurrency=1), hw, "x"
    )
    assert doc["fits"] is False and "131.4 GiB" in doc["reason"]
    assert "does not fit" in render_table(doc)


def test_two_hardware_options_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["--model", "m", "--precision", "bf16", "--gpu", "h100", "--instance", "p5.48xlarge",
                         "--input-len", "1", "--output-len", "1", "--concurrency", "1"], capsys)
    assert code == 2 and "exactly one of" in err


def test_bad_concurrency_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["--model", "m", "--precision", "bf16", "--gpu", "h100", "--input-len", "1",
                         "--output-len", "1", "--concurrency", "lots"], capsys)
    assert code == 2 and "--concurrency" in err


@pytest.mark.parametrize("option, value", [("--pp", "0"), ("--pp", "-1"), ("--tp", "0"), ("--nodes", "0")])
def test_a_parallel_size_below_1_exits_2(capsys: pytest.CaptureFixture[str], option: str, value: str) -> None:
    # --pp 0 divided by zero (exit 70, "a bug in infragen") before it reached the engine's own check
    code, _, err = _run(["--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "8",
                         "--input-len", "100", "--output-len", "10", "--concurrency", "1", option, value], capsys)
    assert code == 2 and option in err and "bug" not in err


@pytest.mark.parametrize("load", [["--concurrency", "4"], ["--rate", "2"]])
@pytest.mark.parametrize("option, value, needle", [
    # each was accepted, exit 0: 0 read as "the default" (`value or default`), nan compared false, and a
    # --max-model-len shorter than the request was checked only against the KV cache and then reported as 131072
    ("--max-num-seqs", "0", "--max-num-seqs"),
    ("--max-num-batched-tokens", "0", "--max-num-batched-tokens"),
    ("--max-model-len", "0", "--max-model-len"),
    ("--max-model-len", "-1", "--max-model-len"),
    ("--max-model-len", "50", "--max-model-len 50 is shorter than a request of 100 + 10 tokens"),
    ("--gpu-memory-utilization", "nan", "gpu_memory_utilization must be in (0, 1]"),
])
def test_a_meaningless_engine_setting_exits_2(capsys: pytest.CaptureFixture[str], load: list[str], option: str,
                                              value: str, needle: str) -> None:
    if option.startswith("--max-num") and load[0] == "--concurrency":
        pytest.skip("those go with --rate")
    code, _, err = _run(["--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1",
                         "--input-len", "100", "--output-len", "10", *load, option, value], capsys)
    assert code == 2 and needle in err and "bug" not in err


def test_json_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--model", "llama-3.1-8b", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1",
                         "--input-len", "500", "--output-len", "100", "--concurrency", "max", "--format", "json"],
                        capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["fits"] is True and doc["memory"]["kv_cache_bytes_per_token"] == 131_072
    assert doc["concurrency"] == doc["memory"]["max_concurrency"] == 256
    assert doc["latency"]["ttft_ms"] > 0 and doc["throughput"]["output_tokens_per_s"] > 0


def test_does_not_fit_exits_0_with_reason(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--model", "llama-3.1-70b", "--precision", "bf16", "--gpu", "h100-sxm", "--gpus", "1",
                         "--input-len", "500", "--output-len", "100", "--concurrency", "1"], capsys)
    assert code == 0 and "does not fit" in out and "weights need" in out
