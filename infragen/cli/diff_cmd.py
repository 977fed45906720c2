"""`infragen diff BASE_PLAN.json NEW_PLAN.json`: what a change does to a deployment (markdown for pull requests).

Reads two plan files and prints; the comparison itself lives in infragen.diff. Never plans, never imports Pulumi.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from infragen.diff import diff_plans, diff_to_dict, render_diff_markdown, render_diff_table
from infragen.plan import Plan, load_plan

#: Stands for "no plan on this side" (a new stack has no base, a removed stack no new plan).
NO_PLAN = "-"


def _load_side(arg: str, *, missing_ok: bool) -> Plan | None:
    if arg == NO_PLAN:
        return None
    path = Path(arg)
    if missing_ok and not path.exists():
        return None
    return load_plan(path)


@click.command()
@click.argument("base_plan", metavar="BASE_PLAN.json")
@click.argument("new_plan", metavar="NEW_PLAN.json")
@click.option("--format", "fmt", type=click.Choice(["markdown", "json", "table"]), default="table",
              show_default=True, help="markdown for a pull-request comment, json for scripts, table for a terminal.")
@click.option("--missing-base-ok", is_flag=True,
              help="Treat a BASE_PLAN.json that does not exist as 'no base' (a new stack) instead of an error.")
def diff(base_plan: str, new_plan: str, fmt: str, missing_base_ok: bool) -> None:
    """Compare BASE_PLAN.json with NEW_PLAN.json (files written by `infragen plan --out`).

    Pass `-` for a side that has no plan: `infragen diff - new.json` is a new stack, `infragen diff old.json -` a
    removed one. Exit status 2 when a plan file is missing or invalid.
    """
    base = _load_side(base_plan, missing_ok=missing_base_ok)
    new = _load_side(new_plan, missing_ok=False)
    result = diff_plans(base, new)
    if fmt == "json":
        click.echo(json.dumps(diff_to_dict(result), indent=2))
    elif fmt == "markdown":
        click.echo(render_diff_markdown(result), nl=False)
    else:
        click.echo(render_diff_table(result), nl=False)
