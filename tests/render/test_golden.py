"""Golden files of the rendered user-data: every example (planned by infragen.sizing) and every factory shape.

Any change to the output shows up as a diff here; regenerate on purpose with INFRAGEN_UPDATE_GOLDEN=1.
Examples are also held to the size limit, cloud-init's schema and shellcheck like the factory shapes.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from infragen.plan import Plan
from infragen.render import USER_DATA_MAX_BYTES, render_all
from tests.plan_factory import make_plan
from tests.render.support import CASES, EXAMPLES, GOLDEN_DIR, UPDATE_ENV, delivered_bytes, example_plan, tool


def _check_golden(name: str, files: dict[str, str]) -> None:
    folder = GOLDEN_DIR / name
    if os.environ.get(UPDATE_ENV) == "1":
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.yaml"):
            old.unlink()
        for role_file, text in files.items():
            (folder / role_file).write_text(text, encoding="utf-8")
        return
    if not folder.is_dir():
        pytest.fail(f"no golden files for {name}; generate them with {UPDATE_ENV}=1 and review them")
    assert sorted(p.name for p in folder.glob("*.yaml")) == sorted(files), f"{name}: roles changed"
    for role_file, text in files.items():
        expected = (folder / role_file).read_text(encoding="utf-8")
        assert text == expected, f"{name}/{role_file} differs from its golden file ({UPDATE_ENV}=1 to accept)"


@pytest.mark.parametrize(("kind", "cloud"), CASES, ids=[f"{k}-{c}" for k, c in CASES])
def test_factory_golden(kind: str, cloud: str) -> None:
    _check_golden(f"factory-{kind}-{cloud}", render_all(make_plan(kind, cloud)))


def _example_files(path: Path) -> dict[str, str]:
    plan: Plan = example_plan(path)
    return render_all(plan)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_golden(path: Path) -> None:
    _check_golden(path.stem, _example_files(path))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_passes_the_tools(path: Path, tmp_path: Path) -> None:
    plan: Plan = example_plan(path)
    files = render_all(plan)
    cloud_init, shellcheck = tool("cloud-init"), tool("shellcheck")
    scripts = []
    for name, text in files.items():
        sent = delivered_bytes(text, plan.deployment.cloud)
        assert sent <= USER_DATA_MAX_BYTES, f"{path.stem}/{name} is {sent} bytes as sent, over 16 KB"
        target = tmp_path / name
        target.write_text(text)
        result = subprocess.run([cloud_init, "schema", "--config-file", str(target)], capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0, f"{path.stem}/{name}: {result.stdout} {result.stderr}"
        for i, f in enumerate(yaml.safe_load(text)["write_files"]):
            if f["content"].startswith(("#!/bin/bash", "# shellcheck shell=bash")):
                script = tmp_path / f"{name}-{i}.sh"
                script.write_text(f["content"])
                scripts.append(str(script))
    result = subprocess.run([shellcheck, "--shell=bash", "--exclude=SC1091", *scripts], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-6000:]
