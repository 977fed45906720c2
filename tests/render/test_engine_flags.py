"""Contract: every flag in a rendered ExecStart is in the pinned flag list for the plan's engine version.

The list lives in infragen/catalog/data/engines.yaml (written by the planner engineer; read, never written, here).
Until it exists the tests skip; factory plans are checked only when their version is pinned there.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from infragen.plan import Plan
from infragen.render import node_roles, render_user_data
from tests.plan_factory import make_plan
from tests.render.support import CASES, EXAMPLES, REPO, example_plan

ENGINES_FILE = REPO / "infragen" / "catalog" / "data" / "engines.yaml"
_ENGINE_KEYS = {"vllm": ("vllm",), "llama.cpp": ("llama.cpp", "llama_cpp", "llamacpp", "llama-cpp")}
_FLAG_KEYS = ("flags", "allowed_flags", "pinned_flags")


def _flags_in(node: Any) -> set[str] | None:
    if isinstance(node, list) and all(isinstance(f, str) for f in node):
        return set(node)
    if isinstance(node, dict):
        for key in _FLAG_KEYS:
            if key in node:
                return _flags_in(node[key]) or (set(node[key]) if isinstance(node[key], dict) else None)
    return None


def pinned_flags(data: Any, engine: str, version: str) -> set[str] | None:
    """The flags engines.yaml pins for (engine, version), or None when that version is not listed."""
    if isinstance(data, dict) and "engines" in data:
        data = data["engines"]
    section: Any = None
    if isinstance(data, dict):
        section = next((data[k] for k in _ENGINE_KEYS[engine] if k in data), None)
    elif isinstance(data, list):
        entries = [e for e in data if isinstance(e, dict) and e.get("name") in _ENGINE_KEYS[engine]]
        section = entries or None
    if isinstance(section, dict):
        if version in section:
            return _flags_in(section[version])
        versions = section.get("versions")
        if isinstance(versions, dict) and version in versions:
            return _flags_in(versions[version])
        section = versions if isinstance(versions, list) else ([section] if "version" in section else None)
    if isinstance(section, list):
        for entry in section:
            if isinstance(entry, dict) and str(entry.get("version")) == version:
                return _flags_in(entry)
    return None


def rendered_flags(plan: Plan) -> set[str]:
    role = node_roles(plan)[0]
    text = render_user_data(plan, role, head_address="10.0.0.10" if role == "head" else None)
    unit = next(f["content"] for f in yaml.safe_load(text)["write_files"] if f["path"].endswith("engine@.service"))
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    words = shlex.split(exec_start.removeprefix("ExecStart="))
    return {w.split("=", 1)[0] for w in words if w.startswith("-")}


def _engines() -> Any:
    if not ENGINES_FILE.is_file():
        pytest.skip(f"{ENGINES_FILE.relative_to(REPO)} does not exist yet (planner engineer)")
    return yaml.safe_load(ENGINES_FILE.read_text(encoding="utf-8"))


def test_pinned_flags_reader() -> None:
    data = {"engines": {"vllm": {"0.6.6.post1": {"flags": ["--port"]}},
                        "llama.cpp": [{"version": "b4600", "flags": ["--ctx-size"]}]}}
    assert pinned_flags(data, "vllm", "0.6.6.post1") == {"--port"}
    assert pinned_flags(data, "llama.cpp", "b4600") == {"--ctx-size"}
    assert pinned_flags(data, "vllm", "0.7.0") is None


@pytest.mark.parametrize(("kind", "cloud"), CASES, ids=[f"{k}-{c}" for k, c in CASES])
def test_factory_flags_are_pinned(kind: str, cloud: str) -> None:
    plan = make_plan(kind, cloud)
    allowed = pinned_flags(_engines(), plan.engine.name, plan.engine.version)
    if allowed is None:
        pytest.skip(f"engines.yaml pins no flag list for {plan.engine.name} {plan.engine.version} (factory version)")
    assert rendered_flags(plan) <= allowed, sorted(rendered_flags(plan) - allowed)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_flags_are_pinned(path: Path) -> None:
    data = _engines()
    plan = example_plan(path)
    allowed = pinned_flags(data, plan.engine.name, plan.engine.version)
    assert allowed is not None, f"engines.yaml pins no flag list for {plan.engine.name} {plan.engine.version}"
    unknown = rendered_flags(plan) - allowed
    assert not unknown, f"{path.stem}: flags not pinned for {plan.engine.name} {plan.engine.version}: {sorted(unknown)}"
