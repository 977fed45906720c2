"""Shared harness for the Alibaba provisioning tests: Pulumi mocks that record every resource, and a runner.

Holds no tests itself. Built on the shared `tests/provision/mocks.py`; adds the provider's computed outputs
(ALB DNS name, KMS ARN, NAT SNAT table...) and the zone/image look-ups, so `build_alicloud` runs offline.
"""

from __future__ import annotations

import base64
import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from tests.provision.mocks import Computed, Recorded, Recording, run_program

ZONES = ["cn-hangzhou-h", "cn-hangzhou-i", "cn-hangzhou-j"]
IMAGE_ID = "ubuntu_22_04_x64_20G_alibase_20250722.vhd"
GPU_IMAGE_ID = "m-gpu-driver-image"
KMS_INSTANCE_ID = "kst-hzz65f176a0ogplgq0001"
KMS_KEY_ID = "key-hzz65f176a0ogplgq0002"
#: Stack config every Alibaba stack needs (KMS 3.0 instance and key).
KMS_CONFIG = {"infragen:kmsInstanceId": KMS_INSTANCE_ID, "infragen:kmsKeyId": KMS_KEY_ID}
SENTINEL_HF = "hf_SENTINELsentinelSENTINELsentinel000"


def call_results(zones: list[str]) -> dict[str, dict[str, Any]]:
    """Answers to the zone and image look-ups `build_alicloud` makes."""
    zone_list = {"ids": list(zones), "zones": [{"id": z} for z in zones]}
    return {
        "alicloud:index/getZones:getZones": zone_list,
        "alicloud:alb/getZones:getZones": zone_list,
        "alicloud:nlb/getZones:getZones": zone_list,
        "alicloud:ecs/getImages:getImages": {"ids": [IMAGE_ID], "images": []},
    }


# Outputs the real provider computes and the program reads.
COMPUTED: Computed = {
    "alicloud:alb/loadBalancer:LoadBalancer": lambda i, n: {"dnsName": f"{n}.cn-hangzhou.alb.example"},
    "alicloud:nlb/loadBalancer:LoadBalancer": lambda i, n: {"dnsName": f"{n}.cn-hangzhou.nlb.example"},
    "alicloud:kms/secret:Secret": lambda i, n: {"arn": f"acs:kms:cn-hangzhou:123456789:secret/{i['secretName']}"},
    "alicloud:ecs/eipAddress:EipAddress": lambda i, n: {"ipAddress": "203.0.113.10"},
    "alicloud:vpc/natGateway:NatGateway": lambda i, n: {"snatTableIds": "stb-1"},
    "alicloud:ecs/instance:Instance": lambda i, n: {"privateIp": i.get("privateIp", "10.40.0.99")},
    # A new launch template is version 1; an updated one is a later version (tests of updates override this).
    "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate": lambda i, n: {"latestVersionNumber": 1},
}
INSTANCE = "alicloud:ecs/instance:Instance"
TEMPLATE = "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate"
SCALING_GROUP = "alicloud:ess/scalingGroup:ScalingGroup"


@dataclass
class AliRun:
    """What one mocked `build_alicloud` run created."""

    recording: Recording
    """Resources, invokes and exports."""
    urns: list[str]
    """Every registered URN (parent chains are in the type part)."""

    @property
    def resources(self) -> list[Recorded]:
        return self.recording.resources

    @property
    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        return self.recording.calls

    @property
    def exports(self) -> dict[str, Any]:
        return self.recording.exports

    def of_type(self, suffix: str) -> list[Recorded]:
        """Resources whose type token ends with `suffix` (e.g. `ecs/instance:Instance`)."""
        return [r for r in self.resources if r.type.endswith(suffix)]


@dataclass(frozen=True)
class NodeSpec:
    """What some nodes launch with: a fixed instance (multi-node) or the replica groups' launch template."""

    resource: Recorded
    """The instance or the launch template."""
    nodes: int
    """Nodes launched from it at creation (1, or the groups' desired capacities)."""
    inputs: dict[str, Any]
    """Its inputs in the instance's shape (the template's system disk flattened to systemDisk* keys)."""


def node_specs(run: AliRun) -> list[NodeSpec]:
    """Every fixed instance, and the launch template of the replica groups with the nodes they start with."""
    out = [NodeSpec(r, 1, r.inputs) for r in run.of_type(INSTANCE)]
    for template in run.of_type(TEMPLATE):
        disk = template.inputs.get("systemDisk", {})
        flat = {**template.inputs, "systemDiskSize": disk.get("size"), "systemDiskCategory": disk.get("category"),
                "systemDiskEncrypted": disk.get("encrypted"),
                "systemDiskPerformanceLevel": disk.get("performanceLevel")}
        nodes = sum(g.inputs["desiredCapacity"] for g in run.of_type(SCALING_GROUP))
        out.append(NodeSpec(template, nodes, flat))
    return out


def decoded_user_data(instance: Recorded) -> str:
    """The instance's (or launch template's) user data as cloud-init reads it (gzip is decompressed)."""
    raw = base64.b64decode(instance.inputs["userData"])
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()


def dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def make_settings(*, hf: str = SENTINEL_HF, api_key: str = "", certificate: str | None = None,
                  allowed: tuple[str, ...] = ("0.0.0.0/0",)) -> Any:
    """StackSettings with secret Outputs (must be called after set_mocks)."""
    from infragen.provision.settings import StackSettings
    from tests.plan_factory import SENTINEL_SECRET

    return StackSettings(project_root=Path("."), workload_path=None, plan_path=None,
                         hf_token=pulumi.Output.secret(hf), api_key=pulumi.Output.secret(api_key or SENTINEL_SECRET),
                         certificate_arn=certificate, allowed_cidrs=allowed)


def stand_in_renderer(plan: Any, role: str, *, head_address: str | None = None, secrets: Any = None) -> str:
    """A minimal cloud-config naming the role, head and secret names, for tests that look only at resources."""
    names = secrets or plan.secrets
    return (f"#cloud-config\n# role={role} head={head_address}\n"
            f"# secrets={names.hf_token_name} {names.api_key_name}\nruncmd: []\n")


def real_renderer() -> Any:
    """The renderer the stacks use (`infragen.render.render_user_data`)."""
    try:
        from infragen.render import render_user_data
    except ImportError:  # the package re-export lands with the renderer; the function lives here
        from infragen.render.cloud_init import render_user_data
    return render_user_data


def run_alicloud(plan: Any, *, render: Any = stand_in_renderer, options: Any = None,
                 zones: list[str] | None = None, stack_config: dict[str, str] | None = None,
                 computed: Computed | None = None, today: Any = None, **settings: Any) -> AliRun:
    """Run `build_alicloud` under fresh mocks (no image id: GPU plans install their driver; KMS 3.0 ids set).

    Resource tests use the stand-in renderer so they test provisioning alone; user-data tests pass the real one.
    """
    from infragen.provision.alicloud import AlicloudOptions, build_alicloud

    if options is None:
        options = AlicloudOptions(kms_instance_id=KMS_INSTANCE_ID, kms_key_id=KMS_KEY_ID)
    recording = run_program(
        lambda: build_alicloud(plan, make_settings(**settings), options=options, render=render, today=today),
        call_results=call_results(list(zones or ZONES)), computed={**COMPUTED, **(computed or {})},
        config=stack_config or {})
    if recording.errors:
        raise RuntimeError("; ".join(recording.errors))
    monitor = pulumi.runtime.settings.get_monitor()
    urns = list(monitor.get_registered_resources()) if hasattr(monitor, "get_registered_resources") else []
    return AliRun(recording, urns)
