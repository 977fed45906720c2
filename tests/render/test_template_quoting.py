"""Every interpolation in a script template goes through the one quoting filter of its language.

Parses each template with jinja2 (not a regex), so a `{{ value }}` anywhere — a comment, a heredoc, a string —
fails this test unless it ends in `| sh` (shell) or `| py` (Python), or is a constant the template itself wrote.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
from jinja2 import nodes

from infragen.render.cloud_init import TEMPLATES_DIR, _environment

SCRIPTS = sorted((TEMPLATES_DIR / "scripts").glob("*.j2"))
UNITS = sorted((TEMPLATES_DIR / "units").glob("*.j2"))
#: The one quoting filter per language (cloud_init.shell_quote, python_literal).
FILTER_FOR = {".sh": "sh", ".py": "py"}
#: Unit-file filters: systemd's quoting for command lines/Environment=, and EnvironmentFile values.
UNIT_FILTERS = {"systemd", "systemd_env", "env_value"}
#: Unit context values the renderer builds from quoted parts or fixed constants (cloud_init._context).
UNIT_PREQUOTED = {"exec_start", "engine_units", "sbin_dir", "venv_dir", "lib_dir"}


def _constant(node: nodes.Node) -> bool:
    """A literal the template wrote itself (or a choice between literals): no input reaches it."""
    if isinstance(node, nodes.Const):
        return True
    if isinstance(node, nodes.CondExpr):
        return _constant(node.expr1) and (node.expr2 is None or _constant(node.expr2))
    if isinstance(node, nodes.Concat):
        return all(_constant(n) for n in node.nodes)
    return False


def unquoted(source: str, allowed: set[str], prequoted: frozenset[str] = frozenset()) -> list[str]:
    """The interpolations in `source` that do not end in one of `allowed` filters."""
    tree = _environment().parse(source)
    bad = []
    for output in tree.find_all(nodes.Output):
        for expr in output.nodes:
            if isinstance(expr, nodes.TemplateData) or _constant(expr):
                continue
            if isinstance(expr, nodes.Filter) and expr.name in allowed:
                continue
            if isinstance(expr, nodes.Name) and expr.name in prequoted:
                continue
            bad.append(f"line {expr.lineno}: {{{{ {_show(expr)} }}}}")
    return bad


def _show(expr: nodes.Node) -> str:
    if isinstance(expr, nodes.Getattr):
        return f"{_show(expr.node)}.{expr.attr}"
    if isinstance(expr, nodes.Name):
        return expr.name
    if isinstance(expr, nodes.Filter):
        return f"{_show(expr.node) if expr.node else '?'} | {expr.name}"
    return type(expr).__name__


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_script_interpolation_is_quoted(path: Path) -> None:
    language = Path(path.stem).suffix  # install.sh.j2 -> .sh
    assert language in FILTER_FOR, f"{path.name}: no quoting filter known for {language!r} scripts"
    bad = unquoted(path.read_text(), {FILTER_FOR[language]})
    assert not bad, f"{path.name}: interpolations without `| {FILTER_FOR[language]}`: " + "; ".join(bad)


@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.name)
def test_every_unit_interpolation_is_escaped(path: Path) -> None:
    bad = unquoted(path.read_text(), UNIT_FILTERS, frozenset(UNIT_PREQUOTED))
    assert not bad, f"{path.name}: interpolations without one of {sorted(UNIT_FILTERS)}: " + "; ".join(bad)


@pytest.mark.parametrize(
    ("source", "allowed"),
    [
        ("echo {{ plan.workload }}", True),
        ("# comment {{ plan.workload }}", True),
        ('X="{{ plan.model.id | upper }}"', True),
        ("{% for i in xs %}{{ i.port }}{% endfor %}", True),
        ("echo {{ plan.workload | sh }}", False),
        ("{{ ' ray' if multinode }}{{ plan.x | int | sh }}", False),
    ],
)
def test_the_check_catches_a_missing_filter(source: str, allowed: bool) -> None:
    # The check itself must be able to fail: each unquoted form above is reported.
    assert bool(unquoted(source, {"sh"})) is allowed


def test_templates_parse() -> None:
    for path in [*SCRIPTS, *UNITS]:
        try:
            _environment().parse(path.read_text())
        except jinja2.TemplateSyntaxError as exc:  # pragma: no cover - a broken template fails here first
            pytest.fail(f"{path.name}: {exc}")
