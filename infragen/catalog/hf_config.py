"""Import a Hugging Face `config.json` as a ModelArchitecture (llama, qwen2, qwen3, qwen3_moe, mistral,
mixtral, gemma, gemma2, phi3, deepseek_v3). Reads one local file; never downloads, never guesses a figure:
a missing key or an unsupported layout is an InputError naming the file and the key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from infragen.architecture import MAX_FIGURE, ModelArchitecture
from infragen.errors import InputError
from infragen.identifiers import HF_REPO_RE, shown
from infragen.safe_load import load_json_file

__all__ = ["SUPPORTED_MODEL_TYPES", "architecture_from_hf_config", "load_hf_config"]


class _Config:
    """Typed access to one config.json, every failure naming the file and the key."""

    def __init__(self, path: Path | str, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    def fail(self, key: str, problem: str) -> InputError:
        return InputError(f"{self.path}: {key}: {problem}")

    def int(self, key: str, default: int | None = None, *, required: bool = True) -> int | None:
        value = self.data.get(key, default)
        if value is None:
            if required and default is None and key not in self.data:
                raise self.fail(key, "missing (needed to size the model)")
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(key, f"expected a non-negative integer, found {value!r}")
        return value

    def req(self, key: str) -> int:
        value = self.int(key)
        if value is None or value == 0:
            raise self.fail(key, "must be a positive integer")
        return value

    def bool(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, found {value!r}")
        return value

    def str(self, key: str) -> str | None:
        value = self.data.get(key)
        return value if isinstance(value, str) else None


def _common(c: _Config, *, tie_default: bool, bias_default: bool) -> dict[str, Any]:
    heads = c.req("num_attention_heads")
    return {
        "hidden_size": c.req("hidden_size"),
        "num_layers": c.req("num_hidden_layers"),
        "num_attention_heads": heads,
        "num_kv_heads": c.int("num_key_value_heads", required=False) or heads,
        "head_dim": c.int("head_dim", required=False) or None,
        "intermediate_size": c.req("intermediate_size"),
        "vocab_size": c.req("vocab_size"),
        "tie_word_embeddings": c.bool("tie_word_embeddings", tie_default),
        "attention_bias": c.bool("attention_bias", bias_default),
        "max_position_embeddings": c.req("max_position_embeddings"),
    }


def _window(c: _Config, *, gated_by_use_flag: bool) -> int | None:
    """Sliding window if the config turns it on (Qwen: only when `use_sliding_window` is true)."""
    if gated_by_use_flag and not c.bool("use_sliding_window", False):
        return None
    return c.int("sliding_window", required=False) or None


def _no_mlp_bias(c: _Config) -> None:
    if c.bool("mlp_bias", False):
        raise c.fail("mlp_bias", "MLP biases are not modelled; only bias-free MLPs are supported")


def _llama(c: _Config) -> dict[str, Any]:
    _no_mlp_bias(c)
    return _common(c, tie_default=False, bias_default=False)


def _mistral(c: _Config) -> dict[str, Any]:
    return {**_common(c, tie_default=False, bias_default=False), "sliding_window": _window(c, gated_by_use_flag=False)}


def _qwen2(c: _Config) -> dict[str, Any]:
    # Qwen2 always carries q/k/v biases; its config has no attention_bias key.
    out = _common(c, tie_default=False, bias_default=True)
    out["attention_bias"] = True
    out["sliding_window"] = _window(c, gated_by_use_flag=True)
    return out


def _qwen3(c: _Config) -> dict[str, Any]:
    out = _common(c, tie_default=False, bias_default=False)
    out["qk_norm"] = True
    out["sliding_window"] = _window(c, gated_by_use_flag=True)
    return out


def _qwen3_moe(c: _Config) -> dict[str, Any]:
    out = _qwen3(c)
    if c.int("decoder_sparse_step", 1) != 1:
        raise c.fail("decoder_sparse_step", "only 1 (every layer a MoE layer) is supported")
    dense_only = c.data.get("mlp_only_layers") or []
    if dense_only:
        raise c.fail("mlp_only_layers", "dense layers among MoE layers are not supported")
    out.update(
        num_experts=c.req("num_experts"),
        num_experts_per_token=c.req("num_experts_per_tok"),
        moe_intermediate_size=c.req("moe_intermediate_size"),
    )
    return out


def _mixtral(c: _Config) -> dict[str, Any]:
    out = _mistral(c)
    out.update(num_experts=c.req("num_local_experts"), num_experts_per_token=c.req("num_experts_per_tok"))
    return out


def _gemma(c: _Config) -> dict[str, Any]:
    return _common(c, tie_default=True, bias_default=False)


def _gemma2(c: _Config) -> dict[str, Any]:
    out = _common(c, tie_default=True, bias_default=False)
    out["sandwich_norm"] = True
    window = c.int("sliding_window", required=False)
    if window:
        # Gemma-2 alternates local (sliding) and global attention layers.
        out["sliding_window"] = window
        out["sliding_window_layers"] = out["num_layers"] // 2
    return out


def _phi3(c: _Config) -> dict[str, Any]:
    return {**_common(c, tie_default=False, bias_default=False), "sliding_window": _window(c, gated_by_use_flag=False)}


def _deepseek_v3(c: _Config) -> dict[str, Any]:
    out = _common(c, tie_default=False, bias_default=False)
    if c.int("moe_layer_freq", 1) != 1:
        raise c.fail("moe_layer_freq", "only 1 (every layer after the dense ones is MoE) is supported")
    out.update(
        num_experts=c.req("n_routed_experts"),
        num_experts_per_token=c.req("num_experts_per_tok"),
        moe_intermediate_size=c.req("moe_intermediate_size"),
        num_shared_experts=c.int("n_shared_experts", 0) or 0,
        first_dense_layers=c.int("first_k_dense_replace", 0) or 0,
        router_score_bias=c.str("topk_method") == "noaux_tc",
        kv_lora_rank=c.req("kv_lora_rank"),
        q_lora_rank=c.int("q_lora_rank", required=False) or None,
        qk_rope_head_dim=c.req("qk_rope_head_dim"),
        qk_nope_head_dim=c.req("qk_nope_head_dim"),
        v_head_dim=c.req("v_head_dim"),
        num_nextn_predict_layers=c.int("num_nextn_predict_layers", 0) or 0,
        head_dim=None,
    )
    return out


_IMPORTERS: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "llama": _llama,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "mistral": _mistral,
    "mixtral": _mixtral,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "phi3": _phi3,
    "deepseek_v3": _deepseek_v3,
}
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(_IMPORTERS)


def _context_with_rope_scaling(c: _Config, context: int) -> int:
    """A YaRN `rope_scaling` in the config (Qwen2.5 cards tell users to add one) extends the context to
    factor x original, as vLLM derives max_model_len; the engine then needs no extra flag."""
    scaling = c.data.get("rope_scaling")
    if not isinstance(scaling, dict) or (scaling.get("rope_type") or scaling.get("type")) != "yarn":
        return context
    factor, native = scaling.get("factor"), scaling.get("original_max_position_embeddings")
    if isinstance(factor, int | float) and not isinstance(factor, bool) and factor > 1 and isinstance(native, int):
        extended = float(native) * float(factor)
        if not math.isfinite(extended) or extended > MAX_FIGURE:
            raise c.fail("rope_scaling", f"factor {shown(factor)} x original_max_position_embeddings "
                         f"{shown(native)} is out of range (a context of at most {MAX_FIGURE:.0e} tokens)")
        return max(context, int(extended))
    return context


def _fp8_block(c: _Config) -> tuple[int, int] | None:
    """`quantization_config.weight_block_size` of a block-quantized FP8 checkpoint (quant_method fp8), else None."""
    quant = c.data.get("quantization_config")
    if not isinstance(quant, dict) or quant.get("quant_method") != "fp8" or quant.get("weight_block_size") is None:
        return None
    block = quant["weight_block_size"]
    if not (isinstance(block, list) and len(block) == 2
            and all(isinstance(b, int) and not isinstance(b, bool) and 0 < b <= MAX_FIGURE for b in block)):
        raise c.fail("quantization_config.weight_block_size", f"expected two positive integers, found {block!r}")
    return block[0], block[1]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip(".-")[:96].strip(".-") or "custom"


def architecture_from_hf_config(data: Any, *, path: Path | str = "config.json") -> ModelArchitecture:
    """Map parsed config.json data to a ModelArchitecture (`path` only names the file in messages)."""
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object (a Hugging Face config.json), found {type(data).__name__}")
    c = _Config(path, data)
    model_type = data.get("model_type")
    if model_type is None:
        raise c.fail("model_type", "missing; infragen imports " + ", ".join(SUPPORTED_MODEL_TYPES))
    importer = _IMPORTERS.get(model_type) if isinstance(model_type, str) else None
    if importer is None:
        raise c.fail(
            "model_type",
            f"{model_type!r} is not supported; infragen imports {', '.join(SUPPORTED_MODEL_TYPES)} "
            "(or write the architecture explicitly under `model:`)",
        )
    fields = importer(c)
    fields["weight_block_size"] = _fp8_block(c)
    fields["max_position_embeddings"] = _context_with_rope_scaling(c, fields["max_position_embeddings"])
    name_or_path = c.str("_name_or_path") or ""
    # Name: the repo in `_name_or_path`, else the folder holding config.json, else the file's stem.
    file = Path(path)
    fallback = file.parent.name if file.name == "config.json" else file.stem
    display = name_or_path.rstrip("/").split("/")[-1] if name_or_path else (fallback or "custom")
    try:
        return ModelArchitecture(
            id=_slug(display),
            display_name=display,
            family=model_type,
            hf_repo=name_or_path if HF_REPO_RE.fullmatch(name_or_path) else None,
            source=f"imported from {path}",
            **fields,
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        raise InputError(f"{path}: not a usable architecture: {problems}") from None


def load_hf_config(path: Path | str) -> ModelArchitecture:
    """Read a local config.json and import it."""
    path = Path(path)
    # Bounded: size, nesting, integer length, finite numbers, unique keys (infragen.safe_load).
    data = load_json_file(path, what="Hugging Face config.json")
    return architecture_from_hf_config(data, path=path)
