"""Contract: every rendered engine command line is one the pinned release's own parser accepts.

What each release accepts is generated from the release (infragen/catalog/data/vllm.yaml from the vllm wheel's
`vllm serve` parser, llama_cpp.yaml from llama.cpp's common/arg.cpp); CI does not install the engines, so the
rendered ExecStart of every example, factory plan and test workload is checked against that data.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from infragen.catalog.engines import EngineRelease, argv_problems, pinned_release
from infragen.plan import Plan
from infragen.render import node_roles, render_user_data
from tests.plan_factory import make_plan
from tests.render.support import CASES, EXAMPLES, example_plan
from tests.rendered_argvs import rendered_argvs


def rendered_argv(plan: Plan) -> list[str]:
    """The engine command of the rendered unit, as the shell would split it (systemd's ${PORT} filled in)."""
    role = node_roles(plan)[0]
    text = render_user_data(plan, role, head_address="10.0.0.10" if role == "head" else None)
    unit = next(f["content"] for f in yaml.safe_load(text)["write_files"] if f["path"].endswith("engine@.service"))
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    words = shlex.split(exec_start.removeprefix("ExecStart=").replace("${PORT}", str(plan.engine.port)))
    words[0] = Path(words[0]).name
    return words


def _check(plan: Plan) -> None:
    assert plan.engine.version == pinned_release(plan.engine.name).version
    for argv in (plan.engine.argv, rendered_argv(plan)):
        assert argv_problems(plan.engine.name, argv) == [], argv


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_renders_a_command_the_pinned_parser_accepts(path: Path) -> None:
    _check(example_plan(path))


@pytest.mark.parametrize(("kind", "cloud"), CASES, ids=[f"{k}-{c}" for k, c in CASES])
def test_every_factory_plan_renders_a_command_the_pinned_parser_accepts(kind: str, cloud: str) -> None:
    _check(make_plan(kind, cloud))


def test_the_set_checked_against_the_real_parser_passes_the_option_data() -> None:
    # tests/rendered_argvs.py feeds vllm_argv_check.py (real vLLM parser, maintainer venv); here the same set, FP8
    # workloads included, is replayed against the generated option data on every run
    argvs = dict(rendered_argvs(Path(__file__).resolve().parents[2]))
    assert len([a for a in argvs.values() if a[:2] == ["vllm", "serve"]]) >= 20
    assert "--quantization" not in argvs["fp8 checkpoint in weights"]
    assert "fp8_per_tensor" in argvs["fp8 from the 16-bit reference"]
    for label, argv in argvs.items():
        assert argv_problems("vllm" if argv[0] == "vllm" else "llama.cpp", argv) == [], label


def test_the_generated_descriptions_match_the_pins() -> None:
    vllm, llama = pinned_release("vllm"), pinned_release("llama.cpp")
    assert vllm.version == "0.34.0" and llama.version == "b11312" and llama.commit
    assert "--rope-scaling" not in vllm.options  # moved to --hf-overrides before 0.34
    assert vllm.options["--enable-prefix-caching"]["arity"] == 0
    assert "fp8" in vllm.values["--quantization"] and "fp8" in vllm.values["--kv-cache-dtype"]
    assert {"--ctx-size", "--parallel", "--api-key-file", "--alias"} <= llama.options.keys()


def _release(**options: dict[str, object]) -> EngineRelease:
    return EngineRelease(engine="vllm", version="x", commit=None, source="test", described_by="test",
                         options={n: {**o, "names": [n]} for n, o in options.items()},
                         values={"--quantization": frozenset({"fp8", "awq"})}, architectures=frozenset(),
                         cuda_targets=())


def test_the_checker_refuses_what_argparse_would() -> None:
    rel = _release(**{"--port": {"arity": 1, "value": "int"}, "--quantization": {"arity": 1, "value": "str"},
                      "--enable-x": {"arity": 0}, "--names": {"arity": "+", "value": "str"},
                      "--hf-overrides": {"arity": 1, "value": "json-or-str"},
                      "--mode": {"arity": 1, "value": "str", "choices": ["a", "b"]}})
    ok = ["vllm", "serve", "org/m", "--port", "8000", "--names", "a", "b", "--enable-x", "--quantization", "fp8",
          "--hf-overrides", '{"a":1}', "--mode=a"]
    assert argv_problems("vllm", ok, rel) == []
    bad = {"--rope-scaling": ["--rope-scaling", "{}"], "not a valid int": ["--port", "80x"],
           "needs 1 value": ["--port"], "takes no value": ["--enable-x=1"], "not one of": ["--mode", "c"],
           "not accepted by vllm": ["--quantization", "awq_marlin"], "valid json": ["--hf-overrides", "{bad"],
           "unexpected argument": ["extra"]}
    for expected, words in bad.items():
        problems = argv_problems("vllm", ["vllm", "serve", "org/m", *words], rel)
        assert problems and expected in problems[0], (words, problems)
