"""Composition root of the Pulumi program: stack config -> Plan -> components -> exports.

The only place that may call the planner (`infragen.sizing.plan_file`, deterministic and offline);
infragen.provision never does. Expected failures end the update with one clean message, not a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi

from infragen.errors import InfragenError
from infragen.plan import Plan, load_plan
from infragen.provision import build_stack
from infragen.provision.settings import StackSettings, load_settings

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def resolve_plan(settings: StackSettings) -> Plan:
    """The pinned, reviewed plan when `infragen:planFile` is set, else a fresh plan of the workload."""
    if settings.plan_path is not None:
        return load_plan(settings.plan_path)
    from infragen.sizing import plan_file

    if settings.workload_path is None:  # load_settings guarantees one of the two
        raise RuntimeError("settings name neither a plan file nor a workload")
    return plan_file(settings.workload_path)


def main(project_root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """Build the stack; returns its exports."""
    try:
        settings = load_settings(project_root)
        return build_stack(resolve_plan(settings), settings)
    except InfragenError as err:
        raise pulumi.RunError(err.render()) from None


if __name__ == "__main__":
    for key, value in main().items():
        pulumi.export(key, value)
