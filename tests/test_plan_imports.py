"""What `infragen plan` imports: the cold start pays only for what planning uses (benchmarks/plan_speed.py measures
the time; these tests guard the laziness, never the timing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Modules a plan never needs: provisioning, rendering, cloud SDKs, pydantic's plugin discovery (importlib.metadata
#: pulls email, zipfile, csv and socket in with it), and importlib.resources (tempfile, shutil, zipfile, bz2, lzma:
#: the data files are read beside the package, catalog.parsed.data_dir), and difflib (did-you-mean: errors only).
NEVER_ON_THE_PLAN_PATH = ("pulumi", "jinja2", "boto3", "botocore", "alibabacloud_tea_openapi", "importlib.metadata",
                          "infragen.render", "infragen.provision", "infragen.preflight", "infragen.catalog.refresh",
                          "infragen.present.html", "email", "importlib.resources", "tempfile", "zipfile", "difflib")


def _modules_after(code: str, **env: str) -> tuple[list[str], str]:
    base = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    script = code + "\nimport json, sys\nprint('MODULES ' + json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                         env={**base, **env})
    line = next(x for x in res.stderr.splitlines() if x.startswith("MODULES "))
    return json.loads(line.removeprefix("MODULES ")), res.stdout


PLAN = ("from infragen.cli import main\n"
        "try:\n    main(['plan', 'examples/team-chatbot.yaml', '--format', 'json'])\nexcept SystemExit:\n    pass\n")


def test_importing_the_cli_loads_no_subcommand() -> None:
    """`infragen --help` and every subcommand start from here: no pydantic, YAML, catalog or sizing yet."""
    modules, _ = _modules_after("import infragen.cli")
    assert not [m for m in modules if m.split(".")[0] in ("pydantic", "yaml", "pulumi", "jinja2", "boto3")]
    assert not [m for m in modules if m.startswith(("infragen.sizing", "infragen.catalog", "infragen.plan"))]


def test_a_plan_imports_nothing_it_does_not_use() -> None:
    modules, out = _modules_after(PLAN)
    assert json.loads(out)["deployment"]["instance_type"]  # it planned
    assert "infragen.sizing.search" in modules  # the probe sees the plan path
    assert [m for m in NEVER_ON_THE_PLAN_PATH if m in modules] == []


def test_a_users_own_plugin_setting_keeps_pydantics_loader() -> None:
    """Only with every plugin disabled is pydantic's loader replaced (its answer is then always "none"): a list
    of plugin names is pydantic's to read, through its own loader."""
    modules, out = _modules_after(PLAN, PYDANTIC_DISABLE_PLUGINS="some-plugin")
    assert json.loads(out)["deployment"]["instance_type"]
    assert "importlib.metadata" in modules


def test_the_cycle_collector_is_back_on_after_a_command() -> None:
    """main() pauses the cycle collector for the command only: an in-process caller (the tests, a program) gets
    it back as it was."""
    code = ("import gc, io, contextlib\nfrom infragen.cli import main\nstates = []\n"
            "for on in (True, False):\n    (gc.enable if on else gc.disable)()\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        try:\n            main(['plan', 'examples/team-chatbot.yaml', '--format', 'json'])\n"
            "        except SystemExit:\n            pass\n    states.append(gc.isenabled())\n"
            "print(states)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.stdout.strip() == "[True, False]", res.stderr


def test_a_plan_builds_no_validator_it_does_not_use() -> None:
    """Models of files a plan does not read (the catalog's YAML sources, regions.yaml, --hardware and --prices
    files) are built on first use (defer_build), not at import: a plan leaves them unbuilt."""
    code = PLAN + ("import json, sys\n"
                   "from infragen.catalog import loader, regional\nfrom infragen.sizing import hardware, scope\n"
                   "models = (loader.AcceleratorFile, loader.CpuFile, loader.InstanceFile, regional.RegionsFile,"
                   " hardware.HardwareFile, scope.PriceFile)\n"
                   "built = {m.__name__: m.__pydantic_complete__ for m in models}\n"
                   "print('BUILT ' + json.dumps(built), file=sys.stderr)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    line = next(x for x in res.stderr.splitlines() if x.startswith("BUILT "))
    built = json.loads(line.removeprefix("BUILT "))
    assert len(built) == 6 and not any(built.values()), built
