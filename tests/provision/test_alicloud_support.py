"""Shared harness for the Alibaba provisioning tests: Pulumi mocks that record every resource, and a runner.

Holds no tests itself. The mocks answer the provider's computed outputs (ALB DNS name, KMS ARN, NAT SNAT table...)
and the zone/image look-ups, so `build_alicloud` runs offline.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi

ZONES = ["cn-hangzhou-h", "cn-hangzhou-i", "cn-hangzhou-j"]
IMAGE_ID = "ubuntu_22_04_x64_20G_alibase_20250722.vhd"
SENTINEL_HF = "hf_SENTINELsentinelSENTINELsentinel000"


@dataclass
class Recorded:
    """One resource the program registered."""

    type: str
    name: str
    inputs: dict[str, Any]
    parent: str | None = None


@dataclass
class AliMocks(pulumi.runtime.Mocks):
    """Records resources and invokes; fills in the outputs the real provider computes."""

    resources: list[Recorded] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    zones: list[str] = field(default_factory=lambda: list(ZONES))

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        inputs = dict(args.inputs)
        self.resources.append(Recorded(args.typ, args.name, inputs))
        state = dict(inputs)
        rid = f"{args.name}-id"
        if args.typ in {"alicloud:alb/loadBalancer:LoadBalancer", "alicloud:nlb/loadBalancer:LoadBalancer"}:
            state["dnsName"] = f"{args.name}.cn-hangzhou.alb.example"
        elif args.typ == "alicloud:kms/secret:Secret":
            state["arn"] = f"acs:kms:cn-hangzhou:123456789:secret/{inputs['secretName']}"
        elif args.typ == "alicloud:ecs/eipAddress:EipAddress":
            state["ipAddress"] = "203.0.113.10"
        elif args.typ == "alicloud:vpc/natGateway:NatGateway":
            state["snatTableIds"] = "stb-1"
        elif args.typ == "alicloud:ecs/instance:Instance":
            state.setdefault("privateIp", "10.40.0.99")
        return rid, state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        self.calls.append((args.token, dict(args.args)))
        if args.token.endswith("/getZones:getZones"):
            return {"ids": list(self.zones), "zones": [{"id": z} for z in self.zones]}, []
        if args.token == "alicloud:ecs/getImages:getImages":
            return {"ids": [IMAGE_ID], "images": []}, []
        return {}, []

    def of_type(self, suffix: str) -> list[Recorded]:
        """Resources whose type token ends with `suffix` (e.g. `ecs/instance:Instance`)."""
        return [r for r in self.resources if r.type.endswith(suffix)]


def decoded_user_data(instance: Recorded) -> str:
    return base64.b64decode(instance.inputs["userData"]).decode()


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


def stand_in_renderer(plan: Any, role: str, *, head_address: str | None = None) -> str:
    """A minimal cloud-config naming the role and head, for tests that look only at resources."""
    return f"#cloud-config\n# role={role} head={head_address}\nruncmd: []\n"


def run_alicloud(plan: Any, *, render: Any = stand_in_renderer, options: Any = None,
                 zones: list[str] | None = None, **settings: Any) -> tuple[AliMocks, dict[str, Any], list[str]]:
    """Run `build_alicloud` under fresh mocks; returns the mocks, the resolved exports and every URN."""
    mocks = AliMocks(zones=list(zones or ZONES))
    pulumi.runtime.set_mocks(mocks, project="infragen", stack="test", preview=False)
    from infragen.provision.alicloud import AlicloudOptions, build_alicloud

    exports: dict[str, Any] = {}

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        out = build_alicloud(plan, make_settings(**settings), options=options or AlicloudOptions(), render=render)
        keys = list(out)
        values = pulumi.Output.all(*[out[k] for k in keys])
        return values.apply(lambda vals: exports.update(zip(keys, vals, strict=True)))

    program()
    monitor = pulumi.runtime.settings.get_monitor()
    urns = list(monitor.get_registered_resources()) if hasattr(monitor, "get_registered_resources") else []
    return mocks, exports, urns
