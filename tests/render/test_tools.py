"""Rendered user-data checked with the real tools: cloud-init's schema validator and shellcheck.

Each runs on every role of every plan shape on both clouds (and, through the golden files, every example).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from infragen.render import render_all
from tests.plan_factory import make_plan
from tests.render.support import CASES, tool

# common.sh is sourced by the other scripts from its path on the node; it is checked on its own in the same run.
SHELLCHECK_EXCLUDE = "SC1091"


def _rendered() -> dict[str, str]:
    out: dict[str, str] = {}
    for kind, cloud in CASES:
        for name, text in render_all(make_plan(kind, cloud)).items():
            out[f"{kind}-{cloud}-{name}"] = text
    return out


def test_cloud_init_schema_accepts_every_rendered_file(tmp_path: Path) -> None:
    cloud_init = tool("cloud-init")
    failures = []
    for name, text in _rendered().items():
        path = tmp_path / name
        path.write_text(text)
        result = subprocess.run([cloud_init, "schema", "--config-file", str(path)], capture_output=True, text=True,
                                timeout=60)
        if result.returncode != 0 or "Valid cloud-config" not in result.stdout:
            failures.append(f"{name}: {result.stdout.strip()} {result.stderr.strip()}")
    assert not failures, "\n".join(failures)


def test_cloud_init_schema_rejects_a_broken_file(tmp_path: Path) -> None:
    """The validator really validates: a wrong type for write_files is refused."""
    cloud_init = tool("cloud-init")
    path = tmp_path / "broken.yaml"
    path.write_text("#cloud-config\nwrite_files: 42\n")
    result = subprocess.run([cloud_init, "schema", "--config-file", str(path)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0


def _scripts(tmp_path: Path) -> list[Path]:
    scripts = []
    for name, text in _rendered().items():
        for f in yaml.safe_load(text)["write_files"]:
            content = f["content"]
            if content.startswith("#!/bin/bash") or content.startswith("# shellcheck shell=bash"):
                path = tmp_path / name.removesuffix(".yaml") / f["path"].lstrip("/")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content)
                scripts.append(path)
    return scripts


def test_every_embedded_shell_script_passes_shellcheck(tmp_path: Path) -> None:
    shellcheck = tool("shellcheck")
    scripts = _scripts(tmp_path)
    assert len(scripts) >= 7 * len(CASES)
    result = subprocess.run([shellcheck, "--shell=bash", "--severity=style", f"--exclude={SHELLCHECK_EXCLUDE}",
                             *map(str, scripts)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-6000:]


def test_shellcheck_catches_a_bad_script(tmp_path: Path) -> None:
    shellcheck = tool("shellcheck")
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/bin/bash\nrm -rf $DIR/*\n")
    assert subprocess.run([shellcheck, str(bad)], capture_output=True, timeout=60).returncode != 0


def test_python_helpers_compile() -> None:
    for name, text in _rendered().items():
        for f in yaml.safe_load(text)["write_files"]:
            if f["path"].endswith(".py"):
                compile(f["content"], f"{name}:{f['path']}", "exec")


# Binaries the boot itself creates (scripts written by cloud-init, engines installed by infragen-install).
_BOOT_MADE = re.compile(r"Command (/usr/local/sbin/infragen-[a-z-]+|/opt/infragen/\S+) is not executable")


def _verify(paths: list[Path]) -> list[str]:
    analyze = tool("systemd-analyze")
    result = subprocess.run([analyze, "verify", "--man=no", *map(str, paths)], capture_output=True, text=True,
                            timeout=120, cwd=paths[0].parent)
    lines = (result.stdout + result.stderr).splitlines()
    return [line for line in lines if line.strip() and not _BOOT_MADE.search(line)]


def test_systemd_accepts_every_rendered_unit(tmp_path: Path) -> None:
    """systemd's own parser finds no unknown key or bad value in any unit (instances of engine@ included)."""
    problems = []
    for name, text in _rendered().items():
        folder = tmp_path / name.removesuffix(".yaml")
        folder.mkdir()
        units = []
        for f in yaml.safe_load(text)["write_files"]:
            if f["path"].startswith("/etc/systemd/system/"):
                unit = folder / Path(f["path"]).name.replace("@.service", "@0.service")
                unit.write_text(f["content"])
                units.append(unit)
        problems += [f"{name}: {line}" for line in _verify(units)]
    assert not problems, "\n".join(problems)


def test_systemd_verify_reports_a_bad_unit(tmp_path: Path) -> None:
    bad = tmp_path / "bad.service"
    bad.write_text("[Service]\nExecStart=/bin/true\nRestrt=on-failure\n")
    assert any("Unknown key" in line for line in _verify([bad]))
