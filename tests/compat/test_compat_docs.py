"""docs/compat-rules.md is generated from compat.yaml; a rule changed without regenerating fails here."""

from __future__ import annotations

from pathlib import Path

from infragen.catalog.compat import load_compat
from infragen.catalog.compat_docs import REGENERATE, render_compat_rules

DOC = Path(__file__).resolve().parents[2] / "docs" / "compat-rules.md"


def test_compat_rules_doc_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == render_compat_rules(), f"regenerate: {REGENERATE}"


def test_every_rule_appears_in_the_doc() -> None:
    text = render_compat_rules()
    table = load_compat()
    assert all(f"`{r.id}`" in text for r in table.tp_rules)
    assert all(f"`{m.model_type}`" in text for m in table.model_types)
    assert text.count("\n| weights |") + text.count("\n| kv_cache |") == len(table.kernels)
