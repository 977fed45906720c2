"""Hypothesis fuzzers for the three files users hand us (issue #21): workload YAML, config.json, plan JSON.

Each mutated file is refused with an exit-2/3 error of bounded size, or accepted; no other exception escapes.
A bounded number of examples in the normal run; INFRAGEN_FUZZ_EXAMPLES raises it (`.ci/run` runs a few hundred).
The CLI-level fuzz driver (benchmarks/fuzz_cli.py) runs here too, INFRAGEN_FUZZ_CASES files through `main()`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infragen.errors import InfragenError
from infragen.plan import _digest_of, load_plan
from tests.plan_factory import make_plan

EXAMPLES = int(os.environ.get("INFRAGEN_FUZZ_EXAMPLES", "15"))
CLI_CASES = int(os.environ.get("INFRAGEN_FUZZ_CASES", "12"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
REPO = Path(__file__).resolve().parents[2]

_numbers = st.one_of(
    st.integers(), st.integers(min_value=10**300, max_value=10**400), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 10**30, 1e308, 5e-324, -0.0]),
)
_texts = st.one_of(st.text(max_size=30), st.sampled_from(["$(id)", "`id`", "a\nb", "--x", "../..", "s3://*/*", "yes"]))
_scalars = st.one_of(st.none(), st.booleans(), _numbers, _texts)
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                          st.dictionaries(_texts, inner, max_size=4)), max_leaves=12)
_oddities = st.sampled_from(["yes", "on", "~", "0o17", "0x1F", "1_000", "1:30", ".inf", ".NaN", "2001-12-14",
                             "!!binary aGVsbG8=", "!!python/object:os.system [id]", "!!set {a, b}", "*nope", "&a [*a]",
                             "9" * 5000, "[" * 3000, "{a: " * 500 + "1" + "}" * 500])
FIELDS = ["name", "model", "weights", "precision", "engine", "cloud", "regions", "min_replicas", "port",
          "budget_usd_per_month", "traffic", "slo", "instance_families", "kv_cache_dtype", "pricing"]
TRAFFIC = ["peak_requests_per_s", "concurrent_users", "prompt_tokens", "output_tokens", "max_context_tokens"]


def _expected(exc: InfragenError) -> None:
    assert exc.exit_code in (2, 3), exc
    assert len(exc.render()) < 4000


@FUZZ
@given(field=st.sampled_from(FIELDS + [f"traffic.{t}" for t in TRAFFIC]), value=_values, raw=st.booleans(),
       oddity=_oddities)
def test_workload_files(tmp_path_factory: pytest.TempPathFactory, field: str, value: Any, raw: bool,
                        oddity: str) -> None:
    from infragen.sizing import plan_file

    doc: dict[str, Any] = yaml.safe_load((REPO / "examples" / "team-chatbot.yaml").read_text())
    top, _, sub = field.partition(".")
    if raw:  # YAML text the dumper would never write
        text = yaml.safe_dump({k: v for k, v in doc.items() if k != top}) + (
            f"{top}: {oddity}\n" if not sub else f"{top}:\n  {sub}: {oddity}\n")
    else:
        if sub:
            doc.setdefault(top, {})[sub] = value
        else:
            doc[top] = value
        try:
            text = yaml.safe_dump(doc)
        except (yaml.YAMLError, ValueError):
            return
    path = tmp_path_factory.mktemp("w") / "workload.yaml"
    path.write_text(text, errors="surrogatepass")
    try:
        plan_file(path)
    except InfragenError as exc:
        _expected(exc)


_HF = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
       "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 8192,
       "_name_or_path": "org/model"}


@FUZZ
@given(key=st.sampled_from([*list(_HF), "rope_scaling", "head_dim", "tie_word_embeddings", "sliding_window"]),
       value=_values, yarn=st.one_of(st.none(), _numbers), text_edit=st.sampled_from(["", "Infinity", "NaN", "dup"]))
def test_config_json_files(tmp_path_factory: pytest.TempPathFactory, key: str, value: Any, yarn: Any,
                           text_edit: str) -> None:
    from infragen.catalog.hf_config import load_hf_config

    cfg: dict[str, Any] = {**_HF, key: value}
    if yarn is not None:
        cfg["rope_scaling"] = {"rope_type": "yarn", "factor": yarn, "original_max_position_embeddings": 4096}
    text = json.dumps(cfg)
    if text_edit == "dup":
        text = text[:-1] + ', "hidden_size": 1}'
    elif text_edit:
        text = text[:-1] + f', "x": {text_edit}}}'
    path = tmp_path_factory.mktemp("c") / "config.json"
    path.write_text(text)
    try:
        load_hf_config(path)
    except InfragenError as exc:
        _expected(exc)


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data[:3]):
            out += _paths(v, (*prefix, i))
    return out


_BASE_PLANS = [make_plan(k, c).model_dump(mode="json") for k, c in  # type: ignore[arg-type]
               (("single", "aws"), ("cpu", "alicloud"), ("multinode", "aws"))]


@FUZZ
@given(which=st.integers(0, len(_BASE_PLANS) - 1), pick=st.integers(0, 10**6), value=_values,
       keep_digest=st.booleans())
def test_plan_files(tmp_path_factory: pytest.TempPathFactory, which: int, pick: int, value: Any,
                    keep_digest: bool) -> None:
    from infragen.render import render_all

    data = json.loads(json.dumps(_BASE_PLANS[which]))
    del data["digest"]
    paths = _paths(data)
    where = paths[pick % len(paths)]
    target = data
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    try:
        data["digest"] = _digest_of(data) if keep_digest else "0" * 16
        text = json.dumps(data)
    except (ValueError, TypeError):
        return  # json cannot write it (nan keys...): no file to load
    path = tmp_path_factory.mktemp("p") / "plan.json"
    path.write_text(text)
    try:
        plan = load_plan(path)
        render_all(plan)
    except InfragenError as exc:
        _expected(exc)


def test_cli_fuzz_driver_finds_nothing() -> None:
    # The reviewer's run, in small: mutated workloads through `infragen validate` and `infragen plan`.
    from benchmarks.fuzz_cli import run, summary

    report = run(CLI_CASES, seed=int(os.environ.get("INFRAGEN_FUZZ_SEED", "21")), limit_s=10.0)
    assert not report.broken(10.0), summary(report, 10.0)
