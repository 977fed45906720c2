"""Plans are data (issue #21): load_plan holds an edited plan to the workload's rules, requires its digest, and
the render refuses paths outside the model store. Also the CLI boundary: `--out` problems and bugs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from infragen.plan import _digest_of
from tests.plan_factory import make_plan
from tests.spec.conftest import run_cli


def _plan_file(tmp_path: Path, edit: Any = None, *, kind: str = "single", cloud: str = "aws",
               digest: bool = True) -> Path:
    data = make_plan(kind, cloud).model_dump(mode="json")  # type: ignore[arg-type]
    del data["digest"]
    if edit is not None:
        edit(data)
    if digest:
        data["digest"] = _digest_of(data)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    return path


def _refused(*argv: str) -> str:
    r = run_cli(*argv)
    assert r.code == 2, (r.code, r.err)
    assert "Traceback" not in r.err and r.err.startswith("Error: ")
    return r.err


def test_a_plan_without_its_digest_is_refused_everywhere(tmp_path: Path) -> None:
    path = _plan_file(tmp_path, digest=False)
    assert "digest: required field missing" in _refused("render", str(path), "--out", str(tmp_path / "o"))
    assert "digest: required field missing" in _refused("diff", str(path), str(path))
    from infragen.errors import InputError
    from infragen.plan import load_plan

    with pytest.raises(InputError, match="digest"):  # the Pulumi program (stacks/__main__.py) loads plans so
        load_plan(path)


def test_an_edited_plan_with_a_stale_digest_is_refused(tmp_path: Path) -> None:
    path = _plan_file(tmp_path)
    data = json.loads(path.read_text())
    data["deployment"]["nodes"] += 1
    path.write_text(json.dumps(data))
    assert "does not match" in _refused("render", str(path), "--out", str(tmp_path / "o"))


def _deep_set(path: tuple[Any, ...], value: Any) -> Any:
    def edit(data: dict[str, Any]) -> None:
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("where", "value", "expected"),
    [
        (("engine", "version"), "0.7.3; curl x|sh", "engine version"),
        (("deployment", "instance_type"), "g6e.xlarge$(id)", "instance type"),
        (("deployment", "region"), "us-east-1`id`", "region"),
        (("workload",), "a b", "workload name"),
        (("model", "id"), "../../etc/cron.d/x", "model id"),
        (("model", "served_model_name"), "$(id)", "model id"),
        (("secrets", "api_key_name"), "x;id", "secret name"),
        (("storage", "mount_path"), "/etc/../x y", "node path"),
        (("engine", "health_path"), "/health;id", "URL path"),
        (("engine", "argv", 3), "--x;id", "engine argument"),
        (("engine", "build_flags"), ["-mno-amx-tile'; id; '"], "compiler flag"),
        (("engine", "build_flags"), ["-O0"], "compiler flag"),
        (("deployment", "nodes"), 10**20, "out of range"),
        (("deployment", "nodes"), 10**40, "an integer of 41 digits"),
        (("deployment", "nodes"), "2", "valid integer"),
        (("model", "weights_gib"), float("inf"), "Infinity is not a number JSON allows"),
        (("model", "weights_gib"), 1e300, "out of range"),
        (("engine", "port"), 22, "greater than or equal to 1024"),
    ],
)
def test_edited_plan_values_are_held_to_the_workload_rules(tmp_path: Path, where: tuple[Any, ...], value: Any,
                                                            expected: str) -> None:
    path = _plan_file(tmp_path, _deep_set(where, value))
    err = _refused("render", str(path), "--out", str(tmp_path / "o"))
    assert expected in err
    if "digits" not in expected and "JSON" not in expected:  # the loader's refusals come before any field
        assert [w for w in where if isinstance(w, str)][-1] in err


@pytest.mark.parametrize(
    ("kind", "cloud", "where", "value"),
    [
        ("cpu", "aws", ("engine", "argv", 2), "/etc/cron.d/tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf"),
        ("cpu", "aws", ("engine", "argv", 2), "/opt/models/../../etc/cron.d/tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf"),
        ("single", "aws", ("engine", "argv", 2), "/opt/models/../../etc/cron.d"),
        ("single", "aws", ("engine", "argv", 2), "/opt/models"),
    ],
)
def test_model_paths_stay_inside_the_model_store(tmp_path: Path, kind: str, cloud: str, where: tuple[Any, ...],
                                                 value: str) -> None:
    def edit(data: dict[str, Any]) -> None:
        _deep_set(where, value)(data)
        if kind == "single":  # a local directory: the weights come from S3 into it
            data["model"]["weights_source"] = "s3"
            data["model"]["weights_uri"] = "s3://models/qwen/7b"

    path = _plan_file(tmp_path, edit, kind=kind, cloud=cloud)
    err = _refused("render", str(path), "--out", str(tmp_path / "o"))
    assert "outside the model store" in err or "does not name the plan's weights_file" in err


def test_weights_file_with_a_directory_part_is_refused(tmp_path: Path) -> None:
    path = _plan_file(tmp_path, _deep_set(("model", "weights_file"), "../../etc/cron.d/x.gguf"), kind="cpu")
    assert "file name" in _refused("render", str(path), "--out", str(tmp_path / "o"))


# --- the CLI boundary ----------------------------------------------------------------------------------------

GOOD = "model: qwen2-7b\ntraffic:\n  peak_requests_per_s: 5\n"


@pytest.mark.parametrize("target", ["dir", "unwritable", "under-a-file", "pseudo-fs"])
def test_plan_out_problems_exit_2_in_one_line_naming_the_path_and_problem(tmp_path: Path, target: str) -> None:
    workload = tmp_path / "w.yaml"
    workload.write_text(GOOD)
    if target == "dir":
        out, problem = tmp_path / "d", "is a directory"
        out.mkdir()
    elif target == "unwritable":
        if os.geteuid() == 0:
            out, problem = Path("/sys/infragen-plan.json"), "permission denied"  # root writes anywhere else
        else:
            (tmp_path / "ro").mkdir(mode=0o500)
            out, problem = tmp_path / "ro" / "plan.json", "permission denied"
    elif target == "pseudo-fs":
        out, problem = Path("/proc/infragen/plan.json"), "/proc does not accept new files"
    else:
        (tmp_path / "f").write_text("x")
        out, problem = tmp_path / "f" / "plan.json", f"{tmp_path / 'f'} is a file, not a directory"
    r = run_cli("plan", str(workload), "--out", str(out))
    assert r.code == 2, r.err
    assert r.err.startswith(f"Error: --out {out}: ") and "Traceback" not in r.err
    assert problem in r.err and r.err.strip().count("\n") == 0, r.err


@pytest.mark.parametrize("target", ["under-a-file", "a-file", "proc"])
def test_render_out_problems_exit_2_in_one_line(tmp_path: Path, target: str) -> None:
    (tmp_path / "f").write_text("x")
    path = _plan_file(tmp_path)
    out, problem = {"under-a-file": (tmp_path / "f" / "sub", f"{tmp_path / 'f'} is a file, not a directory"),
                    "a-file": (tmp_path / "f", "exists and is a file"),
                    "proc": (Path("/proc/x"), "/proc does not accept new files")}[target]
    r = run_cli("render", str(path), "--out", str(out))
    assert r.code == 2 and "Traceback" not in r.err, r.err
    assert r.err.startswith(f"Error: --out {out}: ") and problem in r.err and r.err.strip().count("\n") == 0, r.err


def test_dev_zero_as_input_exits_2() -> None:
    for argv in (("validate", "/dev/zero"), ("plan", "/dev/zero"), ("diff", "/dev/zero", "/dev/zero")):
        r = run_cli(*argv)
        assert r.code == 2 and "not a regular file" in r.err, argv


def test_a_bug_is_an_internal_error_exit_70_without_traceback(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    import infragen.sizing

    def broken(path: object, **_: object) -> None:
        raise ZeroDivisionError("x" * 10_000)

    monkeypatch.setattr(infragen.sizing, "plan_file", broken)
    workload = tmp_path / "w.yaml"
    workload.write_text(GOOD)
    r = run_cli("plan", str(workload))
    assert r.code == 70
    assert r.err.startswith("Error: internal error (ZeroDivisionError: xxx") and "--debug" in r.err
    assert "Traceback" not in r.err and len(r.err) < 600
    with pytest.raises(ZeroDivisionError):
        run_cli("--debug", "plan", str(workload))


def test_catalog_refresh_out_under_a_file_exits_2(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    r = run_cli("catalog", "refresh", "--cloud", "aws", "--out", str(tmp_path / "f" / "data"))
    assert r.code == 2 and r.err.startswith(f"Error: --out {tmp_path / 'f' / 'data'}: ") and "Traceback" not in r.err
