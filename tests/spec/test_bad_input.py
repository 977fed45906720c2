"""Every kind of bad workload file: exit 2, one `Error:` paragraph naming the file and the field, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from infragen.cli import cli as click_group
from infragen.spec import load_spec
from tests.spec.conftest import run_cli

GOOD = "model: qwen2-7b\ntraffic:\n  peak_requests_per_s: 5\n"
USERS = "model: qwen2-7b\ntraffic:\n  concurrent_users: {}\n"


def _write(tmp_path: Path, text: str, name: str = "workload.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _fails(tmp_path: Path, text: str) -> str:
    path = _write(tmp_path, text)
    r = run_cli("validate", str(path))
    assert r.code == 2, (r.out, r.err)
    assert "Traceback" not in r.err + r.out
    assert r.err.startswith(f"Error: {path}: ")
    assert r.out == ""
    first = r.err.splitlines()[0]
    return first


def test_good_file_passes(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    r = run_cli("validate", str(path))
    assert r.code == 0 and "ok (Qwen2-7B" in r.out


def test_malformed_yaml_names_line_and_column(tmp_path: Path) -> None:
    line = _fails(tmp_path, "model: qwen2-7b\ntraffic:\n  peak_requests_per_s: 5\n   prompt_tokens: 3\n")
    assert "malformed YAML at line 4, column 17" in line


def test_tab_indentation_and_unclosed_bracket(tmp_path: Path) -> None:
    assert "malformed YAML at line 2" in _fails(tmp_path, "model: qwen2-7b\n\ttraffic: {}\n")
    assert "malformed YAML at line" in _fails(tmp_path, "model: [qwen2-7b\ntraffic: 1\n")


def test_duplicate_key_is_refused_with_both_lines(tmp_path: Path) -> None:
    line = _fails(tmp_path, "model: qwen2-7b\nmodel: qwen2-72b\ntraffic:\n  concurrent_users: 3\n")
    assert "line 2, column 1: duplicate key 'model' (first given on line 1)" in line


def test_unknown_top_level_field_did_you_mean(tmp_path: Path) -> None:
    line = _fails(tmp_path, "model: qwen2-7b\ntrafic:\n  peak_requests_per_s: 5\n")
    assert "trafic: unknown field; did you mean 'traffic'?" in line
    assert "required field missing" not in line  # the misspelling explains the missing field


def test_unknown_field_without_a_close_name_lists_what_is_allowed_as_a_sentence(tmp_path: Path) -> None:
    """A field with no close name ('constraints', from other tools' specs) still reads as two sentences."""
    line = _fails(tmp_path, GOOD + "constraints:\n  x: 1\n")
    assert "constraints: unknown field. Allowed here: " in line and "instance_families" in line


def test_unknown_nested_field_did_you_mean(tmp_path: Path) -> None:
    line = _fails(tmp_path, GOOD + "  promt_tokens: 100\n")
    assert "traffic.promt_tokens: unknown field; did you mean 'prompt_tokens'?" in line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD.replace("5", "fast"), "traffic.peak_requests_per_s: Input should be a valid number, found str 'fast'"),
        (USERS.format("true"), "traffic.concurrent_users: Input should be a valid integer, found bool True"),
        (USERS.format("2.5"), "traffic.concurrent_users: Input should be a valid integer"),
        ("model: qwen2-7b\ntraffic: 5\n", "traffic: expected a mapping of fields"),
        ("model: 5\ntraffic:\n  concurrent_users: 3\n", "model: expected a registry name"),
        (GOOD + "allow_multi_node: maybe\n", "allow_multi_node: Input should be a valid boolean, found str 'maybe'"),
        (GOOD + "regions: {us: 1}\n", "regions: Input should be a valid list"),
        (GOOD + "engine: vlm\n", "engine: 'vlm' is not allowed; did you mean 'vllm'?"),
        (GOOD + "precision: bf17\n", "precision[0]: 'bf17' is not allowed; did you mean 'bf16'?"),
        (GOOD + "cloud: azure\n", "cloud: 'azure' is not allowed"),
    ],
)
def test_wrong_type(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in _fails(tmp_path, text)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (GOOD.replace("5", "0"), "traffic.peak_requests_per_s: Input should be greater than 0, found 0"),
        (USERS.format("-3"), "traffic.concurrent_users: Input should be greater than 0"),
        (GOOD + "  prompt_tokens: 0\n", "traffic.prompt_tokens: Input should be greater than 0"),
        (GOOD + "  output_tokens: -1\n", "traffic.output_tokens: Input should be greater than 0"),
        (GOOD + "slo:\n  ttft_p99_ms: 0\n", "slo.ttft_p99_ms: Input should be greater than 0"),
        (GOOD + "slo:\n  tpot_ms: -5\n", "slo.tpot_ms: Input should be greater than 0"),
        (GOOD + "min_replicas: 0\n", "min_replicas: Input should be greater than 0"),
        (GOOD + "budget_usd_per_month: -100\n", "budget_usd_per_month: Input should be greater than 0"),
        (GOOD + "budget_usd_per_month: .inf\n", "budget_usd_per_month: Input should be a finite number"),
        (GOOD + "port: 80\n", "port: Input should be greater than or equal to 1024"),
    ],
)
def test_zero_negative_and_out_of_range(tmp_path: Path, text: str, field: str) -> None:
    assert field in _fails(tmp_path, text)


def test_unknown_model_did_you_mean(tmp_path: Path) -> None:
    path = _write(tmp_path, "model: qwen2-7bb\ntraffic:\n  concurrent_users: 3\n")
    r = run_cli("validate", str(path))
    assert r.code == 2 and "Traceback" not in r.err
    assert r.err.startswith(f"Error: {path}: model: unknown model 'qwen2-7bb'; did you mean 'qwen2-7b'")
    assert "Hint: known models:" in r.err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("engine: llama.cpp\nprecision: fp8\n", "precision: llama.cpp cannot load 'fp8' weights"),
        ("engine: vllm\nprecision: q4_k_m\n", "precision: 'q4_k_m' is a GGUF quant type, which infragen serves with"),
        ("engine: llama.cpp\nprecision: q4_k_m\nkv_cache_dtype: fp8\n", "kv_cache_dtype: fp8 is a vLLM option"),
        ("precision: [q4_k_m, q8_0]\nkv_cache_dtype: fp8\n", "kv_cache_dtype: fp8 is a vLLM option, but every listed"),
        ("instance_families:\n  allow: [g6e]\n  deny: [g6e]\n", "instance_families: ['g6e'] both allowed and denied"),
        ("precision: []\n", "precision: list at least one precision"),
        ("precision: int4-awq\n", "weights: precision int4-awq needs a pre-quantized checkpoint"),
        ("precision: q4_k_m\nweights: TheBloke/X-AWQ\n", "weights: precision q4_k_m is GGUF, so weights must name"),
        ("precision: bf16\nweights: a/b/c.gguf\n", "weights: 'a/b/c.gguf' is a GGUF file but no GGUF precision"),
        ("weights: not a repo\n", "weights: 'not a repo' is not a Hugging Face repo id"),
    ],
)
def test_contradictory_settings(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in _fails(tmp_path, GOOD + text)


def test_both_load_measures(tmp_path: Path) -> None:
    line = _fails(tmp_path, GOOD + "  concurrent_users: 4\n")
    assert "traffic.concurrent_users: give only one of `peak_requests_per_s`" in line


def test_no_load_measure(tmp_path: Path) -> None:
    line = _fails(tmp_path, "model: qwen2-7b\ntraffic:\n  prompt_tokens: 100\n")
    assert "traffic.peak_requests_per_s: give `peak_requests_per_s` or `concurrent_users`" in line


def test_max_context_below_prompt_plus_output(tmp_path: Path) -> None:
    line = _fails(tmp_path, GOOD + "  prompt_tokens: 1000\n  output_tokens: 200\n  max_context_tokens: 1000\n")
    assert "traffic.max_context_tokens: 1000 is below prompt_tokens + output_tokens (1000 + 200 = 1200)" in line


def test_max_context_beyond_the_model(tmp_path: Path) -> None:
    line = _fails(tmp_path, "model: tinyllama-1.1b\ntraffic:\n  concurrent_users: 1\n  max_context_tokens: 100000\n")
    assert "traffic.max_context_tokens: 100000 exceeds tinyllama-1.1b's context of 2048 tokens" in line


@pytest.mark.parametrize(("text", "kind"), [("", "empty"), ("- a\n- b\n", "list"), ("just a string\n", "str")])
def test_top_level_not_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    assert f"expected a mapping of workload fields at the top level, found {kind}" in _fails(tmp_path, text)


def test_missing_and_directory_paths(tmp_path: Path) -> None:
    r = run_cli("validate", str(tmp_path / "nope.yaml"))
    assert r.code == 2 and r.err.strip() == f"Error: {tmp_path / 'nope.yaml'}: file not found"
    r = run_cli("validate", str(tmp_path))
    assert r.code == 2 and "is a directory" in r.err


def test_bad_config_json_model(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text('{"model_type": "gpt2"}')
    line = _fails(tmp_path, "model: m/config.json\ntraffic:\n  concurrent_users: 3\n")
    assert "config.json: model_type: 'gpt2' is not supported" in line


def test_config_json_model_resolves(tmp_path: Path) -> None:
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs" / "qwen3-8b.json"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(fixture.read_text())
    # The fixture has no `_name_or_path: org/name`, so the repo to download from is given as `weights`.
    path = _write(tmp_path, "model: m/config.json\nweights: Qwen/Qwen3-8B\ntraffic:\n  concurrent_users: 3\n")
    r = run_cli("validate", str(path))
    assert r.code == 0, r.err


def test_model_without_a_repo_needs_weights(tmp_path: Path) -> None:
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs" / "qwen3-8b.json"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(fixture.read_text())
    # It used to plan `vllm serve m` from a repo named after the folder, which no node can download.
    line = _fails(tmp_path, "model: m/config.json\ntraffic:\n  concurrent_users: 3\n")
    assert "weights: m names no Hugging Face repo to download" in line


def test_explicit_architecture_accepted(tmp_path: Path) -> None:
    text = (
        "model:\n  hidden_size: 2048\n  num_layers: 16\n  num_attention_heads: 16\n  intermediate_size: 8192\n"
        "  vocab_size: 32000\nweights: org/custom-model\ntraffic:\n  concurrent_users: 3\n"
    )
    r = run_cli("validate", str(_write(tmp_path, text)))
    assert r.code == 0, r.err


def test_single_string_lists_and_case(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, GOOD + "precision: BF16\nregions: us-east-1\n"))
    assert spec.precision == ["bf16"] and spec.regions == ["us-east-1"]


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    path = _write(tmp_path, "model: qwen2-7b\n")
    from infragen.errors import InputError

    with pytest.raises(InputError):
        run_cli("--debug", "validate", str(path))


def test_click_runner_usage_error_exit_2() -> None:
    result = CliRunner().invoke(click_group, ["validate"])
    assert result.exit_code == 2 and "Missing argument" in result.output


def test_non_string_key_and_folder_without_config(tmp_path: Path) -> None:
    assert "line 4, column 1: field names must be text, found int 1" in _fails(tmp_path, GOOD + "1: 2\n")
    (tmp_path / "empty").mkdir()
    assert "is a folder without a config.json" in _fails(tmp_path, "model: ./empty\ntraffic:\n  concurrent_users: 1\n")


def test_console_entry_point_exit_2_without_traceback(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = _write(tmp_path, "model: qwen2-7b\ntraffic:\n  peak_requests_per_s: -1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "infragen", "validate", str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"Error: {path}: traffic.peak_requests_per_s: Input should be greater than 0")


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("  num_kv_heads: 3\n", "model.num_kv_heads: 3 must divide num_attention_heads (4)"),
        ("  hidden_size: true\n", "model.hidden_size: expected a number, found True"),
        ("  num_experts: 4\n  num_experts_per_token: 5\n", "model.num_experts_per_token: must be between 1 and"),
        ("  num_shared_experts: 1\n", "model.num_experts: expert settings are given but num_experts is 0"),
        ("  kv_lora_rank: 16\n", "model.kv_lora_rank: MLA needs qk_rope_head_dim"),
        ("  yarn_factor: 4\n", "model.yarn_factor: give yarn_factor and original_max_position_embeddings"),
        ("  hidden_sise: 64\n", "model.hidden_sise: unknown field; did you mean 'hidden_size'?"),
    ],
)
def test_explicit_architecture_mistakes(tmp_path: Path, extra: str, expected: str) -> None:
    base = {"hidden_size": "64", "num_layers": "2", "num_attention_heads": "4", "intermediate_size": "8",
            "vocab_size": "8"}
    lines = [f"  {k}: {v}\n" for k, v in base.items() if f"  {k}:" not in extra]
    text = "model:\n" + "".join(lines) + extra + "traffic:\n  concurrent_users: 1\n"
    assert expected in _fails(tmp_path, text)


def test_yaml_merge_key_override_is_not_a_duplicate(tmp_path: Path) -> None:
    text = "x-base: &base\n  concurrent_users: 4\n"  # an unknown top-level key, so only check the parse
    from infragen.validation import parse_yaml_text

    data = parse_yaml_text(text + "traffic:\n  <<: *base\n  concurrent_users: 8\n", "w.yaml")
    assert data["traffic"] == {"concurrent_users": 8}
