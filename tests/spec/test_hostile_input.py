"""Regression tests for each cause of issue #21 (a fuzzing run): hostile workload, config.json and plan files
exit 2 with one paragraph, quickly, and never reach a script.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.spec.conftest import run_cli

GOOD = "model: qwen2-7b\ntraffic:\n  peak_requests_per_s: 5\n"
ARCH = """model:
  id: {id}
  hidden_size: 4096
  num_layers: 32
  num_attention_heads: 32
  intermediate_size: 14336
  vocab_size: 128256
traffic:
  concurrent_users: 4
"""


def _refused(tmp_path: Path, text: str, *, command: str = "validate", seconds: float = 5.0) -> str:
    path = tmp_path / "workload.yaml"
    path.write_text(text)
    start = time.perf_counter()
    r = run_cli(command, str(path))
    elapsed = time.perf_counter() - start
    assert r.code == 2, (r.code, r.out, r.err[:2000])
    assert "Traceback" not in r.err
    assert r.err.startswith(f"Error: {path}: ")
    assert len(r.err) < 4000, f"message of {len(r.err)} characters"
    assert elapsed < seconds, f"took {elapsed:.1f} s"
    return r.err


# --- numbers: huge, infinite, long integers ------------------------------------------------------------------


def test_integer_beyond_pythons_digit_limit_is_refused_by_the_loader(tmp_path: Path) -> None:
    err = _refused(tmp_path, "model: qwen2-7b\ntraffic:\n  concurrent_users: " + "9" * 5000 + "\n")
    assert "line 3, column 21: an integer of 5000 digits" in err


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("peak_requests_per_s", "1.0e+308"),
        ("concurrent_users", "9" * 401),
        ("concurrent_users", "123456789012345678901234567"),
        ("prompt_tokens", "1000000000000"),
    ],
)
def test_overflowing_traffic_figures_exit_2_from_plan(tmp_path: Path, field: str, value: str) -> None:
    text = f"model: qwen2-7b\ntraffic:\n  {field}: {value}\n" + (
        "  concurrent_users: 1\n" if field == "prompt_tokens" else "")
    _refused(tmp_path, text, command="plan")


def test_min_replicas_huge_exits_2(tmp_path: Path) -> None:
    _refused(tmp_path, GOOD + "min_replicas: " + "9" * 25 + "\n", command="plan")


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "1e999"])
def test_non_finite_numbers_are_refused(tmp_path: Path, value: str) -> None:
    err = _refused(tmp_path, f"model: qwen2-7b\ntraffic:\n  peak_requests_per_s: {value}\n")
    assert "traffic.peak_requests_per_s" in err


def test_architecture_figures_are_bounded(tmp_path: Path) -> None:
    text = ARCH.format(id="custom").replace("num_layers: 32", "num_layers: 10000000000000")
    assert "num_layers" in _refused(tmp_path, text, command="plan")


# --- YAML structure: aliases, nesting, sizes, keys -----------------------------------------------------------


def _bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + f"\nmodel: qwen2-7b\ntraffic:\n  peak_requests_per_s: *a{levels - 1}\n"


def test_alias_bomb_is_refused_quickly_with_a_short_message(tmp_path: Path) -> None:
    text = _bomb(9)
    assert len(text) < 600  # the reported ~450-byte bomb
    err = _refused(tmp_path, text, seconds=2.0)
    assert "aliases expand to more than" in err or "more than 100 aliases" in err


def test_recursive_alias_is_refused(tmp_path: Path) -> None:
    err = _refused(tmp_path, "x: &a [*a]\n" + GOOD)
    assert "line 1" in err


def test_merge_key_still_works(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("base: &b {prompt_tokens: 100}\n".replace("base", "x-base") + GOOD)
    # Unknown top-level `x-base` is refused as a field, but the anchor/alias machinery itself is fine:
    r = run_cli("validate", str(path))
    assert r.code == 2 and "x-base: unknown field" in r.err


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    err = _refused(tmp_path, GOOD + "slo: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested" in err


def test_twenty_thousand_unknown_keys_are_refused_quickly(tmp_path: Path) -> None:
    text = GOOD + "".join(f"k{i}: 1\n" for i in range(20_000))
    _refused(tmp_path, text, seconds=4.0)


def test_many_unknown_keys_under_the_budget_give_a_bounded_message(tmp_path: Path) -> None:
    text = GOOD + "".join(f"k{i}: 1\n" for i in range(1_000))
    err = _refused(tmp_path, text, seconds=4.0)
    assert "(and 995 more)" in err


def test_huge_list_is_refused_quickly(tmp_path: Path) -> None:
    text = GOOD + "regions: [" + ", ".join(["us-east-1"] * 300_000) + "]\n"
    err = _refused(tmp_path, text, seconds=4.0)
    assert "bytes" in err or "more than" in err


def test_oversized_file_is_refused(tmp_path: Path) -> None:
    err = _refused(tmp_path, GOOD + "#" * (2 * 1024 * 1024) + "\n")
    assert "may be at most" in err


def test_device_file_is_refused(tmp_path: Path) -> None:
    r = run_cli("validate", "/dev/zero")
    assert r.code == 2 and "not a regular file" in r.err


@pytest.mark.parametrize("key", ["yes", "on", "1", "3.5", "null", "[a, b]"])
def test_non_string_keys_are_refused_with_the_line(tmp_path: Path, key: str) -> None:
    err = _refused(tmp_path, GOOD + f"{key}: 1\n" if not key.startswith("[") else GOOD + f"? {key}\n: 1\n")
    assert "line 4" in err


def test_control_characters_in_the_name_are_refused(tmp_path: Path) -> None:
    assert "name" in _refused(tmp_path, GOOD + 'name: "a\\nb"\n')


# --- values that would reach scripts -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["$(touch /tmp/pwned)", "a`id`", "a;b", "a b", "-rf", "a'b", 'a"b', "../x", "x" * 64])
def test_hostile_workload_names_are_refused(tmp_path: Path, name: str) -> None:
    err = _refused(tmp_path, GOOD + f"name: {json.dumps(name)}\n")
    assert "name" in err and "not a valid workload name" in err


def test_hostile_file_stem_is_refused_when_there_is_no_name(tmp_path: Path) -> None:
    path = tmp_path / "$(reboot).yaml"
    path.write_text(GOOD)
    r = run_cli("plan", str(path))
    assert r.code == 2 and "set `name:`" in r.err


@pytest.mark.parametrize("model_id", ["$(id)", "a/../../etc", "-x", "a b"])
def test_hostile_explicit_model_ids_are_refused(tmp_path: Path, model_id: str) -> None:
    err = _refused(tmp_path, ARCH.format(id=json.dumps(model_id)))
    assert "model id" in err


@pytest.mark.parametrize(
    "weights",
    ["--a/b", "s3://*/*", "s3://bucket/*", "oss://b/../etc", "s3://bucket/a b", "org/name;id", "org/$(id)",
     "s3://Bucket/x", "org/name/../../x.gguf"],
)
def test_hostile_weights_are_refused(tmp_path: Path, weights: str) -> None:
    # `--a/b` used to reach the engine argv as a flag and exit 1 "internal: vllm flags not pinned".
    err = _refused(tmp_path, f"model: qwen2-7b\nweights: {json.dumps(weights)}\nprecision: bf16\n"
                   "traffic:\n  concurrent_users: 2\n", command="plan")
    assert "weights" in err


@pytest.mark.parametrize("region", ["us-east-1;id", "$(id)", "US-EAST-1", "a"])
def test_hostile_regions_are_refused(tmp_path: Path, region: str) -> None:
    assert "region" in _refused(tmp_path, GOOD + f"regions: [{json.dumps(region)}]\n")


def test_hostile_instance_family_is_refused(tmp_path: Path) -> None:
    assert "instance type" in _refused(tmp_path, GOOD + 'instance_families:\n  allow: ["g6e$(id)"]\n')


def test_concrete_bucket_and_prefix_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("model: qwen2-7b\nweights: s3://my-bucket/models/qwen2-7b/\ntraffic:\n  concurrent_users: 2\n")
    r = run_cli("validate", str(path))
    assert r.code == 0, r.err


# --- hostile config.json -------------------------------------------------------------------------------------

HF = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
      "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 8192}


def _config_refused(tmp_path: Path, text: str) -> str:
    (tmp_path / "config.json").write_text(text)
    return _refused(tmp_path, "model: config.json\ntraffic:\n  concurrent_users: 2\n", command="plan").replace(
        "\n", " ")


def test_yarn_factor_infinity_is_refused(tmp_path: Path) -> None:
    cfg = json.dumps({**HF, "rope_scaling": {"rope_type": "yarn", "factor": 1}}).replace(
        '"factor": 1', '"factor": Infinity')
    assert "Infinity" in _config_refused(tmp_path, cfg)


def test_yarn_factor_huge_is_refused(tmp_path: Path) -> None:
    cfg = json.dumps({**HF, "rope_scaling": {"rope_type": "yarn", "factor": 1e300,
                                              "original_max_position_embeddings": 10**20}})
    _config_refused(tmp_path, cfg)


def test_deeply_nested_config_is_refused(tmp_path: Path) -> None:
    cfg = json.dumps(HF)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert "nested" in _config_refused(tmp_path, cfg)


def test_huge_integers_in_config_are_refused(tmp_path: Path) -> None:
    _config_refused(tmp_path, json.dumps({**HF, "vocab_size": 10**5000}) if False else
                    json.dumps(HF).replace("128256", "9" * 5000))
    _config_refused(tmp_path, json.dumps({**HF, "hidden_size": 10**15}))


def test_duplicate_keys_in_config_are_refused(tmp_path: Path) -> None:
    assert "duplicate key" in _config_refused(tmp_path, json.dumps(HF)[:-1] + ', "hidden_size": 1}')


def test_hostile_name_or_path_in_config_is_refused_or_harmless(tmp_path: Path) -> None:
    err = _config_refused(tmp_path, json.dumps({**HF, "_name_or_path": "x/$(id)\n"}))
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "entry",
    ["{instance_type: g6e.xlarge, region: us-east-1, on_demand_usd_per_hour: 1.0e+308}",
     "{instance_type: 'g6e.xlarge;id', region: us-east-1, on_demand_usd_per_hour: 1}",
     "{instance_type: g6e.xlarge, region: '$(id)', on_demand_usd_per_hour: 1}",
     "{instance_type: g6e.xlarge, region: us-east-1, on_demand_usd_per_hour: 1, note: \"a\\nb\"}"],
)
def test_hostile_price_overrides_exit_2(tmp_path: Path, entry: str) -> None:
    # A price of 1e308 used to reach the cost arithmetic (inf x replicas x hours).
    _refused(tmp_path, GOOD + f"prices: [{entry}]\n", command="plan")


@pytest.mark.parametrize("size", ["1000000000", "999999999999"])
def test_gguf_weight_bytes_of_a_huge_architecture_never_overflow(tmp_path: Path, size: str) -> None:
    # GGUF weight bytes used to overflow (OverflowError) for absurd explicit architectures.
    text = ARCH.format(id="custom").replace("hidden_size: 4096", f"hidden_size: {size}").replace(
        "traffic:", "weights: org/model/m.Q4_K_M.gguf\nprecision: q4_k_m\nengine: llama.cpp\ntraffic:")
    path = tmp_path / "w.yaml"
    path.write_text(text)
    r = run_cli("plan", str(path))
    assert r.code in (2, 3), r.err
    assert "Traceback" not in r.err and "internal error" not in r.err
