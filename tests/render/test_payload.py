"""No payload ever runs: hostile strings in any user-controlled field are refused, or rendered so that the boot
scripts, run for real with bash in a sandbox (node paths under a temp dir, every command stubbed), never execute
them. Three doors: a workload file, an edited plan (digest recomputed), and a plan built past validation (the
quoting alone must hold).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infragen.errors import InfeasibleError, InputError
from infragen.plan import Plan, _digest_of
from infragen.render import render_user_data
from infragen.render.cloud_init import node_roles
from tests.plan_factory import make_plan
from tests.render.support import tool
from tests.spec.conftest import run_cli

NODE_DIRS = ("/usr/local/lib/infragen", "/usr/local/sbin", "/run/infragen", "/opt/infragen", "/opt/models")
#: Hypothesis examples per property in the normal run; `.ci/run` raises it through the environment.
EXAMPLES = int(os.environ.get("INFRAGEN_FUZZ_EXAMPLES", "15"))


def payloads(marker: Path) -> list[str]:
    """Ways a value could break out of its quoting; each would create `marker` if it ran."""
    m = str(marker)
    return [f"$(: > {m})", f"`: > {m}`", f"'; : > {m}; '", f'"; : > {m}; "', f"x$(: > {m})x", f"${{IFS}}`: > {m}`",
            f"\\'$(: > {m})", f"a' \"$(: > {m})\" 'b", f"%n$(: > {m})", f"-- $(: > {m})"]


def run_scripts(text: str, root: Path, marker: Path) -> None:
    """Write the user-data's files under `root` and run every boot script with bash, commands stubbed."""
    bash = tool("bash")
    stubs = root / "stub-bin"
    stubs.mkdir(parents=True, exist_ok=True)
    bash_env = root / "bash-env"
    # Any command not found (everything but builtins: PATH holds only an empty folder) succeeds silently.
    bash_env.write_text("command_not_found_handle() { return 0; }\n")
    scripts = []
    for f in yaml.safe_load(text)["write_files"]:
        content = f["content"]
        for d in NODE_DIRS:
            content = content.replace(d, f"{root}{d}")
        path = root / f["path"].lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        if f["path"].startswith("/usr/local/sbin/"):
            scripts.append(path)
    for script in scripts:
        env = {"PATH": str(stubs), "HOME": str(root), "BASH_ENV": str(bash_env)}
        # A wait loop may time out with every command stubbed; what matters is the payload, checked below.
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run([bash, str(script)], env=env, capture_output=True, timeout=10, cwd=root, check=False)
        assert not marker.exists(), f"payload ran from {script.name}"


def _strings(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every string in a plan dump (dict keys included as `(..., key, '<key>')`)."""
    out: list[tuple[Any, ...]] = []
    if isinstance(data, str):
        out.append(path)
    elif isinstance(data, dict):
        for key, value in data.items():
            out += _strings(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out += _strings(value, (*path, i))
    return out


def _set(data: Any, path: tuple[Any, ...], value: str) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


PLANS = [("single", "aws"), ("cpu", "alicloud"), ("multinode", "aws")]


@pytest.mark.parametrize(("kind", "cloud"), PLANS)
def test_edited_plans_with_payloads_are_refused_or_harmless(tmp_path: Path, kind: str, cloud: str) -> None:
    marker = tmp_path / "pwned"
    base = make_plan(kind, cloud).model_dump(mode="json")  # type: ignore[arg-type]
    del base["digest"]
    fields = [p for p in _strings(base) if p[0] != "alternatives" or p[1] == 0]
    accepted: list[str] = []
    for i, field in enumerate(fields):
        for j, payload in enumerate(payloads(marker)[:2]):
            data = json.loads(json.dumps(base))
            _set(data, field, payload)
            data["digest"] = _digest_of(data)  # an attacker recomputes it: the digest is no signature
            path = tmp_path / f"p{i}-{j}.json"
            path.write_text(json.dumps(data))
            r = run_cli("render", str(path), "--out", str(tmp_path / f"out{i}-{j}"))
            assert r.code in (0, 2), (field, r.code, r.err)
            assert "Traceback" not in r.err
            if r.code == 0:
                accepted.append(".".join(map(str, field)))
                for out in (tmp_path / f"out{i}-{j}").glob("*.yaml"):
                    text = out.read_text()
                    assert payload not in text, f"{field} reaches the user-data"
                    if len(accepted) == 1:  # the quoting test below runs scripts for every rendered value
                        run_scripts(text, tmp_path / f"root{i}-{j}", marker)
    # Only free text for people (never rendered) may hold such characters.
    assert set(accepted) <= {".".join(map(str, p)) for p in fields if p[0] in {
        "explanation", "warnings", "alternatives", "cost", "estimate"} or p[-1] == "display_name"}, accepted


@pytest.mark.parametrize(("kind", "cloud"), PLANS)
def test_quoting_alone_stops_payloads_in_every_rendered_value(tmp_path: Path, kind: str, cloud: str) -> None:
    # Past validation (model_copy does not validate): only the templates' quoting stands between a value and bash.
    plan = make_plan(kind, cloud)  # type: ignore[arg-type]
    marker = tmp_path / "pwned"
    updates = {
        "model": ["id", "served_model_name", "weights_uri", "display_name"],
        "deployment": ["region", "instance_type"],
        "engine": ["version", "health_path"],
        "secrets": ["hf_token_name", "api_key_name"],
    }
    for n, payload in enumerate(payloads(marker)):
        p = plan.model_copy(update={"workload": payload})
        for part, names in updates.items():
            sub = getattr(p, part).model_copy(update=dict.fromkeys(names, payload))
            p = p.model_copy(update={part: sub})
        if p.engine.name == "vllm" and p.model.weights_source == "huggingface":  # argv serves the repo it names
            argv = [*p.engine.argv[:2], payload, *p.engine.argv[3:]]
            p = p.model_copy(update={"engine": p.engine.model_copy(update={"argv": argv})})
        for role in node_roles(p):
            text = render_user_data(p, role, head_address=None if role == "replica" else "10.0.0.10")
            run_scripts(text, tmp_path / f"r{n}-{role}", marker)


@pytest.mark.parametrize("field", ["name", "weights", "regions", "model_id", "family"])
def test_workload_fields_with_payloads_never_run(tmp_path: Path, field: str) -> None:
    marker = tmp_path / "pwned"
    for i, payload in enumerate(payloads(marker)):
        _plan_and_run(tmp_path / f"c{i}", field, payload, marker)


def _workload(field: str, value: str) -> str:
    doc: dict[str, Any] = {"model": "qwen2-7b", "traffic": {"concurrent_users": 2}, "cloud": "aws"}
    if field == "model_id":
        doc["model"] = {"id": value, "hidden_size": 1024, "num_layers": 4, "num_attention_heads": 8,
                        "intermediate_size": 2048, "vocab_size": 1000}
        doc["weights"] = "org/model"
    elif field == "regions":
        doc["regions"] = [value]
    elif field == "family":
        doc["instance_families"] = {"allow": [value]}
    else:
        doc[field] = value
    return json.dumps(doc)


def _plan_and_run(folder: Path, field: str, value: str, marker: Path) -> None:
    from infragen.sizing import plan_file

    folder.mkdir(parents=True)
    path = folder / "workload.yaml"
    path.write_text(_workload(field, value))
    try:
        plan: Plan = plan_file(path)
    except (InputError, InfeasibleError):
        return  # refused: nothing is rendered
    for role in node_roles(plan):
        text = render_user_data(plan, role, head_address=None if role == "replica" else "10.0.0.10")
        run_scripts(text, folder / f"root-{role}", marker)


_HOSTILE = st.text(alphabet=st.sampled_from(list("ab-_./$`'\"();|&<>\\ \n\t*?~{}%!#=,:@+")), max_size=24)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["name", "weights", "regions", "model_id", "family"]), noise=_HOSTILE,
       where=st.integers(0, 24))
def test_random_printable_strings_never_run(tmp_path_factory: pytest.TempPathFactory, field: str, noise: str,
                                            where: int) -> None:
    folder = tmp_path_factory.mktemp("prop")
    marker = folder / "pwned"
    value = noise[:where] + f"$(: > {marker})" + noise[where:]
    _plan_and_run(folder / "case", field, value, marker)
    assert not marker.exists()
