"""The shared Pulumi program (stacks/__main__.py) on Alibaba stacks: each stack names an Alibaba example,
a pinned Alibaba plan deploys with its digest, Alibaba-only options are read from config, and (once the planner
exists) every stack's exported digest equals the planner's."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pulumi
import pytest
import yaml

from infragen.errors import InputError
from infragen.spec import load_spec
from tests.plan_factory import SENTINEL_SECRET, make_plan
from tests.provision.mocks import run_program
from tests.provision.test_alicloud_support import (
    COMPUTED,
    GPU_IMAGE_ID,
    IMAGE_ID,
    KMS_CONFIG,
    SENTINEL_HF,
    ZONES,
    AliRun,
    call_results,
    node_specs,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ALI_STACKS = {
    "ali-chat-7b": "examples/ali-chat-7b.yaml",
    "ali-70b": "examples/ali-70b.yaml",
    "ali-multinode": "examples/ali-multinode.yaml",
    "ali-cpu-edge": "examples/ali-cpu-edge.yaml",
}
SECRETS = {"infragen:hfToken": SENTINEL_HF, "infragen:apiKey": SENTINEL_SECRET, **KMS_CONFIG}
SECRET_KEYS = ("infragen:hfToken", "infragen:apiKey")


def load_program() -> ModuleType:
    spec = importlib.util.spec_from_file_location("infragen_stack_program_ali", PROJECT_ROOT / "stacks" / "__main__.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stack_config(stack: str) -> dict[str, str]:
    data = yaml.safe_load((PROJECT_ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return {k: str(v) for k, v in data["config"].items()}


@pytest.mark.parametrize("stack", sorted(ALI_STACKS))
def test_stack_names_an_alibaba_example(stack: str) -> None:
    config = stack_config(stack)
    assert set(config) == {"alicloud:region", "infragen:workload"}
    assert config["infragen:workload"] == ALI_STACKS[stack]
    spec = load_spec(PROJECT_ROOT / config["infragen:workload"])
    assert spec.cloud == "alicloud"
    assert not spec.regions or config["alicloud:region"] in spec.regions


def test_program_deploys_a_pinned_alibaba_plan(tmp_path: Path) -> None:
    plan = make_plan("multinode", "alicloud")
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    rec = run_program(load_program().main, call_results=call_results(ZONES), computed=COMPUTED,
                      secret_keys=SECRET_KEYS,
                      config={**SECRETS, "infragen:planFile": str(path), "alicloud:region": "cn-hangzhou",
                              "infragen:imageId": GPU_IMAGE_ID, "infragen:nodeZones": '["cn-hangzhou-k"]',
                              "infragen:lbZones": '["cn-hangzhou-h", "cn-hangzhou-i"]'})
    assert not rec.errors, rec.errors
    assert rec.exports["plan_digest"] == plan.digest and rec.exports["cloud"] == "alicloud"
    assert rec.exports["instance_type"] == "ecs.ebmgn8v.48xlarge" and rec.exports["nodes"] == 2
    endpoint = rec.exports["endpoint"]  # the ALB on port 80: no port in the URL
    assert endpoint.startswith("http://") and endpoint.endswith(".alb.example") and endpoint.count(":") == 1
    instances = rec.of_type("alicloud:ecs/instance:Instance")
    assert {i.inputs["imageId"] for i in instances} == {GPU_IMAGE_ID}
    switches = {r.name: r.inputs for r in rec.of_type("alicloud:vpc/switch:Switch")}
    assert {v["zoneId"] for k, v in switches.items() if "-nodes-" in k} == {"cn-hangzhou-k"}
    assert sorted(v["zoneId"] for k, v in switches.items() if "-lb-" in k) == ["cn-hangzhou-h", "cn-hangzhou-i"]
    # Zones came from config: the program looked none up (the image was given too).
    assert not any(token.endswith("getZones:getZones") or "getImages" in token for token, _ in rec.calls)
    for res in rec.resources:
        if res.type != "alicloud:kms/secret:Secret":
            text = str(res.inputs)
            assert SENTINEL_HF not in text and SENTINEL_SECRET not in text, f"{res.type} {res.name}"


def test_program_stops_without_the_kms_3_instance_and_key(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(make_plan("single", "alicloud").to_json())
    expected = r"^Error: infragen:kmsKeyId not set: on KMS 3.0(.|\n)*To fix: pulumi config set infragen:kmsInstanceId"
    config = {**SECRETS, "infragen:planFile": str(path)}
    del config["infragen:kmsKeyId"]
    with pytest.raises(pulumi.RunError, match=expected):
        run_program(load_program().main, call_results=call_results(ZONES), computed=COMPUTED,
                    secret_keys=SECRET_KEYS, config=config)


def test_project_declares_the_alibaba_options_and_their_defaults_mean_unset() -> None:
    from infragen.provision.alicloud import AlicloudOptions, load_alicloud_options

    declared = yaml.safe_load((PROJECT_ROOT / "Pulumi.yaml").read_text())["config"]
    keys = {"imageId": "", "kmsInstanceId": "", "kmsKeyId": "", "nodeZones": [], "lbZones": []}
    assert {k: declared[k]["default"] for k in keys} == keys
    seen: dict[str, Any] = {}

    def program() -> dict[str, Any]:
        seen["options"] = load_alicloud_options()
        return {}

    import json

    run_program(program, call_results={}, config={f"infragen:{k}": v if isinstance(v, str) else json.dumps(v)
                                                  for k, v in keys.items()})
    assert seen["options"] == AlicloudOptions()


def test_bad_zone_config_is_an_input_error() -> None:
    from infragen.provision.alicloud import load_alicloud_options

    def program() -> dict[str, Any]:
        load_alicloud_options()
        return {}

    with pytest.raises(InputError, match="infragen:lbZones"):
        run_program(program, call_results={}, config={"infragen:lbZones": '[1, 2]'})


@pytest.mark.parametrize("stack", sorted(ALI_STACKS))
def test_stack_digest_equals_planner_digest(stack: str) -> None:
    sizing = pytest.importorskip("infragen.sizing")
    if not hasattr(sizing, "plan_file"):
        pytest.skip("planner entry point infragen.sizing.plan_file not available yet")
    expected = sizing.plan_file(PROJECT_ROOT / ALI_STACKS[stack])
    config = {**stack_config(stack), **SECRETS}  # no imageId: GPU stacks install the plan's driver at first boot
    assert "infragen:imageId" not in config
    # Every GPU stack's plan names the driver its first boot installs (issue 17: no hand-built image).
    no_driver = bool(expected.deployment.gpu) and (expected.bootstrap is None or expected.bootstrap.gpu_driver is None)
    assert not no_driver, f"{stack}: the pinned engine has no driver row in alicloud_node.yaml"
    rec = run_program(load_program().main, call_results=call_results(ZONES), computed=COMPUTED,
                      secret_keys=SECRET_KEYS, config=config)
    assert not rec.errors, rec.errors
    assert rec.exports["plan_digest"] == expected.digest
    assert rec.exports["cloud"] == "alicloud"
    assert rec.exports["instance_type"] == expected.deployment.instance_type
    assert rec.exports["instance_type"].startswith("ecs."), "not an Alibaba instance type"
    specs = node_specs(AliRun(rec, []))
    assert sum(spec.nodes for spec in specs) == expected.deployment.nodes
    assert {spec.inputs["imageId"] for spec in specs} == {IMAGE_ID}
    assert stack_config(stack)["alicloud:region"] == expected.deployment.region, "stack region differs from plan's"
