"""Pull-request CI logic: which stacks a change affects, planning them on base and head, the sticky comment.

Pure functions plus a thin `python -m infragen.ci_report` entry for the workflows. Plans by running each tree's own
`infragen plan` in a subprocess (so the base is planned by the base's code); never calls a cloud API or Pulumi.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infragen.diff import PlanDiff, diff_plans, format_change, format_usd, render_diff_markdown
from infragen.errors import InfragenError, InputError, UnknownNameError
from infragen.plan import Plan, load_plan
from infragen.present.mermaid import cost_chart

#: Hidden first line of the sticky comment; the workflow finds (and edits) the comment carrying it.
MARKER = "<!-- infragen-plan -->"
#: Where stack configs live (Pulumi.yaml `stackConfigDir`), relative to the project root.
STACKS_DIR = "stacks"
#: A change under any of these affects every stack (they are the program, its templates and its dependencies).
GLOBAL_TRIGGERS: tuple[str, ...] = ("infragen/", "templates/", "pyproject.toml", "Pulumi.yaml", "stacks/__main__.py")
#: GitHub rejects comment bodies over 65,536 characters; keep a margin for the truncation note.
MAX_COMMENT_CHARS = 60_000
#: One `infragen plan` run may take this long before it is reported as failed.
PLAN_TIMEOUT_S = 300

_STACK_FILE = re.compile(r"^Pulumi\.(?P<stack>[^/]+)\.ya?ml$")


@dataclass(frozen=True)
class StackConfig:
    """The parts of one `stacks/Pulumi.<stack>.yaml` that CI needs."""

    name: str
    """Stack name (`team-chatbot` for `stacks/Pulumi.team-chatbot.yaml`)."""
    config_path: str
    """The stack config file, relative to the project root."""
    workload: str | None
    """`infragen:workload`, relative to the project root; None when a plan file is pinned."""
    plan_file: str | None = None
    """`infragen:planFile` (a reviewed plan deployed as is), relative to the project root."""


@dataclass(frozen=True)
class AffectedStack:
    """A stack the change touches, with its config on each side and why it counts as affected."""

    name: str
    """Stack name."""
    head: StackConfig | None
    """Its config on the pull request; None when the PR removes the stack."""
    base: StackConfig | None
    """Its config on the base branch; None when the PR adds the stack."""
    reasons: tuple[str, ...]
    """Changed paths (or path prefixes) that make it affected."""


@dataclass(frozen=True)
class PlanOutcome:
    """The result of planning one stack on one side."""

    plan: Plan | None = None
    """The plan; None when there is no config on that side or planning failed."""
    markdown: str | None = None
    """`infragen plan --format markdown` output, when the planner printed it."""
    error: str | None = None
    """What went wrong, for the comment (the planner's `Error:` text, or why it could not run)."""


@dataclass(frozen=True)
class PreviewEnv:
    """What the workflow run has for `pulumi preview` (from repository variables and secrets)."""

    is_fork: bool = False
    """The PR comes from a fork: GitHub withholds secrets and OIDC tokens."""
    backend_url: bool = False
    """Repository variable PULUMI_BACKEND_URL is set."""
    aws_role: bool = False
    """Repository variable AWS_ROLE_ARN is set (OIDC role to assume)."""
    alicloud_keys: bool = False
    """Secrets ALICLOUD_ACCESS_KEY and ALICLOUD_SECRET_KEY are set."""


@dataclass(frozen=True)
class StackReport:
    """Everything the comment says about one affected stack."""

    stack: AffectedStack
    """Which stack and why."""
    base: PlanOutcome
    """Planned on the base branch."""
    head: PlanOutcome
    """Planned on the pull request."""
    preview: bool = False
    """Whether a `pulumi preview` job runs for it."""
    preview_note: str = ""
    """Why the preview is skipped, or where it is posted."""
    diff: PlanDiff | None = field(default=None)
    """Base vs head, when at least one side planned."""


# ---------------------------------------------------------------- stack configs and affected stacks


def _norm(path: str) -> str:
    path = path.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def parse_stack_config(name: str, config_path: str, text: str) -> StackConfig:
    """Read the `infragen:workload` / `infragen:planFile` keys of a Pulumi stack config's YAML text."""
    from infragen.safe_load import parse_yaml_text

    data = parse_yaml_text(text, config_path) or {}  # stack configs come with pull requests: bounded parsing
    config = data.get("config") if isinstance(data, dict) else None
    config = config if isinstance(config, dict) else {}

    def _key(key: str) -> str | None:
        value = config.get(f"infragen:{key}")
        if isinstance(value, dict):  # Pulumi's long form: {value: ...}
            value = value.get("value")
        return _norm(str(value)) if value else None

    return StackConfig(name=name, config_path=config_path, workload=_key("workload"), plan_file=_key("planFile"))


def load_stack_configs(root: Path, stacks_dir: str = STACKS_DIR) -> dict[str, StackConfig]:
    """Every `Pulumi.<stack>.yaml` under `root/stacks_dir`, by stack name (empty when the folder is absent)."""
    folder = root / stacks_dir
    if not folder.is_dir():
        return {}
    out: dict[str, StackConfig] = {}
    for path in sorted(folder.iterdir()):
        m = _STACK_FILE.match(path.name)
        if m and path.is_file():
            rel = f"{_norm(stacks_dir)}/{path.name}"
            out[m["stack"]] = parse_stack_config(m["stack"], rel, path.read_text(encoding="utf-8"))
    return out


def select_affected_stacks(
    head: Mapping[str, StackConfig], base: Mapping[str, StackConfig], changed_files: Iterable[str],
    *, global_triggers: Sequence[str] = GLOBAL_TRIGGERS,
) -> list[AffectedStack]:
    """Stacks (on either side) whose config, workload, pinned plan or shared code changed, sorted by name."""
    changed = {_norm(p) for p in changed_files if p.strip()}
    shared = sorted(t for t in global_triggers
                    if any(p == t or (t.endswith("/") and p.startswith(t)) for p in changed))
    out: list[AffectedStack] = []
    for name in sorted(set(head) | set(base)):
        own: list[str] = []
        for cfg in (head.get(name), base.get(name)):
            if cfg is None:
                continue
            own += [p for p in (cfg.config_path, cfg.workload, cfg.plan_file) if p and p in changed and p not in own]
        reasons = tuple(own + [t for t in shared if t not in own])
        if reasons:
            out.append(AffectedStack(name=name, head=head.get(name), base=base.get(name), reasons=reasons))
    return out


# ---------------------------------------------------------------- planning


def plan_stack(root: Path, config: StackConfig | None, out_json: Path, *, python: str = sys.executable,
               timeout_s: float = PLAN_TIMEOUT_S) -> PlanOutcome:
    """Plan one stack with the infragen code in `root` (a subprocess with PYTHONPATH=root), or load its pinned plan."""
    if config is None:
        return PlanOutcome()
    if config.plan_file:
        try:
            return PlanOutcome(plan=load_plan(root / config.plan_file))
        except InfragenError as exc:
            return PlanOutcome(error=exc.render())
    if not config.workload:
        return PlanOutcome(error=f"{config.config_path} sets neither infragen:workload nor infragen:planFile")
    out_json.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root.resolve()), *filter(None, [env.get("PYTHONPATH")])])
    argv = [python, "-m", "infragen", "plan", config.workload, "--format", "markdown", "--out", str(out_json.resolve())]
    try:
        proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return PlanOutcome(error=f"`infragen plan {config.workload}` ran past {timeout_s:.0f} s")
    if proc.returncode != 0:
        text = (proc.stderr.strip() or proc.stdout.strip() or "(no output)").splitlines()
        tail = "\n".join(text[-8:])  # the end of a traceback says what broke
        return PlanOutcome(error=f"`infragen plan {config.workload}` exited {proc.returncode}:\n{tail}")
    try:
        plan = load_plan(out_json)
    except InfragenError as exc:
        return PlanOutcome(error=f"the plan written by `infragen plan {config.workload}` cannot be read: {exc.message}")
    return PlanOutcome(plan=plan, markdown=proc.stdout.strip() or None)


def select_preview(report_cloud: str | None, env: PreviewEnv, *, removed: bool = False) -> tuple[bool, str]:
    """Whether `pulumi preview` can run for a stack on this cloud, and the note the comment shows."""
    if removed:
        return False, "stack removed: merging does not destroy it (run `pulumi destroy` first)"
    if report_cloud is None:
        return False, "skipped: the stack did not plan on this PR"
    if env.is_fork:
        return False, "skipped: pull requests from forks get no secrets or cloud credentials"
    if not env.backend_url:
        return False, "skipped: repository variable `PULUMI_BACKEND_URL` is not set"
    if report_cloud == "aws" and not env.aws_role:
        return False, "skipped: repository variable `AWS_ROLE_ARN` is not set"
    if report_cloud == "alicloud" and not env.alicloud_keys:
        return False, "skipped: secrets `ALICLOUD_ACCESS_KEY` / `ALICLOUD_SECRET_KEY` are not set"
    return True, "posted by pulumi/actions in its own comment"


def build_reports(affected: Sequence[AffectedStack], outcomes: Mapping[str, tuple[PlanOutcome, PlanOutcome]],
                  env: PreviewEnv) -> list[StackReport]:
    """Join each affected stack with its base/head outcomes, its diff and its preview decision."""
    reports: list[StackReport] = []
    for stack in affected:
        base, head = outcomes[stack.name]
        cloud = head.plan.deployment.cloud if head.plan else None
        preview, note = select_preview(cloud, env, removed=stack.head is None)
        # A side whose config exists but failed to plan is not "absent": no diff (it would say new/removed).
        both_ok = (stack.base is None or base.plan is not None) and (stack.head is None or head.plan is not None)
        diff = diff_plans(base.plan, head.plan) if both_ok and (base.plan or head.plan) else None
        reports.append(StackReport(stack=stack, base=base, head=head, preview=preview, preview_note=note, diff=diff))
    return reports


def preview_matrix(reports: Sequence[StackReport]) -> list[dict[str, str]]:
    """`strategy.matrix.include` rows for the preview job: one per stack that can be previewed."""
    return [{"stack": r.stack.name, "cloud": r.head.plan.deployment.cloud, "region": r.head.plan.deployment.region}
            for r in reports if r.preview and r.head.plan is not None]


# ---------------------------------------------------------------- the comment


def _summary_row(r: StackReport) -> str:
    plan = r.head.plan
    if plan is not None:
        d = plan.deployment
        where = f"{d.nodes} × `{d.instance_type}`" + (f" ({d.gpu})" if d.gpu else "")
    else:
        where = "—"
    if r.diff is None:
        sides = [side for side, outcome, cfg in (("base", r.base, r.stack.base), ("PR", r.head, r.stack.head))
                 if outcome.error and cfg is not None]
        status, change = f"planning failed on {' and '.join(sides)} ⚠️", ""
        cost = f"? → {format_usd(plan.cost.usd_per_month)}" if plan is not None else "—"
    else:
        status = r.diff.status
        c = r.diff.cost
        cost = (f"{format_usd(c.before) if c.before is not None else '—'} → "
                f"{format_usd(c.after) if c.after is not None else '—'}")
        change = format_change(c)
    return f"| `{r.stack.name}` | {status} | {where} | {cost} | {change} | {r.preview_note} |"


def _total_line(reports: Sequence[StackReport]) -> str | None:
    before = sum(r.base.plan.cost.usd_per_month for r in reports if r.base.plan)
    after = sum(r.head.plan.cost.usd_per_month for r in reports if r.head.plan)
    if not any(r.base.plan or r.head.plan for r in reports):
        return None
    delta = after - before
    pct = f", {100.0 * delta / before:+.1f}%" if before else ""
    sign = "+" if delta >= 0 else ""
    return (f"Monthly cost of the affected stacks: {format_usd(before)} → {format_usd(after)} "
            f"({sign}{format_usd(delta)}{pct}).")


def _details(summary: str, body: str) -> list[str]:
    return ["<details>", f"<summary>{summary}</summary>", "", body.strip(), "", "</details>", ""]


def _stack_section(r: StackReport, *, full_plans: bool) -> list[str]:
    lines = [f"### `{r.stack.name}`", "", "Affected by: " + ", ".join(f"`{p}`" for p in r.stack.reasons) + ".", ""]
    for side, outcome, present in (("base branch", r.base, r.stack.base), ("this PR", r.head, r.stack.head)):
        if outcome.error and present is not None:
            lines += [f"Planning on the {side} failed:", "", "```", outcome.error.strip(), "```", ""]
    if r.diff is not None:
        lines += [render_diff_markdown(r.diff).strip(), ""]
    chart = cost_chart(r.head.plan) if r.head.plan is not None else ""
    if chart:
        lines += [chart.strip(), ""]
    if full_plans and r.head.markdown:
        lines += _details("Full plan on this PR", r.head.markdown)
    return lines


def render_comment(reports: Sequence[StackReport], *, head_sha: str = "", base_sha: str = "",
                   previews_requested: bool = True, max_chars: int = MAX_COMMENT_CHARS) -> str:
    """The sticky PR comment: marker, summary table, then one section per stack (full plans dropped if too long)."""
    head = ["## infragen plan", ""]
    refs = " · ".join(x for x in (f"PR `{head_sha[:7]}`" if head_sha else "",
                                  f"base `{base_sha[:7]}`" if base_sha else "") if x)
    if not reports:
        body = [MARKER, *head, f"No stack is affected by this pull request{f' ({refs})' if refs else ''}: it changes "
                "no stack config, workload or pinned plan, and none of "
                + ", ".join(f"`{t}`" for t in GLOBAL_TRIGGERS) + "."]
        return "\n".join(body) + "\n"
    intro = f"{len(reports)} stack{'s' if len(reports) != 1 else ''} affected" + (f" ({refs})" if refs else "") + "."
    total = _total_line(reports)
    table = ["| Stack | Plan | Deployment on this PR | Monthly cost (base → PR) | Change | Pulumi preview |",
             "|---|---|---|---|---|---|", *(_summary_row(r) for r in reports)]
    notes = [] if previews_requested else ["Pulumi previews were not requested for this run."]
    for full in (True, False):
        lines = [MARKER, *head, intro, *([total] if total else []), "", *table, "", *notes]
        for r in reports:
            lines += _stack_section(r, full_plans=full)
        text = "\n".join(lines).rstrip() + "\n"
        if len(text) <= max_chars:
            return text
    note = "\n\n…truncated: the comment exceeds GitHub's size limit; the full plans are in the workflow artifacts.\n"
    return text[: max_chars - len(note)] + note


# ---------------------------------------------------------------- entry point for the workflows


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the changed-files list: {exc}") from None


def _write_outputs(path: Path | None, values: Mapping[str, str]) -> None:
    if path is None:
        return
    with path.open("a", encoding="utf-8") as fh:
        for key, value in values.items():
            fh.write(f"{key}={value}\n")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes"}


def preview_env_from(environ: Mapping[str, str]) -> PreviewEnv:
    """Read the INFRAGEN_CI_* flags the workflow sets from its variables and secrets (never their values)."""
    return PreviewEnv(is_fork=_truthy(environ.get("INFRAGEN_CI_IS_FORK")),
                      backend_url=_truthy(environ.get("INFRAGEN_CI_HAS_BACKEND")),
                      aws_role=_truthy(environ.get("INFRAGEN_CI_HAS_AWS_ROLE")),
                      alicloud_keys=_truthy(environ.get("INFRAGEN_CI_HAS_ALICLOUD_KEYS")))


def run_report(head_root: Path, base_root: Path | None, changed_files: Sequence[str], out_dir: Path,
               env: PreviewEnv, *, head_sha: str = "", base_sha: str = "", python: str = sys.executable,
               ) -> tuple[str, list[StackReport]]:
    """Detect, plan both sides, write plans and diffs under out_dir; return the comment and the reports."""
    head_cfgs = load_stack_configs(head_root)
    base_cfgs = load_stack_configs(base_root) if base_root else {}
    affected = select_affected_stacks(head_cfgs, base_cfgs, changed_files)
    outcomes: dict[str, tuple[PlanOutcome, PlanOutcome]] = {}
    for stack in affected:
        base = plan_stack(base_root, stack.base, out_dir / "base" / f"{stack.name}.json", python=python) \
            if base_root else PlanOutcome()
        head = plan_stack(head_root, stack.head, out_dir / "head" / f"{stack.name}.json", python=python)
        outcomes[stack.name] = (base, head)
    reports = build_reports(affected, outcomes, env)
    comment = render_comment(reports, head_sha=head_sha, base_sha=base_sha)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "comment.md").write_text(comment, encoding="utf-8")
    return comment, reports


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """`python -m infragen.ci_report {affected,report}`; expected failures print one `Error:` line, exit 2."""
    parser = argparse.ArgumentParser(prog="python -m infragen.ci_report", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    aff = sub.add_parser("affected", help="print the affected stacks as JSON (matrix rows)")
    rep = sub.add_parser("report", help="plan the affected stacks on base and head and write the PR comment")
    for p in (aff, rep):
        p.add_argument("--head", type=Path, default=Path("."), help="project root of the PR (or pushed) tree")
        p.add_argument("--base", type=Path, default=None, help="project root of the base tree (git worktree)")
        p.add_argument("--changed-files", type=Path, help="file with one changed path a line (git diff --name-only)")
        p.add_argument("--all", action="store_true", help="treat every stack as affected")
        p.add_argument("--github-output", type=Path, default=None, help="append key=value outputs to this file")
    aff.add_argument("--stack", default="", help="keep only this stack (empty = every affected stack)")
    rep.add_argument("--out-dir", type=Path, required=True, help="where plans, diffs and comment.md go")
    rep.add_argument("--head-sha", default="")
    rep.add_argument("--base-sha", default="")
    args = parser.parse_args(argv)
    try:
        if not args.all and args.changed_files is None:
            raise InputError("give --changed-files FILE (or --all)")
        changed = list(GLOBAL_TRIGGERS) if args.all else _read_lines(args.changed_files)
        if args.cmd == "affected":
            head_cfgs = load_stack_configs(args.head)
            stacks = select_affected_stacks(head_cfgs, load_stack_configs(args.base) if args.base else {}, changed)
            if args.stack and args.stack not in head_cfgs:
                raise UnknownNameError("stack", args.stack, head_cfgs, where=f"{args.head / STACKS_DIR}")
            rows = [{"stack": s.name} for s in stacks if s.head is not None and args.stack in ("", s.name)]
            print(json.dumps(rows))
            _write_outputs(args.github_output, {"stacks": json.dumps(rows)})
            return 0
        env = preview_env_from(os.environ if environ is None else environ)
        comment, reports = run_report(args.head, args.base, changed, args.out_dir, env,
                                      head_sha=args.head_sha, base_sha=args.base_sha)
        matrix = preview_matrix(reports)
        (args.out_dir / "summary.json").write_text(json.dumps(_summary_json(reports), indent=2), encoding="utf-8")
        head_failures = sum(1 for r in reports if r.stack.head is not None and r.head.plan is None)
        _write_outputs(args.github_output, {"previews": json.dumps(matrix), "affected": str(len(reports)),
                                            "head_failures": str(head_failures),
                                            "comment": str((args.out_dir / "comment.md").resolve())})
        print(comment)
        return 0
    except InfragenError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_code


def _summary_json(reports: Sequence[StackReport]) -> list[dict[str, Any]]:
    return [{"stack": r.stack.name, "reasons": list(r.stack.reasons), "preview": r.preview,
             "preview_note": r.preview_note, "status": r.diff.status if r.diff else "failed",
             "base_error": r.base.error, "head_error": r.head.error,
             "monthly_cost_delta_usd": r.diff.cost.delta if r.diff else None} for r in reports]


if __name__ == "__main__":
    sys.exit(main())
