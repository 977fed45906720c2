"""`infragen plan`: the main job. Plans a workload (dry run) and prints or writes the plan."""

from __future__ import annotations

import json
from pathlib import Path

import click
import yaml

#: Other instance types the table and markdown show unless --all (the JSON always has every one).
TOP_ROWS = 10


@click.command()
@click.argument("workload", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["table", "json", "yaml", "markdown", "html"]),
              default="table", show_default=True,
              help="Output format (markdown is for pull-request comments; html is a self-contained report page).")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Also write the plan JSON here (with --format html: write the report page here instead).")
@click.option("--prices", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="YAML file of your own hourly prices (`prices: [{instance_type, region, on_demand_usd_per_hour}]`);"
                   " added to the workload's `prices:`, recorded in the plan.")
@click.option("--sort", "sort_by", type=click.Choice(["cost", "token-cost"]), default="cost", show_default=True,
              help="Order of the other candidates in the table and the JSON: cost = monthly cost (the planner's "
                   "order); token-cost = $ per 1M output tokens with each candidate's replicas at their SLO-meeting "
                   "capacity. The chosen deployment stays the cheapest.")
@click.option("--all", "show_all", is_flag=True,
              help=f"List every instance type considered (the table shows the best {TOP_ROWS} others by default).")
@click.option("--calibration", "calibration", type=click.Path(path_type=Path), default=None,
              help="Calibration profile from `infragen calibrate` (replaces the workload's `calibration:`): its "
                   "factors apply to the candidates on the hardware and engine it was measured on, for a model of the "
                   "shapes it was measured with.")
@click.option("--explain", "explain_type", default=None, metavar="TYPE",
              help="Say in one paragraph why instance type TYPE was or was not chosen (also for infeasible "
                   "workloads), layout by layout, and exit.")
def plan(workload: Path, fmt: str, out: Path | None, prices: Path | None, sort_by: str, show_all: bool,
         calibration: Path | None, explain_type: str | None) -> None:
    """Choose the cheapest deployment of WORKLOAD meeting every SLO. Offline; creates nothing.

    Exit status: 0 planned, 2 invalid input, 3 infeasible (with what would make it possible).
    """
    from infragen.cli.output import write_text_file
    from infragen.present.order import order_candidates
    from infragen.report import render_markdown, render_text
    from infragen.sizing import explain_file, plan_file

    if explain_type is not None:
        click.echo(explain_file(workload, explain_type, prices=prices, calibration=calibration))
        return
    result = order_candidates(plan_file(workload, prices=prices, calibration=calibration), sort_by)  # type: ignore[arg-type]
    if fmt == "html":
        from infragen.present.html import render_html

        page = render_html(result)
        if out is not None:
            write_text_file(out, page)
        else:
            click.echo(page, nl=False)
        return
    if out is not None:
        write_text_file(out, result.to_json())
    if fmt == "json":
        click.echo(result.to_json(), nl=False)
    elif fmt == "yaml":
        click.echo(yaml.safe_dump(json.loads(result.to_json()), sort_keys=False), nl=False)
    elif fmt == "markdown":
        click.echo(render_markdown(result, rows=None if show_all else TOP_ROWS), nl=False)
    else:
        click.echo(render_text(result, rows=None if show_all else TOP_ROWS), nl=False)
