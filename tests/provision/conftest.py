"""Fixtures for provisioning tests: AWS invoke results and computed outputs for the recording mocks,
stack settings with sentinel secrets, and a stand-in cloud-init renderer (tests of the real one live elsewhere)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest

from infragen.plan import Plan
from infragen.provision.settings import StackSettings
from tests.plan_factory import SENTINEL_SECRET

HF_SENTINEL = "hf_SENTINELsentinelSENTINELsentinel0000"
API_SENTINEL = SENTINEL_SECRET
MOCK_AMI = "ami-0123456789abcdef0"
PROJECT_ROOT = Path(__file__).resolve().parents[2]

AWS_CALLS: dict[str, dict[str, Any]] = {
    "aws:index/getAvailabilityZones:getAvailabilityZones": {
        "id": "mock", "names": ["us-east-1a", "us-east-1b", "us-east-1c"],
        "zoneIds": ["use1-az1", "use1-az2", "use1-az4"], "groupNames": [], "state": "available"},
    # use1-az4 does not offer the instance type: node subnets must avoid it.
    "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings": {
        "id": "mock", "locations": ["use1-az2", "use1-az1"], "locationTypes": ["availability-zone-id"] * 2,
        "instanceTypes": ["mock"] * 2},
    "aws:ec2/getVpcEndpointService:getVpcEndpointService": {
        "id": "mock", "serviceName": "com.amazonaws.us-east-1.s3", "serviceType": "Gateway", "service": "s3",
        "acceptanceRequired": False, "availabilityZones": [], "baseEndpointDnsNames": [], "managesVpcEndpoints": False,
        "owner": "amazon", "privateDnsName": "", "privateDnsNames": [], "serviceId": "vpce-svc-mock",
        "supportedIpAddressTypes": ["ipv4"], "tags": {}, "vpcEndpointPolicySupported": True},
    "aws:index/getPartition:getPartition": {"id": "aws", "partition": "aws", "dnsSuffix": "amazonaws.com",
                                            "reverseDnsPrefix": "com.amazonaws"},
    "aws:ssm/getParameter:getParameter": {"id": "mock", "name": "mock", "type": "String", "value": MOCK_AMI,
                                          "insecureValue": MOCK_AMI, "arn": "arn:aws:ssm:::mock", "version": 1},
}


def _arn(inputs: dict[str, Any], name: str) -> dict[str, Any]:
    return {"arn": f"arn:aws:mock:us-east-1:123456789012:{name}"}


AWS_COMPUTED: dict[str, Callable[[dict[str, Any], str], dict[str, Any]]] = {
    "aws:lb/loadBalancer:LoadBalancer": lambda i, n: {**_arn(i, n), "dnsName": f"{n}.elb.mock"},
    "aws:lb/targetGroup:TargetGroup": _arn,
    "aws:lb/listener:Listener": _arn,
    "aws:secretsmanager/secret:Secret": _arn,
    "aws:iam/role:Role": lambda i, n: {**_arn(i, n), "name": n},
    "aws:iam/instanceProfile:InstanceProfile": _arn,
    "aws:ec2/launchTemplate:LaunchTemplate": lambda i, n: {**_arn(i, n), "latestVersion": 1},
    "aws:ec2/placementGroup:PlacementGroup": lambda i, n: {**_arn(i, n), "name": n},
    "aws:autoscaling/group:Group": lambda i, n: {**_arn(i, n), "name": n},
}


def fake_renderer(plan: Plan) -> Callable[[str, str | None], str]:
    """A stand-in renderer: valid-looking cloud-init naming (never containing) the secrets."""

    def render(role: str, head_address: str | None) -> str:
        return (f"#cloud-config\n# role={role} head={head_address}\n"
                f"write_files:\n  - path: /etc/infragen/secrets\n"
                f"    content: {plan.secrets.hf_token_name} {plan.secrets.api_key_name}\n"
                f"runcmd:\n  - [echo, '{plan.engine.port}']\n")

    return render


def make_settings(*, certificate_arn: str | None = None, allowed_cidrs: tuple[str, ...] = ("0.0.0.0/0",),
                  plan_path: Path | None = None) -> StackSettings:
    return StackSettings(project_root=PROJECT_ROOT, workload_path=None, plan_path=plan_path,
                         hf_token=pulumi.Output.secret(HF_SENTINEL), api_key=pulumi.Output.secret(API_SENTINEL),
                         certificate_arn=certificate_arn, allowed_cidrs=allowed_cidrs)


@pytest.fixture
def aws_mocks() -> dict[str, Any]:
    return {"call_results": AWS_CALLS, "computed": AWS_COMPUTED}
