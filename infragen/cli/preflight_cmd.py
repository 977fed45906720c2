"""`infragen preflight STACK_OR_PLAN`: resolve a stack (or a plan/workload file) to its plan and config, run the
plan's cloud checks (infragen.preflight) and print what to fix. Exit 3 when a check fails.

Reads files and prints; the checks themselves live in infragen.preflight.<cloud>. Never imports Pulumi.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import yaml

from infragen.errors import InputError, did_you_mean
from infragen.plan import Plan, load_plan

PROJECT_FILE = "Pulumi.yaml"


@click.command()
@click.argument("target")
@click.option("--project-root", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Directory of Pulumi.yaml (default: the nearest one above the current directory).")
def preflight(target: str, project_root: Path | None) -> None:
    """Check that the cloud account can take TARGET before `pulumi up`.

    TARGET is a stack name (stacks/Pulumi.<name>.yaml), a stack file, a plan .json or a workload .yaml.
    Uses the cloud SDK's default credentials; read-only calls only.
    """
    from infragen.preflight import PreflightFailed, render_checks, run_preflight

    resolved = resolve_target(target, project_root)
    checks = run_preflight(resolved)
    click.echo(render_checks(resolved, checks))
    failed = [c for c in checks if c.status == "fail"]
    if failed:
        raise PreflightFailed(
            f"{target}: {len(failed)} preflight check(s) failed: {', '.join(c.name for c in failed)}",
            fix="; ".join(c.fix for c in failed if c.fix) or None)


def resolve_target(target: str, project_root: Path | None = None) -> Any:
    """A PreflightTarget for a stack name, a stack file, a plan JSON or a workload YAML."""
    from infragen.preflight import PreflightTarget

    path = Path(target)
    if path.suffix == ".json":
        return PreflightTarget(plan=_load_plan(path), source=target)
    if path.suffix in (".yaml", ".yml") and not path.name.startswith("Pulumi."):
        return PreflightTarget(plan=_plan_workload(path), source=target)
    root = project_root or _find_root(Path.cwd())
    stack_file = path if path.name.startswith("Pulumi.") else _stack_dir(root) / f"Pulumi.{target}.yaml"
    if not stack_file.is_file():
        known = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in _stack_dir(root).glob("Pulumi.*.yaml"))
        raise InputError(f"{target}: no stack file {stack_file}{did_you_mean(target, known)}",
                         hint="stacks: " + ", ".join(known) if known else None)
    stack = stack_file.name[len("Pulumi."):].rsplit(".", 1)[0]
    config = _stack_config(stack_file)
    plan_file, workload = config.get("infragen:planFile"), config.get("infragen:workload")
    if plan_file:
        plan = _load_plan(root / str(plan_file))
    elif workload:
        plan = _plan_workload(root / str(workload))
    else:
        raise InputError(f"{stack_file}: config sets neither infragen:planFile nor infragen:workload",
                         fix=f"pulumi config set --stack {stack} infragen:workload examples/team-chatbot.yaml")
    return PreflightTarget(plan=plan, source=target, stack=stack, config=config)


def _find_root(start: Path) -> Path:
    for folder in (start, *start.parents):
        if (folder / PROJECT_FILE).is_file():
            return folder
    raise InputError(f"no {PROJECT_FILE} in {start} or above", fix="run from the project, or pass --project-root")


def _stack_dir(root: Path) -> Path:
    project = root / PROJECT_FILE
    if not project.is_file():
        raise InputError(f"--project-root {root}: no {PROJECT_FILE} there")
    data = yaml.safe_load(project.read_text(encoding="utf-8")) or {}
    return root / str(data.get("stackConfigDir") or ".")


def _stack_config(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({exc})") from None
    config = data.get("config") if isinstance(data, dict) else None
    if not isinstance(config, dict):
        raise InputError(f"{path}: no `config:` mapping")
    return config


def _load_plan(path: Path) -> Plan:
    if not path.is_file():
        raise InputError(f"{path} does not exist")
    return load_plan(path)


def _plan_workload(path: Path) -> Plan:
    if not path.is_file():
        raise InputError(f"{path} does not exist")
    from infragen.sizing import plan_file

    return plan_file(path)
