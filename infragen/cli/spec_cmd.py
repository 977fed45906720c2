"""`infragen validate`, `infragen schema` and `infragen models`: the spec and registry, without sizing.

Also renders docs/workload.md from the field docstrings (text only; tests check the committed file is current).
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from infragen.architecture import ModelArchitecture
from infragen.fielddocs import document
from infragen.spec import (
    FamilyFilter,
    LimitsSpec,
    SloSpec,
    SpotSpec,
    TrafficSpec,
    WorkloadSpec,
    load_spec,
    workload_json_schema,
)


@click.command()
@click.argument("workload", type=click.Path(path_type=Path))
def validate(workload: Path) -> None:
    """Check WORKLOAD (a workload.yaml): schema, contradictions and that the model is known."""
    from infragen.catalog import load_catalog
    from infragen.catalog.models import resolve_model
    from infragen.sizing.scope import apply_price_overrides, check_scope

    spec = load_spec(workload)
    arch = resolve_model(spec.model, base_dir=workload.parent, where=f"{workload}: model")
    spec.check_model(arch, path=workload)
    check_scope(spec, apply_price_overrides(load_catalog(), spec.prices, where=str(workload)), where=str(workload))
    click.echo(f"{workload}: ok ({arch.display_name or arch.id}, precision {', '.join(spec.precision)})")


@click.command()
@click.option(
    "--format", "fmt", type=click.Choice(["json", "markdown"]), default="json", show_default=True,
    help="json: the JSON Schema (docs/workload.schema.json); markdown: the field reference (docs/workload.md).",
)
def schema(fmt: str) -> None:
    """Print the JSON Schema of workload.yaml (point your editor's YAML language server at it)."""
    if fmt == "markdown":
        click.echo(render_workload_reference(), nl=False)
        return
    click.echo(json.dumps(workload_json_schema(), indent=2))


@click.command()
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def models(fmt: str) -> None:
    """List the models infragen knows by name, with parameter counts computed from their architecture."""
    from infragen.catalog.models import load_model_registry

    registry = load_model_registry()
    rows = [
        {
            "id": m.id,
            "name": m.display_name,
            "family": m.family,
            "attention": m.attention_kind,
            "params_b": round(m.total_params() / 1e9, 2),
            "active_params_b": round(m.active_params() / 1e9, 2),
            "context_tokens": m.max_position_embeddings,
            "hf_repo": m.hf_repo,
            "aliases": list(m.aliases),
        }
        for m in registry.values()
    ]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"{'id':<18} {'family':<12} {'attn':<4} {'params_b':>9} {'active_b':>9} {'context':>8}  hf_repo")
    for r in rows:
        click.echo(
            f"{r['id']:<18} {r['family']:<12} {r['attention']:<4} {r['params_b']:>9} {r['active_params_b']:>9} "
            f"{r['context_tokens']:>8}  {r['hf_repo'] or ''}"
        )


# ---------------------------------------------------------------- docs/workload.md
REGENERATE = "infragen schema --format markdown > docs/workload.md"


def _type_name(ann: Any) -> str:
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is typing.Literal:
        return " | ".join(f"`{a}`" for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0]) + _bounds(args[1:])
    if origin in (typing.Union, types.UnionType):
        parts = [_type_name(a) for a in args if a is not type(None)]
        text = " or ".join(parts)
        return text + (" or null" if type(None) in args else "")
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return f"mapping ({ann.__name__})"
    names = {int: "integer", float: "number", str: "string", bool: "boolean"}
    return names.get(ann, getattr(ann, "__name__", str(ann)))


def _constraints(info: Any) -> str:
    return _bounds(info.metadata)


def _bounds(metadata: Any) -> str:
    out = []
    for meta in metadata:
        for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="), ("min_length", "min length")):
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{sign} {value}")
    return f" ({', '.join(out)})" if out else ""


def _default(info: Any) -> str:
    if info.is_required():
        return "**required**"
    value = info.default_factory() if info.default_factory is not None else info.default
    if isinstance(value, BaseModel):
        return "`{}`"
    if isinstance(value, list | tuple):
        return f"`{json.dumps(list(value))}`"
    if value is PydanticUndefined:
        return ""
    if value is None:
        return "null"
    return f"`{str(value).lower() if isinstance(value, bool) else value}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(model: type[BaseModel], prefix: str = "") -> list[str]:
    document(model)
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        kind = _type_name(info.annotation) + _constraints(info)
        rows.append(f"| `{prefix}{name}` | {_cell(kind)} | {_default(info)} | {_cell(info.description or '')} |")
    return rows


def _registry_rows() -> list[str]:
    from infragen.catalog.models import load_model_registry

    rows = [
        "| id | params (B) | active (B) | context | attention | checkpoint | also accepted |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for m in load_model_registry().values():
        aliases = ", ".join(f"`{a}`" for a in m.aliases if a != m.hf_repo)
        rows.append(
            f"| `{m.id}` | {m.total_params() / 1e9:.2f} | {m.active_params() / 1e9:.2f} | {m.max_position_embeddings} "
            f"| {m.attention_kind} | `{m.hf_repo}` | {aliases} |"
        )
    return rows


def render_workload_reference() -> str:
    """The whole of docs/workload.md."""
    lines = [
        "# Workload file reference (`workload.yaml`)",
        "",
        f"<!-- Generated from the field docstrings in infragen/spec.py and the model registry: {REGENERATE} -->",
        "",
        "A workload file says what to serve and under which constraints; `infragen plan` decides how.",
        "Five lines are enough:",
        "",
        "```yaml",
        "# yaml-language-server: $schema=../docs/workload.schema.json",
        "model: qwen2-7b",
        "precision: int4-awq",
        "traffic:",
        "  peak_requests_per_s: 20",
        "```",
        "",
        "Check a file with `infragen validate workload.yaml` (exit 0 when valid, 2 with one `Error:` paragraph",
        "naming the file and the field otherwise).",
        "",
        "## Editor completion",
        "",
        "The first line `# yaml-language-server: $schema=<path>/workload.schema.json` makes editors that use the",
        "YAML language server (VS Code's YAML extension, Neovim, JetBrains) complete and check every field.",
        "The path is relative to the workload file; `docs/workload.schema.json` is the committed schema, and",
        "`infragen schema > workload.schema.json` writes it anywhere.",
        "",
        "Keys are case-sensitive; unknown keys are errors (with a \"did you mean\"); numbers must be numbers",
        "(`true` is not 1, `\"5\"` is not 5); `precision`, `regions` and instance family lists accept a single",
        "value in place of a one-item list.",
        "",
        "## Top-level fields",
        "",
        *_table(WorkloadSpec),
        "",
        "## `traffic`",
        "",
        *_table(TrafficSpec, "traffic."),
        "",
        "## `slo`",
        "",
        *_table(SloSpec, "slo."),
        "",
        "## `instance_families`",
        "",
        *_table(FamilyFilter, "instance_families."),
        "",
        "## `limits`",
        "",
        *_table(LimitsSpec, "limits."),
        "",
        "## `spot`",
        "",
        *_table(SpotSpec, "spot."),
        "",
        "## Contradictions refused",
        "",
        "- `engine: vllm` with a GGUF precision (`q4_k_m`, `q5_k_m`, `q8_0`, `q4_0`);",
        "- `engine: llama.cpp` with a precision it cannot load (`fp8`, `int8`, `int4-awq`, `int4-gptq`);",
        "- `kv_cache_dtype: fp8` with `engine: llama.cpp`, or with only GGUF precisions listed;",
        "- both `traffic.peak_requests_per_s` and `traffic.concurrent_users` (or neither);",
        "- `traffic.max_context_tokens` below `prompt_tokens + output_tokens`, or above the model's context;",
        "- the same family under `instance_families.allow` and `.deny`;",
        "- `spot.on_demand_base_replicas` without `pricing: spot`;",
        "- only pre-quantized precisions (`int8`, `int4-*`, GGUF) without `weights`; a `.gguf` `weights` file",
        "  without a GGUF precision, or only GGUF precisions with a `weights` that is not a `.gguf` file.",
        "",
        "## `model`",
        "",
        "Three forms:",
        "",
        "1. a registry id or alias, case-insensitive (`llama-3.1-8b`, `meta-llama/Llama-3.1-8B-Instruct`);",
        "2. a path to a Hugging Face `config.json` (relative to the workload file; a folder holding one also",
        "   works when written with a `/`, e.g. `./my-model`). Supported `model_type`s: llama, qwen2, qwen3,",
        "   qwen3_moe, mistral, mixtral, gemma, gemma2, phi3, deepseek_v3. A YaRN `rope_scaling` in the file",
        "   extends the context to factor x original, as vLLM does;",
        "3. an explicit architecture mapping with the fields below (the shape fields are required).",
        "",
        "Parameter counts are computed from the architecture: embeddings, lm_head (once if tied), attention",
        "(MHA/GQA/MQA with optional q/k/v bias and q/k norms; MLA with its low-rank projections and norms),",
        "gated or plain MLPs, MoE experts (routed, shared, router, leading dense layers) and norms. The active",
        "count keeps only the top-k routed experts (and, as listed below, includes the input embedding;",
        "DeepSeek's published 36.6B leaves it out). DeepSeek-V3/R1's multi-token-prediction layer",
        "(`num_nextn_predict_layers`) is not counted: DeepSeek publishes 671B without it, the Hub checkpoint",
        "(685B) includes it, and vLLM loads it only for speculative decoding.",
        "",
        *_table(ModelArchitecture, "model."),
        "",
        "## Model registry",
        "",
        "`infragen models` prints this list. Figures and their sources are in `infragen/catalog/data/models.yaml`;",
        "every count below is computed from the architecture and tested to be within 1% of the published one",
        "(the one documented exception: Qwen3-30B-A3B's active count, 3.35B against the card's 3.3B).",
        "Qwen2 exists in 1.5B, 7B and 72B only (no 14B or 32B; Qwen2.5 adds them). The Qwen2/2.5 7B+ entries",
        "list 131072 tokens of context, reached with YaRN (factor 4) over their native 32768.",
        "",
        *_registry_rows(),
        "",
    ]
    return "\n".join(lines)
