"""`infragen validate`, `infragen schema` and `infragen models`: the spec and registry, without sizing."""

from __future__ import annotations

import json
from pathlib import Path

import click

from infragen.spec import load_spec, workload_json_schema


@click.command()
@click.argument("workload", type=click.Path(path_type=Path))
def validate(workload: Path) -> None:
    """Check WORKLOAD (a workload.yaml): schema, contradictions and that the model is known."""
    from infragen.catalog.models import resolve_model

    spec = load_spec(workload)
    arch = resolve_model(spec.model, base_dir=workload.parent, where=f"{workload}: model")
    spec.check_model(arch, path=workload)
    click.echo(f"{workload}: ok ({arch.display_name or arch.id}, precision {', '.join(spec.precision)})")


@click.command()
def schema() -> None:
    """Print the JSON Schema of workload.yaml (point your editor's YAML language server at it)."""
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
