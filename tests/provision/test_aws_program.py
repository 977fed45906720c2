"""The Pulumi program (stacks/__main__.py) and project files: config schema matches what the settings read,
every AWS stack names an AWS example, and the program's exported plan_digest equals the planner's digest."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pulumi
import pytest
import yaml

from infragen.errors import InputError
from infragen.provision.settings import load_settings, parse_cidrs, parse_vpc_cidr
from infragen.spec import load_spec
from tests.plan_factory import make_plan
from tests.provision.conftest import API_SENTINEL, AWS_CALLS, AWS_COMPUTED, HF_SENTINEL, PROJECT_ROOT
from tests.provision.mocks import run_program

AWS_STACKS = {
    "aws-chat-7b": "examples/team-chatbot.yaml",
    "aws-70b": "examples/enterprise-70b.yaml",
    "aws-405b-multinode": "examples/multinode-405b.yaml",
    "aws-cpu-edge": "examples/cpu-edge.yaml",
}
SECRETS = {"infragen:hfToken": HF_SENTINEL, "infragen:apiKey": API_SENTINEL}
SECRET_KEYS = ("infragen:hfToken", "infragen:apiKey")


def load_program() -> ModuleType:
    spec = importlib.util.spec_from_file_location("infragen_stack_program", PROJECT_ROOT / "stacks" / "__main__.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stack_config(stack: str) -> dict[str, str]:
    data = yaml.safe_load((PROJECT_ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return {k: str(v) for k, v in data["config"].items()}


def test_project_file_declares_what_settings_read() -> None:
    project = yaml.safe_load((PROJECT_ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == "infragen"
    assert project["runtime"] == {"name": "python", "options": {"virtualenv": ".venv"}}
    assert project["main"] == "stacks/" and project["stackConfigDir"] == "stacks"
    assert (PROJECT_ROOT / project["main"] / "__main__.py").is_file()
    declared = project["config"]
    # Pulumi refuses a stack value for an undeclared key of the project's namespace: every key the settings read
    # (provision/settings.py, provision/aws/options.py, Alibaba's) is declared.
    assert set(declared) == {"workload", "planFile", "hfToken", "apiKey", "certificateArn", "allowedCidrs",
                             "vpcCidr", "imageId", "capacityReservationId", "capacityBlock",
                             "capacityReservationZone", "kmsInstanceId", "kmsKeyId", "nodeZones",
                             "lbZones"}  # capacity*: AWS; the last four: Alibaba
    assert declared["hfToken"]["secret"] is True and declared["apiKey"]["secret"] is True
    assert "default" not in declared["hfToken"] and "default" not in declared["apiKey"]  # required
    assert parse_cidrs(declared["allowedCidrs"]["default"], "k", ()) == ("0.0.0.0/0",)
    assert parse_vpc_cidr(declared["vpcCidr"]["default"]) == declared["vpcCidr"]["default"]


@pytest.mark.parametrize("stack", sorted(AWS_STACKS))
def test_stack_names_an_aws_example(stack: str) -> None:
    config = stack_config(stack)
    assert config["infragen:workload"] == AWS_STACKS[stack]
    spec = load_spec(PROJECT_ROOT / config["infragen:workload"])
    assert spec.cloud == "aws"
    assert config["aws:region"] in spec.regions


def test_settings_require_a_workload_and_the_secrets(tmp_path: Path) -> None:
    def load(config: dict[str, str]) -> Any:
        return run_program(lambda: {"s": str(load_settings(PROJECT_ROOT))}, call_results={}, config=config,
                           secret_keys=SECRET_KEYS)

    with pytest.raises(InputError, match="neither infragen:workload nor infragen:planFile"):
        load(dict(SECRETS))
    with pytest.raises(InputError, match="infragen:apiKey"):
        load({"infragen:workload": "examples/cpu-edge.yaml", "infragen:hfToken": "x"})
    with pytest.raises(InputError, match="does not exist"):
        load({**SECRETS, "infragen:workload": "examples/nope.yaml"})
    with pytest.raises(InputError, match="not an IPv4 CIDR"):
        load({**SECRETS, "infragen:workload": "examples/cpu-edge.yaml", "infragen:allowedCidrs": '["10.0.0.0/33"]'})
    with pytest.raises(InputError, match="private network"):
        load({**SECRETS, "infragen:workload": "examples/cpu-edge.yaml", "infragen:vpcCidr": "8.0.0.0/16"})


def test_settings_resolve_paths_and_defaults() -> None:
    seen: dict[str, Any] = {}

    def program() -> dict[str, Any]:
        s = load_settings(PROJECT_ROOT)
        seen["settings"] = s
        return {"hf": s.hf_token}

    rec = run_program(program, call_results={}, secret_keys=SECRET_KEYS,
                      config={**SECRETS, "infragen:workload": "examples/cpu-edge.yaml", "infragen:planFile": "",
                              "infragen:allowedCidrs": '["203.0.113.7/24"]'})
    s = seen["settings"]
    assert s.workload_path == PROJECT_ROOT / "examples" / "cpu-edge.yaml" and s.plan_path is None
    assert s.allowed_cidrs == ("203.0.113.0/24",) and s.vpc_cidr == "10.40.0.0/16" and s.certificate_arn is None
    assert rec.exports["hf"] == HF_SENTINEL


def test_program_deploys_a_pinned_plan_with_its_digest(tmp_path: Path) -> None:
    pytest.importorskip("infragen.render")
    plan = make_plan("single", "aws")
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    program = load_program()
    rec = run_program(program.main, call_results=AWS_CALLS, computed=AWS_COMPUTED, secret_keys=SECRET_KEYS,
                      config={**SECRETS, "infragen:planFile": str(path), "aws:region": "us-east-1"})
    assert rec.exports["plan_digest"] == plan.digest
    assert rec.exports["instance_type"] == "g6e.xlarge" and rec.exports["replicas"] == 2
    assert rec.exports["endpoint"].startswith("http://")


def test_program_reports_bad_input_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "plan.json"
    bad.write_text("{}")
    program = load_program()
    with pytest.raises(pulumi.RunError, match=r"^Error: "):
        run_program(program.main, call_results=AWS_CALLS, secret_keys=SECRET_KEYS,
                    config={**SECRETS, "infragen:planFile": str(bad)})


@pytest.mark.parametrize("stack", sorted(AWS_STACKS))
def test_stack_digest_equals_planner_digest(stack: str) -> None:
    sizing = pytest.importorskip("infragen.sizing")
    if not hasattr(sizing, "plan_file"):
        pytest.skip("planner entry point infragen.sizing.plan_file not available yet")
    pytest.importorskip("infragen.render")
    expected = sizing.plan_file(PROJECT_ROOT / AWS_STACKS[stack])
    program = load_program()
    rec = run_program(program.main, call_results=AWS_CALLS, computed=AWS_COMPUTED, secret_keys=SECRET_KEYS,
                      config={**stack_config(stack), **SECRETS})
    assert not rec.errors, rec.errors
    assert rec.exports["plan_digest"] == expected.digest
    assert rec.exports["instance_type"] == expected.deployment.instance_type
    assert rec.exports["replicas"] == expected.deployment.replicas
