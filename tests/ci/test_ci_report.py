"""infragen.ci_report: stack configs, affected-stack detection, preview decisions, the sticky comment, planning."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from infragen.ci_report import (
    GLOBAL_TRIGGERS,
    MARKER,
    AffectedStack,
    PlanOutcome,
    PreviewEnv,
    StackConfig,
    build_reports,
    load_stack_configs,
    main,
    parse_stack_config,
    plan_stack,
    preview_env_from,
    preview_matrix,
    render_comment,
    run_report,
    select_affected_stacks,
    select_preview,
)
from infragen.errors import InputError
from tests.plan_factory import make_plan

CHAT = StackConfig("chat", "stacks/Pulumi.chat.yaml", "examples/team-chatbot.yaml")
EDGE = StackConfig("edge", "stacks/Pulumi.edge.yaml", "examples/cpu-edge.yaml")
PINNED = StackConfig("big", "stacks/Pulumi.big.yaml", None, "plans/big.json")
READY = PreviewEnv(backend_url=True, aws_role=True, alicloud_keys=True)


def test_parse_stack_config_short_and_long_forms() -> None:
    text = "config:\n  aws:region: us-east-1\n  infragen:workload: ./examples/team-chatbot.yaml\n"
    cfg = parse_stack_config("chat", "stacks/Pulumi.chat.yaml", text)
    assert cfg == CHAT
    long = "config:\n  infragen:planFile:\n    value: plans/big.json\n"
    assert parse_stack_config("big", "stacks/Pulumi.big.yaml", long) == PINNED
    assert parse_stack_config("x", "stacks/Pulumi.x.yaml", "").workload is None
    with pytest.raises(InputError, match=r"stacks/Pulumi\.x\.yaml: malformed YAML"):
        parse_stack_config("x", "stacks/Pulumi.x.yaml", "config: [unclosed\n")


def test_load_stack_configs_reads_only_stack_files(tmp_path: Path) -> None:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.chat.yaml").write_text("config:\n  infragen:workload: examples/team-chatbot.yaml\n")
    (tmp_path / "stacks" / "__main__.py").write_text("")
    (tmp_path / "stacks" / "notes.yaml").write_text("config: {}\n")
    assert load_stack_configs(tmp_path) == {"chat": CHAT}
    assert load_stack_configs(tmp_path / "nowhere") == {}


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        (["README.md", "docs/ci.md"], {}),
        (["examples/team-chatbot.yaml"], {"chat": ("examples/team-chatbot.yaml",)}),
        (["./stacks/Pulumi.edge.yaml"], {"edge": ("stacks/Pulumi.edge.yaml",)}),
        (["templates/vllm.yaml.j2"], {"chat": ("templates/",), "edge": ("templates/",), "big": ("templates/",)}),
        (["infragen/sizing/memory.py", "examples/cpu-edge.yaml"],
         {"chat": ("infragen/",), "edge": ("examples/cpu-edge.yaml", "infragen/"), "big": ("infragen/",)}),
        (["pyproject.toml"], {"chat": ("pyproject.toml",), "edge": ("pyproject.toml",), "big": ("pyproject.toml",)}),
        (["plans/big.json"], {"big": ("plans/big.json",)}),
        (["examples/enterprise-70b.yaml", "infragen_notes/x.md", "templatesX"], {}),
    ],
)
def test_affected_stacks(changed: list[str], expected: dict[str, tuple[str, ...]]) -> None:
    stacks = {"chat": CHAT, "edge": EDGE, "big": PINNED}
    found = select_affected_stacks(stacks, stacks, changed)
    assert {s.name: s.reasons for s in found} == expected
    assert [s.name for s in found] == sorted(expected)


def test_added_removed_and_repointed_stacks() -> None:
    moved = StackConfig("chat", CHAT.config_path, "examples/light-api.yaml")
    head = {"chat": moved, "new": StackConfig("new", "stacks/Pulumi.new.yaml", "examples/light-api.yaml")}
    base = {"chat": CHAT, "old": StackConfig("old", "stacks/Pulumi.old.yaml", "examples/cpu-edge.yaml")}
    changed = ["stacks/Pulumi.chat.yaml", "stacks/Pulumi.new.yaml", "stacks/Pulumi.old.yaml"]
    found = {s.name: s for s in select_affected_stacks(head, base, changed)}
    assert found["new"].base is None and found["new"].head is not None
    assert found["old"].head is None and found["old"].base is not None
    assert found["chat"].head == moved and found["chat"].base == CHAT
    # editing the base's workload after re-pointing the stack still counts (the base plan changes)
    assert [s.name for s in select_affected_stacks(head, base, ["examples/team-chatbot.yaml"])] == ["chat"]


def test_every_global_trigger_affects_every_stack() -> None:
    for trigger in GLOBAL_TRIGGERS:
        path = trigger + "x.py" if trigger.endswith("/") else trigger
        assert [s.name for s in select_affected_stacks({"chat": CHAT}, {}, [path])] == ["chat"], trigger


@pytest.mark.parametrize(
    ("cloud", "env", "runs", "note"),
    [
        ("aws", READY, True, "pulumi/actions"),
        ("alicloud", READY, True, "pulumi/actions"),
        ("aws", PreviewEnv(is_fork=True, backend_url=True, aws_role=True), False, "forks"),
        ("aws", PreviewEnv(aws_role=True), False, "PULUMI_BACKEND_URL"),
        ("aws", PreviewEnv(backend_url=True, alicloud_keys=True), False, "AWS_ROLE_ARN"),
        ("alicloud", PreviewEnv(backend_url=True, aws_role=True), False, "ALICLOUD_ACCESS_KEY"),
        (None, READY, False, "did not plan"),
    ],
)
def test_select_preview(cloud: str | None, env: PreviewEnv, runs: bool, note: str) -> None:
    ok, text = select_preview(cloud, env)
    assert ok is runs
    assert note in text


def test_preview_env_from_flags() -> None:
    env = preview_env_from({"INFRAGEN_CI_IS_FORK": "false", "INFRAGEN_CI_HAS_BACKEND": "true",
                            "INFRAGEN_CI_HAS_AWS_ROLE": "true", "INFRAGEN_CI_HAS_ALICLOUD_KEYS": "false"})
    assert env == PreviewEnv(is_fork=False, backend_url=True, aws_role=True, alicloud_keys=False)
    assert preview_env_from({}) == PreviewEnv()


def _reports(env: PreviewEnv = READY):  # type: ignore[no-untyped-def]
    base_plan, head_plan = make_plan("single"), make_plan("packed")
    ali = make_plan("cpu", "alicloud")
    affected = [
        AffectedStack("chat", CHAT, CHAT, ("examples/team-chatbot.yaml",)),
        AffectedStack("edge", EDGE, None, ("stacks/Pulumi.edge.yaml",)),
        AffectedStack("gone", None, PINNED, ("stacks/Pulumi.gone.yaml",)),
        AffectedStack("broken", CHAT, CHAT, ("infragen/",)),
    ]
    outcomes = {
        "chat": (PlanOutcome(plan=base_plan), PlanOutcome(plan=head_plan, markdown="## Plan: chat\nfull text")),
        "edge": (PlanOutcome(), PlanOutcome(plan=ali)),
        "gone": (PlanOutcome(plan=base_plan), PlanOutcome()),
        "broken": (PlanOutcome(plan=base_plan),
                   PlanOutcome(error="`infragen plan examples/team-chatbot.yaml` exited 3:\nError: no instance fits")),
    }
    return build_reports(affected, outcomes, env), base_plan, head_plan, ali


def test_reports_diff_statuses_and_preview_matrix() -> None:
    reports, *_ = _reports()
    by = {r.stack.name: r for r in reports}
    assert by["chat"].diff is not None and by["chat"].diff.status == "changed"
    assert by["edge"].diff is not None and by["edge"].diff.status == "new"
    assert by["gone"].diff is not None and by["gone"].diff.status == "removed"
    assert by["broken"].diff is None  # a failed head is not a removed stack
    assert preview_matrix(reports) == [{"stack": "chat", "cloud": "aws", "region": "us-east-1"},
                                       {"stack": "edge", "cloud": "alicloud", "region": "cn-hangzhou"}]
    assert not by["gone"].preview and "destroy" in by["gone"].preview_note


def test_comment_has_marker_summary_diffs_and_errors() -> None:
    reports, base_plan, head_plan, ali = _reports()
    text = render_comment(reports, head_sha="abcdef1234", base_sha="0123456789")
    assert text.startswith(MARKER + "\n")
    assert text.count(MARKER) == 1
    assert "4 stacks affected (PR `abcdef1` · base `0123456`)" in text
    assert "| `chat` | changed | 1 × `g6e.12xlarge` (l40s-48gb) |" in text
    assert "| **Instance type** | g6e.xlarge | g6e.12xlarge | changed |" in text
    assert "| `gone` | removed |" in text and "| `edge` | new |" in text
    assert "| `broken` | planning failed on PR ⚠️ |" in text and "Error: no instance fits" in text
    assert "<summary>Full plan on this PR</summary>" in text and "full text" in text
    # total: base = chat + gone + broken (three base plans); PR = chat + edge
    before = 3 * base_plan.cost.usd_per_month
    after = head_plan.cost.usd_per_month + ali.cost.usd_per_month
    assert f"${before:,.2f} → ${after:,.2f}" in text


def test_comment_for_forks_says_why_previews_skip() -> None:
    reports, *_ = _reports(PreviewEnv(is_fork=True, backend_url=True, aws_role=True, alicloud_keys=True))
    assert preview_matrix(reports) == []
    assert "pull requests from forks get no secrets" in render_comment(reports)


def test_comment_without_affected_stacks() -> None:
    text = render_comment([], head_sha="abcdef1234")
    assert text.startswith(MARKER)
    assert "No stack is affected" in text and "`templates/`" in text


def test_long_comment_drops_full_plans_then_truncates() -> None:
    reports, *_ = _reports()
    full = render_comment(reports)
    shorter = render_comment(reports, max_chars=len(full) - 1)
    assert "Full plan on this PR" not in shorter and "| **Instance type** |" in shorter
    tiny = render_comment(reports, max_chars=800)
    assert len(tiny) <= 800 and tiny.startswith(MARKER) and "truncated" in tiny


def test_plan_stack_pinned_plan_and_missing_config(tmp_path: Path) -> None:
    plan = make_plan("tp")
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "big.json").write_text(plan.to_json())
    got = plan_stack(tmp_path, PINNED, tmp_path / "out.json")
    assert got.plan == plan and got.error is None
    assert plan_stack(tmp_path, None, tmp_path / "out.json") == PlanOutcome()
    bad = plan_stack(tmp_path, StackConfig("big", PINNED.config_path, None, "plans/absent.json"), tmp_path / "o.json")
    assert bad.plan is None and bad.error is not None and "absent.json: file not found" in bad.error


def test_plan_stack_reports_a_failing_planner(tmp_path: Path) -> None:
    # A real subprocess with this interpreter: the workload file is absent, so `infragen plan` must fail: exit 2
    # with the planner's message; exit 1 (a traceback) from a tree that has no planner yet, like an old base branch.
    cfg = StackConfig("x", "stacks/Pulumi.x.yaml", "examples/absent.yaml")
    got = plan_stack(tmp_path, cfg, tmp_path / "out" / "x.json", python=sys.executable, timeout_s=120)
    assert got.plan is None and got.error is not None
    code = 2 if importlib.util.find_spec("infragen.cli.plan_cmd") else 1
    assert got.error.startswith(f"`infragen plan examples/absent.yaml` exited {code}:")
    if code == 2:
        assert "absent.yaml" in got.error.splitlines()[1]


def _tree(root: Path, stacks: dict[str, str]) -> Path:
    (root / "stacks").mkdir(parents=True)
    for name, body in stacks.items():
        (root / "stacks" / f"Pulumi.{name}.yaml").write_text(body)
    return root


def test_run_report_with_pinned_plans_end_to_end(tmp_path: Path) -> None:
    base = _tree(tmp_path / "base", {"big": "config:\n  infragen:planFile: plans/big.json\n"})
    head = _tree(tmp_path / "head", {"big": "config:\n  infragen:planFile: plans/big.json\n"})
    for root, kind in ((base, "single"), (head, "packed")):
        (root / "plans").mkdir()
        (root / "plans" / "big.json").write_text(make_plan(kind).to_json())  # type: ignore[arg-type]
    comment, reports = run_report(head, base, ["plans/big.json"], tmp_path / "out", READY)
    assert (tmp_path / "out" / "comment.md").read_text() == comment
    assert [r.diff.status for r in reports if r.diff] == ["changed"]
    assert "| **Replicas** | 2 | 4 | +2 (+100.0%) |" in comment


def test_main_affected_writes_github_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head = _tree(tmp_path / "head", {"chat": "config:\n  infragen:workload: examples/team-chatbot.yaml\n",
                                     "edge": "config:\n  infragen:workload: examples/cpu-edge.yaml\n"})
    changed = tmp_path / "changed.txt"
    changed.write_text("examples/cpu-edge.yaml\nREADME.md\n")
    out = tmp_path / "gh_output"
    assert main(["affected", "--head", str(head), "--changed-files", str(changed), "--github-output", str(out)]) == 0
    assert json.loads(capsys.readouterr().out) == [{"stack": "edge"}]
    assert out.read_text() == 'stacks=[{"stack": "edge"}]\n'
    assert main(["affected", "--head", str(head), "--all"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"stack": "chat"}, {"stack": "edge"}]
    assert main(["affected", "--head", str(head), "--all", "--stack", "chat"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"stack": "chat"}]
    assert main(["affected", "--head", str(head), "--all", "--stack", "chatt"]) == 2
    assert "did you mean 'chat'" in capsys.readouterr().err
    assert main(["affected", "--head", str(head)]) == 2


def test_the_repositorys_stacks_point_at_existing_files() -> None:
    # The real stacks/ folder: every stack names a workload (or plan) that exists, so CI can plan it.
    root = Path(__file__).resolve().parents[2]
    stacks = load_stack_configs(root)
    if not stacks:
        pytest.skip("no stacks/Pulumi.<stack>.yaml in this checkout")
    for cfg in stacks.values():
        target = cfg.plan_file or cfg.workload
        assert target is not None, f"{cfg.config_path} sets neither infragen:workload nor infragen:planFile"
        assert (root / target).is_file(), f"{cfg.config_path}: {target} does not exist"
    # a change to one example affects exactly the stacks that use it
    some = next(iter(stacks.values()))
    users = sorted(c.name for c in stacks.values() if some.workload and c.workload == some.workload)
    assert [s.name for s in select_affected_stacks(stacks, stacks, [str(some.workload)])] == users


def test_both_sides_failing_are_both_named() -> None:
    failed = PlanOutcome(error="`infragen plan examples/team-chatbot.yaml` exited 1:\nModuleNotFoundError: plan_cmd")
    (report,) = build_reports([AffectedStack("chat", CHAT, CHAT, ("infragen/",))], {"chat": (failed, failed)}, READY)
    text = render_comment([report])
    assert "| `chat` | planning failed on base and PR ⚠️ | — | — |" in text
    assert text.count("ModuleNotFoundError: plan_cmd") == 2
    assert "skipped: the stack did not plan on this PR" in text


def test_main_report_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pinned = "config:\n  infragen:planFile: plans/{}.json\n"
    base = _tree(tmp_path / "base", {"a": pinned.format("a"), "b": pinned.format("b")})
    head = _tree(tmp_path / "head", {"a": pinned.format("a"), "b": pinned.format("b")})
    for root in (base, head):
        (root / "plans").mkdir()
        (root / "plans" / "a.json").write_text(make_plan("single").to_json())
    (base / "plans" / "b.json").write_text(make_plan("cpu").to_json())  # b's plan is missing on the PR
    changed = tmp_path / "changed.txt"
    changed.write_text("pyproject.toml\n")
    environ = {"INFRAGEN_CI_IS_FORK": "false", "INFRAGEN_CI_HAS_BACKEND": "true",
               "INFRAGEN_CI_HAS_AWS_ROLE": "true", "INFRAGEN_CI_HAS_ALICLOUD_KEYS": "false"}
    gh = tmp_path / "gh_output"
    out = tmp_path / "out"
    code = main(["report", "--head", str(head), "--base", str(base), "--changed-files", str(changed),
                 "--out-dir", str(out), "--github-output", str(gh), "--head-sha", "abcdef0123"], environ)
    assert code == 0
    outputs = dict(line.split("=", 1) for line in gh.read_text().splitlines())
    assert json.loads(outputs["previews"]) == [{"stack": "a", "cloud": "aws", "region": "us-east-1"}]
    assert outputs["affected"] == "2" and outputs["head_failures"] == "1"
    assert Path(outputs["comment"]).read_text() == capsys.readouterr().out.rstrip("\n") + "\n"
    summary = {row["stack"]: row for row in json.loads((out / "summary.json").read_text())}
    assert summary["a"]["status"] == "unchanged" and summary["b"]["status"] == "failed"
    assert "b.json: file not found" in summary["b"]["head_error"]


def test_ci_modules_import_no_pulumi_click_or_jinja2() -> None:
    code = ("import sys, infragen.ci_report, infragen.diff; "
            "bad = [m for m in ('pulumi', 'click', 'jinja2', 'infragen.sizing') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
