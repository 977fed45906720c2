"""`infragen render`: files written per role, exit status 2 on bad input, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infragen.cli import main
from tests.plan_factory import make_plan


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_render_plan_json_writes_each_role(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = make_plan("multinode", "alicloud")
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    code, out, _ = _run(["render", str(path), "--out", str(tmp_path / "ud"), "--head-address", "10.40.1.10"], capsys)
    assert code == 0
    assert sorted(p.name for p in (tmp_path / "ud").iterdir()) == ["head.yaml", "worker.yaml"]
    worker = yaml.safe_load((tmp_path / "ud" / "worker.yaml").read_text())
    ray = next(f["content"] for f in worker["write_files"] if f["path"].endswith("infragen-ray"))
    assert "HEAD=10.40.1.10" in ray
    assert plan.digest in out


def test_render_bad_inputs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["render", str(tmp_path / "missing.json"), "--out", str(tmp_path)], capsys)
    assert code == 2 and err.startswith("Error:") and "does not exist" in err
    path = tmp_path / "plan.json"
    path.write_text(make_plan("single").to_json())
    code, _, err = _run(["render", str(path), "--out", str(tmp_path), "--head-address", "nope"], capsys)
    assert code == 2 and "not an IPv4 address" in err and "Traceback" not in err
    tampered = path.read_text().replace('"g6e.xlarge"', '"g6e.2xlarge"')
    path.write_text(tampered)
    code, _, err = _run(["render", str(path), "--out", str(tmp_path)], capsys)
    assert code == 2 and "digest" in err


def test_render_a_workload_plans_it_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import infragen.sizing as sizing

    if not hasattr(sizing, "plan_file"):
        pytest.skip("infragen.sizing.plan_file is not written yet (planner engineer)")
    example = Path(__file__).resolve().parents[2] / "examples" / "team-chatbot.yaml"
    code, out, err = _run(["render", str(example), "--out", str(tmp_path)], capsys)
    assert code == 0, err
    assert (tmp_path / "replica.yaml").read_text().startswith("#cloud-config")
    assert "plan " in out
