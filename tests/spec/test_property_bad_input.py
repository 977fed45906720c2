"""Property: any YAML document or random field values -> exit 0 (valid) or 2 and an `Error:` line; no traceback."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.spec.conftest import run_cli

FIELDS = ["schema_version", "name", "model", "weights", "precision", "kv_cache_dtype", "traffic", "slo", "engine",
          "cloud", "regions", "pricing", "min_replicas", "budget_usd_per_month", "instance_families",
          "allow_multi_node", "allow_unpriced", "port"]
TRAFFIC = ["peak_requests_per_s", "concurrent_users", "prompt_tokens", "output_tokens", "max_context_tokens"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.sampled_from(["qwen2-7b", "tinyllama-1.1b", "llama.cpp", "vllm", "auto", "fp8", "q4_k_m", "bf16", "aws",
                     "spot", "int4-awq", "../config.json", "x/config.json", ""]),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                             max_size=3), max_leaves=8)


@st.composite
def near_valid(draw: st.DrawFn) -> dict[str, Any]:
    """A mostly valid spec with a few fields replaced by random values (the interesting region)."""
    doc: dict[str, Any] = {"model": "qwen2-7b", "traffic": {"peak_requests_per_s": 5}}
    for key in draw(st.lists(st.sampled_from(FIELDS), max_size=3)):
        doc[key] = draw(values)
    if isinstance(doc.get("traffic"), dict):
        for key in draw(st.lists(st.sampled_from(TRAFFIC), max_size=3)):
            doc["traffic"][key] = draw(scalars)
    if draw(st.booleans()):
        doc[draw(st.text(min_size=1, max_size=10))] = draw(scalars)
    return doc


def _check(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "workload.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        r = run_cli("validate", str(path))
    assert "Traceback" not in r.out + r.err
    assert r.code in (0, 2), (r.code, r.err)
    if r.code == 2:
        assert r.err.startswith(f"Error: {path}"), r.err
        assert r.out == ""
    else:
        assert r.out.startswith(f"{path}: ok")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_valid())
def test_random_field_values_never_traceback(doc: dict[str, Any]) -> None:
    _check(yaml.safe_dump(doc, allow_unicode=True))


@settings(max_examples=100, deadline=None)
@given(values)
def test_random_yaml_documents_never_traceback(doc: Any) -> None:
    _check(yaml.safe_dump(doc, allow_unicode=True))


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("model: qwen2-7b\n traffic:{}[]-,'\"&*!|>#%@`\t5")), max_size=80))
def test_random_yaml_text_never_traceback(text: str) -> None:
    _check(text)
