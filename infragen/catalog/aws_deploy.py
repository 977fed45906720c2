"""AWS deployment facts (data in aws_deploy.yaml): machine-image SSM parameters and vCPU quota classes.

Reads data only; no cloud call. Used by the AWS provisioner and by `infragen preflight`.
"""

from __future__ import annotations

from functools import cache
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from infragen.catalog.parsed import data_dir


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ImageParameter(_Frozen):
    """Where the AMI id of one image family is published."""

    kind: Literal["gpu", "cpu"]
    """GPU nodes (Deep Learning AMI with the NVIDIA driver and EFA) or CPU nodes (plain Ubuntu)."""
    cpu_arch: Literal["x86_64", "arm64"]
    """CPU architecture of the image."""
    ssm_parameter: str
    """Public SSM parameter whose value is the current AMI id."""
    source: str
    """Where the parameter name was read."""


class QuotaCode(_Frozen):
    """One Service Quotas quota (service code ec2)."""

    code: str = Field(pattern=r"^L-[0-9A-F]{8}$")
    """Quota code, e.g. L-417A185B."""
    name: str
    """Quota name as the console shows it."""


class VcpuQuotaClass(_Frozen):
    """Instance families that share one running-vCPU quota."""

    name: str
    """Class name (P, G and VT, Standard, ...)."""
    families: list[str]
    """Instance-family prefixes in the class (longest matching prefix wins)."""
    on_demand: QuotaCode
    """Running On-Demand vCPU quota."""
    spot: QuotaCode | None
    """Spot vCPU quota; None = not known (spot plans of this class are not checked)."""
    source: str
    """Where the codes were read."""


class AwsDeployFacts(_Frozen):
    """The whole file."""

    schema_version: int
    as_of: str
    source: str
    images: list[ImageParameter]
    vcpu_quotas: list[VcpuQuotaClass]

    def image_parameter(self, *, gpu: bool, cpu_arch: str) -> str:
        """SSM parameter of the image for GPU or CPU nodes of one architecture."""
        kind = "gpu" if gpu else "cpu"
        for image in self.images:
            if image.kind == kind and image.cpu_arch == cpu_arch:
                return image.ssm_parameter
        raise KeyError(f"no {kind} image for {cpu_arch} in aws_deploy.yaml")

    def quota_class(self, instance_type: str) -> VcpuQuotaClass | None:
        """The quota class of an instance type (`p5.48xlarge` -> P), or None when no class lists its family."""
        family = instance_type.split(".", 1)[0].lower()
        best: tuple[int, VcpuQuotaClass] | None = None
        for cls in self.vcpu_quotas:
            for prefix in cls.families:
                if family.startswith(prefix) and family[len(prefix):][:1].isdigit() and \
                        (best is None or len(prefix) > best[0]):
                    best = (len(prefix), cls)
        return best[1] if best else None


@cache
def load_aws_deploy() -> AwsDeployFacts:
    """The packaged aws_deploy.yaml (cached)."""
    text = (data_dir() / "aws_deploy.yaml").read_text(encoding="utf-8")
    return AwsDeployFacts.model_validate(yaml.safe_load(text))
