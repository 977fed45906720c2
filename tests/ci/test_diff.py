"""infragen.diff on hand-built plans: rows, deltas, new/removed stacks, markdown, and `infragen diff` exit codes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from infragen.cli import main
from infragen.diff import diff_plans, diff_to_dict, format_usd, render_diff_markdown, render_diff_table
from infragen.errors import InputError
from infragen.plan import Plan
from tests.plan_factory import make_plan


def _scaled(plan: Plan, replicas: int) -> Plan:
    """The same deployment with more replicas (one per node) and the cost scaled with the nodes."""
    d = plan.deployment.model_copy(update={"replicas": replicas, "nodes": replicas})
    factor = replicas / plan.deployment.nodes
    c = plan.cost.model_copy(update={"usd_per_hour": plan.cost.usd_per_hour * factor,
                                     "usd_per_month": plan.cost.usd_per_month * factor})
    return plan.model_copy(update={"deployment": d, "cost": c})


def test_more_replicas_shows_count_and_cost_deltas() -> None:
    base = make_plan("single")
    new = _scaled(base, 3)
    diff = diff_plans(base, new)
    assert diff.status == "changed"
    assert (diff.row("Replicas").before, diff.row("Replicas").after) == (2, 3)
    assert diff.row("GPUs (total)").delta == 1
    assert diff.cost.delta == pytest.approx(base.cost.usd_per_month / 2)
    assert diff.cost.delta_pct == pytest.approx(50.0)
    assert not diff.row("Instance type").changed
    md = render_diff_markdown(diff)
    per_month = base.cost.usd_per_month
    expected = f"{format_usd(per_month)} → {format_usd(per_month * 1.5)} (+{format_usd(per_month / 2)}, +50.0%)"
    assert f"monthly cost {expected}" in md
    assert "| **Replicas** | 2 | 3 | +1 (+50.0%) |" in md
    assert "| Instance type | g6e.xlarge | g6e.xlarge |  |" in md


def test_instance_tp_and_latency_changes_are_rows() -> None:
    base, new = make_plan("single"), make_plan("tp")
    new = new.model_copy(update={"estimate": new.estimate.model_copy(update={"ttft_ms": 400.0})})
    diff = diff_plans(base, new)
    rows = {r.label: r for r in diff.rows}
    assert (rows["Instance type"].before, rows["Instance type"].after) == ("g6e.xlarge", "g6e.12xlarge")
    assert rows["TP × PP"].after == "4 × 1"
    assert rows["Expected TTFT at peak"].delta == pytest.approx(150.0)
    md = render_diff_markdown(diff)
    assert "| **Expected TTFT at peak** | 250 ms | 400 ms | +150 ms (+60.0%) |" in md
    # fields outside the summary rows are named, not silently dropped
    assert "engine.argv" in diff.other_changes


def test_cheaper_plan_has_negative_delta() -> None:
    base = make_plan("single")
    diff = diff_plans(base, _scaled(base, 1))
    assert diff.cost.delta is not None and diff.cost.delta < 0
    assert f"-{format_usd(base.cost.usd_per_month / 2)} (-50.0%)" in render_diff_markdown(diff)


def test_new_removed_and_unchanged() -> None:
    plan = make_plan("cpu", "alicloud")
    new = diff_plans(None, plan)
    assert new.status == "new" and new.base_digest is None
    headline = f"**New stack** `{plan.workload}`: {format_usd(plan.cost.usd_per_month)}/month."
    assert render_diff_markdown(new).startswith(headline)
    assert "| | This PR |\n|---|---|\n| Cloud / region | alicloud cn-hangzhou |" in render_diff_markdown(new)
    assert "| Instance type | ecs.c7.4xlarge |" in render_diff_markdown(new)
    gone = diff_plans(plan, None)
    assert gone.status == "removed"
    assert render_diff_markdown(gone).startswith(f"**Removed stack** `{plan.workload}`: was ")
    assert "| | Base |" in render_diff_markdown(gone)
    same = diff_plans(plan, plan.model_copy())
    assert same.status == "unchanged" and same.other_changes == ()
    assert "identical" in render_diff_markdown(same)
    with pytest.raises(InputError):
        diff_plans(None, None)


def test_cpu_arch_change_is_reported_even_without_a_row() -> None:
    base = make_plan("cpu")
    new = base.model_copy(update={"deployment": base.deployment.model_copy(update={"cpu_arch": "arm64"})})
    diff = diff_plans(base, new)
    assert diff.status == "changed"
    assert diff.other_changes == ("deployment.cpu_arch",)


def test_table_and_json_forms() -> None:
    diff = diff_plans(make_plan("single"), make_plan("packed"))
    table = render_diff_table(diff)
    assert any(line.startswith("* Instance type") for line in table.splitlines())
    assert any(line.startswith("  GPU ") for line in table.splitlines())
    data = json.loads(json.dumps(diff_to_dict(diff)))
    assert data["status"] == "changed"
    assert data["monthly_cost_delta_usd"] == pytest.approx(diff.cost.delta)


# ---------------------------------------------------------------- the CLI


def _write(tmp_path: Path, name: str, plan: Plan) -> Path:
    path = tmp_path / name
    path.write_text(plan.to_json(), encoding="utf-8")
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
        sys.exit(0)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_cli_markdown_json_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path, "a.json", make_plan("single"))
    b = _write(tmp_path, "b.json", make_plan("tp"))
    code, out, _ = _run(["diff", str(a), str(b), "--format", "markdown"], capsys)
    assert code == 0 and "| **Instance type** | g6e.xlarge | g6e.12xlarge | changed |" in out
    code, out, _ = _run(["diff", str(a), str(b), "--format", "json"], capsys)
    assert code == 0 and json.loads(out)["status"] == "changed"
    code, out, _ = _run(["diff", str(a), str(b)], capsys)
    assert code == 0 and out.startswith("test-tp-aws: changed;")


def test_cli_new_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = _write(tmp_path, "b.json", make_plan("single"))
    code, out, _ = _run(["diff", "-", str(b), "--format", "markdown"], capsys)
    assert code == 0 and out.startswith("**New stack**")
    code, out, _ = _run(["diff", "--missing-base-ok", str(tmp_path / "absent.json"), str(b), "--format", "json"],
                        capsys)
    assert code == 0 and json.loads(out)["status"] == "new"


def test_cli_missing_or_invalid_plan_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = _write(tmp_path, "b.json", make_plan("single"))
    code, _, err = _run(["diff", str(tmp_path / "absent.json"), str(b)], capsys)
    assert code == 2 and "absent.json: file not found" in err and "Traceback" not in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1}', encoding="utf-8")
    code, _, err = _run(["diff", str(bad), str(b)], capsys)
    assert code == 2 and err.startswith("Error: ") and "bad.json" in err
    edited = json.loads(b.read_text())
    edited["cost"]["usd_per_month"] = 1.0  # hand edit: the digest no longer matches
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(edited), encoding="utf-8")
    code, _, err = _run(["diff", str(b), str(tampered)], capsys)
    assert code == 2 and "digest" in err
    code, _, err = _run(["diff", "-", "-"], capsys)
    assert code == 2 and "nothing to compare" in err
