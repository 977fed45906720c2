"""The import rules of the architecture (style.md), checked on the source with ast.

spec/plan never reach the catalog or sizing; sizing never reaches jinja2, click, pulumi, render or provision;
render never reaches sizing or pulumi; provision never reaches sizing or the CLI.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "infragen"

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "infragen.errors": ("infragen.", "pydantic", "yaml", "click", "jinja2", "pulumi"),
    "infragen.units": ("infragen.", "pydantic", "yaml", "click", "jinja2", "pulumi"),
    "infragen.identifiers": ("infragen.", "yaml", "click", "jinja2", "pulumi"),
    "infragen.safe_load": ("infragen.catalog", "infragen.sizing", "infragen.render", "infragen.provision",
                           "infragen.cli", "infragen.spec", "infragen.plan", "pydantic", "click", "jinja2", "pulumi"),
    "infragen.spec": ("infragen.catalog", "infragen.sizing", "infragen.render", "infragen.provision",
                      "infragen.cli", "click", "jinja2", "pulumi"),
    "infragen.plan": ("infragen.catalog", "infragen.sizing", "infragen.render", "infragen.provision",
                      "infragen.cli", "click", "jinja2", "pulumi"),
    "infragen.catalog": ("infragen.sizing", "infragen.render", "infragen.provision", "infragen.cli",
                         "jinja2", "pulumi"),
    "infragen.sizing": ("infragen.render", "infragen.provision", "infragen.cli", "jinja2", "click", "pulumi"),
    "infragen.render": ("infragen.sizing", "infragen.provision", "infragen.cli", "click", "pulumi"),
    "infragen.provision": ("infragen.sizing", "infragen.cli", "click"),
    "infragen.cli": ("infragen.provision", "pulumi"),
    "infragen.probe": ("infragen.catalog", "infragen.sizing", "infragen.render", "infragen.provision",
                       "infragen.cli", "click", "jinja2", "pulumi", "pydantic"),
    "infragen.preflight": ("infragen.sizing", "infragen.render", "infragen.provision", "infragen.cli", "click",
                           "jinja2", "pulumi"),
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _rules_for(module: str) -> tuple[str, ...]:
    best = ""
    for prefix in FORBIDDEN:
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    return FORBIDDEN.get(best, ())


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_module_respects_layers(path: Path) -> None:
    module = _module_name(path)
    rules = _rules_for(module)
    bad = [
        f"{path.relative_to(PKG.parent)}:{line} imports {name}"
        for line, name in _imports(path)
        for rule in rules
        if _forbidden(name, rule)
    ]
    assert not bad, "layering violated: " + "; ".join(bad)


def _forbidden(name: str, rule: str) -> bool:
    """`rule` names a package (`pulumi`, `infragen.sizing`) or, with a trailing dot, its subpackages only."""
    base = rule.rstrip(".")
    return name.startswith(base + ".") or (not rule.endswith(".") and name == base)


def test_forbidden_matching() -> None:
    assert _forbidden("pulumi_aws.ec2", "pulumi_aws")
    assert _forbidden("pulumi", "pulumi") and not _forbidden("pulumi_aws", "pulumi")
    assert _forbidden("infragen.units", "infragen.") and not _forbidden("infragen", "infragen.")
    assert _rules_for("infragen.sizing.search") == FORBIDDEN["infragen.sizing"]


def test_importing_infragen_and_cli_is_cheap() -> None:
    """Importing the package and the CLI entry point loads neither Pulumi nor jinja2 (cold start)."""
    code = (
        "import sys, infragen, infragen.cli, infragen.spec, infragen.plan\n"
        "heavy = [m for m in ('pulumi', 'jinja2', 'pulumi_aws', 'pulumi_alicloud', 'boto3') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_no_model_parses_its_source_at_import(path: Path) -> None:
    """`use_attribute_docstrings` makes pydantic tokenize and parse each model class's source when the module is
    imported (a large share of `infragen plan`'s cold start); descriptions come from infragen.fielddocs on demand."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = [node.lineno for node in ast.walk(tree)
           if isinstance(node, ast.keyword) and node.arg == "use_attribute_docstrings"]
    assert not bad, f"{path.relative_to(PKG.parent)}:{bad}: use infragen.fielddocs.document(model) where a " \
                    "description is read (schema, docs), not use_attribute_docstrings"
