"""ModelArchitecture.speed_shape: what a calibration profile's model scope compares."""

from __future__ import annotations

import re
from pathlib import Path

from infragen.catalog.models import load_model_registry, resolve_model

ROOT = Path(__file__).resolve().parents[2]


def test_names_sources_and_context_do_not_change_the_shape_and_a_width_does() -> None:
    base = resolve_model("llama-3.1-8b", base_dir=ROOT, where="t")
    renamed = base.model_copy(update={"id": "my-finetune", "display_name": "Mine", "max_position_embeddings": 8192,
                                      "hf_repo": "me/mine", "source": "elsewhere", "aliases": ("x",)})
    assert renamed.speed_shape() == base.speed_shape()
    for change in ({"intermediate_size": 14_000}, {"num_kv_heads": 4}, {"num_layers": 33}, {"family": "mistral"}):
        assert base.model_copy(update=change).speed_shape() != base.speed_shape(), change


def test_registry_models_share_a_shape_only_with_their_respins() -> None:
    shapes: dict[str, list[str]] = {}
    for mid, m in load_model_registry().items():
        shapes.setdefault(m.speed_shape(), []).append(mid)
    shared = sorted(sorted(v) for v in shapes.values() if len(v) > 1)
    # a re-release of the same network (new weights, same widths) calibrates the other; nothing else does
    assert ["llama-3.1-70b", "llama-3.3-70b"] in shared and ["deepseek-r1", "deepseek-v3"] in shared
    assert all(len({re.match(r"[a-z]+", mid).group() for mid in group}) == 1 for group in shared), shared  # type: ignore[union-attr]
