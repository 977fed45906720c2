"""The diff and the PR report on plans the real planner makes from the examples (skips until the planner exists).

Scenario of a pull request: the team-chatbot workload's traffic triples, and its precision changes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from infragen import sizing
from infragen.ci_report import MARKER, PreviewEnv, run_report
from infragen.cli import main
from infragen.diff import diff_plans, render_diff_markdown
from infragen.plan import Plan

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "team-chatbot.yaml"


def _planner() -> Callable[[Path], Plan]:
    plan_file = getattr(sizing, "plan_file", None)
    if plan_file is None:
        pytest.skip("infragen.sizing.plan_file is not written yet (planner engineer)")
    return plan_file  # type: ignore[no-any-return]


def _variant(tmp_path: Path, name: str, edit: Callable[[dict[str, Any]], None]) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _triple_traffic(data: dict[str, Any]) -> None:
    data["traffic"]["peak_requests_per_s"] *= 3


def test_tripled_traffic_costs_more_and_says_so(tmp_path: Path) -> None:
    plan_file = _planner()
    base = plan_file(EXAMPLE)
    new = plan_file(_variant(tmp_path, "busier.yaml", _triple_traffic))
    diff = diff_plans(base, new)
    assert diff.status == "changed"
    assert new.cost.usd_per_month > base.cost.usd_per_month
    assert diff.cost.delta == pytest.approx(new.cost.usd_per_month - base.cost.usd_per_month)
    total_capacity = diff.row("Capacity (req/s, all replicas)")
    assert total_capacity.after >= 3 * 25 * 0.999  # the new plan carries the tripled peak
    md = render_diff_markdown(diff)
    assert "| **Monthly cost** |" in md
    assert f"${base.cost.usd_per_month:,.2f} → ${new.cost.usd_per_month:,.2f}" in md


def test_same_workload_plans_identically(tmp_path: Path) -> None:
    plan_file = _planner()
    copy = _variant(tmp_path, "same.yaml", lambda d: None)
    diff = diff_plans(plan_file(EXAMPLE), plan_file(copy))
    assert diff.status == "unchanged", diff.other_changes


def test_cli_diff_on_planned_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan_file = _planner()
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(plan_file(EXAMPLE).to_json())
    b.write_text(plan_file(_variant(tmp_path, "busier.yaml", _triple_traffic)).to_json())
    with pytest.raises(SystemExit) as exc:
        main(["diff", str(a), str(b), "--format", "json"])
        sys.exit(0)
    assert exc.value.code in (0, None)
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "changed" and data["monthly_cost_delta_usd"] > 0


def test_pr_report_plans_both_trees_with_the_cli(tmp_path: Path) -> None:
    _planner()
    trees = {}
    for side, edit in (("base", lambda d: None), ("head", _triple_traffic)):
        root = tmp_path / side
        (root / "stacks").mkdir(parents=True)
        (root / "examples").mkdir()
        _variant(root / "examples", "chat.yaml", edit)
        (root / "stacks" / "Pulumi.chat.yaml").write_text("config:\n  infragen:workload: examples/chat.yaml\n")
        trees[side] = root
    comment, reports = run_report(trees["head"], trees["base"], ["examples/chat.yaml"], tmp_path / "out",
                                  PreviewEnv(backend_url=True, aws_role=True))
    (report,) = reports
    assert report.base.error is None and report.head.error is None, (report.base.error, report.head.error)
    assert report.diff is not None and report.diff.status == "changed"
    assert comment.startswith(MARKER) and "| `chat` | changed |" in comment
    assert (tmp_path / "out" / "head" / "chat.json").is_file() and (tmp_path / "out" / "base" / "chat.json").is_file()
