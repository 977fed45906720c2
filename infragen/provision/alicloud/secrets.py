"""Alibaba Cloud secrets component: KMS 3.0 secrets for the HF token and API key, and the nodes' RAM role.

The values come in as Pulumi secret Outputs and go only into `kms.Secret.secret_data`; the role may read exactly
these two secrets (and decrypt with their key), plus, when the weights live in OSS, list and read that prefix only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_alicloud as alicloud

# Trust policy letting ECS instances assume the role (Alibaba RAM docs: service role for ECS, "ecs.aliyuncs.com").
ECS_TRUST_POLICY = json.dumps({
    "Statement": [{"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": ["ecs.aliyuncs.com"]}}],
    "Version": "1",
})


@dataclass(frozen=True)
class SecretsArgs:
    """Inputs of `AliSecrets`."""

    prefix: str
    """Name prefix (the workload name)."""
    role_stem: str
    """Stem of the RAM role and policy names: the workload and the stack (RAM names are account-wide)."""
    hf_token_name: str
    """KMS secret name for the Hugging Face token (plan.secrets.hf_token_name)."""
    api_key_name: str
    """KMS secret name for the API key (plan.secrets.api_key_name)."""
    hf_token: pulumi.Input[str]
    """The Hugging Face token (a Pulumi secret)."""
    api_key: pulumi.Input[str]
    """The API key clients must send (a Pulumi secret)."""
    tags: Mapping[str, str]
    """Tags for every taggable resource."""
    kms_instance_id: str
    """KMS 3.0 instance the secrets live in (`infragen:kmsInstanceId`; the provider requires it on KMS 3.0)."""
    kms_key_id: str
    """Symmetric key of that instance that encrypts them (`infragen:kmsKeyId`; required with the instance)."""
    weights_bucket: str | None = None
    """OSS bucket holding the weights (`oss://bucket/prefix`); None = weights do not come from OSS."""
    weights_prefix: str = ""
    """Object prefix of the weights inside that bucket ('' = the whole bucket)."""


class AliSecrets(pulumi.ComponentResource):
    """Two KMS secrets and a RAM role for the instances that can `kms:GetSecretValue` on exactly them."""

    role_name: pulumi.Output[str]
    policy_attachment: pulumi.Resource
    secret_arns: list[pulumi.Output[str]]

    def __init__(self, name: str, args: SecretsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("infragen:alicloud:Secrets", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        secrets = []
        for key, secret_name, value in (("hf-token", args.hf_token_name, args.hf_token),
                                        ("api-key", args.api_key_name, args.api_key)):
            secrets.append(alicloud.kms.Secret(
                f"{name}-{key}", secret_name=secret_name, secret_data=pulumi.Output.secret(value),
                secret_data_type="text", version_id="v1", description=f"infragen {args.prefix} {key}",
                dkms_instance_id=args.kms_instance_id, encryption_key_id=args.kms_key_id,
                # Delete at once on destroy: the values stay in the stack's secret config, and a secret pending
                # deletion would block re-creating the same name on the next `pulumi up`.
                force_delete_without_recovery=True, tags=tags,
                opts=pulumi.ResourceOptions(parent=self, additional_secret_outputs=["secret_data"])))
        self.secret_arns = [s.arn for s in secrets]

        role = alicloud.ram.Role(
            f"{name}-role", role_name=f"{args.role_stem}-node", assume_role_policy_document=ECS_TRUST_POLICY,
            description=f"infragen {args.prefix} nodes: read their two KMS secrets", tags=tags, opts=child)
        document = pulumi.Output.all(*self.secret_arns).apply(
            lambda arns: node_policy(arns, key_id=args.kms_key_id, bucket=args.weights_bucket,
                                     prefix=args.weights_prefix))
        policy = alicloud.ram.Policy(
            f"{name}-read-secrets", policy_name=f"{args.role_stem}-read-secrets", policy_document=document,
            description="this deployment's two secrets (and weights prefix) only", tags=tags, opts=child)
        # Nodes read the secrets at boot: they must not start before the policy is attached.
        self.policy_attachment = alicloud.ram.RolePolicyAttachment(
            f"{name}-read-secrets-attach", role_name=role.role_name, policy_name=policy.policy_name,
            policy_type="Custom", opts=child)
        self.role_name = role.role_name
        self.register_outputs({"role_name": role.role_name, "secret_arns": self.secret_arns})


def secret_read_policy(arns: list[str]) -> str:
    """A RAM policy document allowing GetSecretValue on exactly `arns`."""
    return node_policy(arns)


def node_policy(arns: list[str], *, key_id: str | None = None, bucket: str | None = None, prefix: str = "") -> str:
    """The nodes' RAM policy: GetSecretValue on exactly `arns`; Decrypt with their KMS key (a secret encrypted with
    a customer key needs it); OSS read (GetObject, ListObjects) on `bucket`/`prefix` only when given."""
    statements: list[dict[str, object]] = [
        {"Effect": "Allow", "Action": ["kms:GetSecretValue"], "Resource": sorted(arns)}]
    if key_id:
        # The key lives in the secrets' region and account: take both from a secret ARN (acs:kms:REGION:ACCOUNT:...).
        region, account = arns[0].split(":")[2:4]
        statements.append({"Effect": "Allow", "Action": ["kms:Decrypt"],
                           "Resource": [f"acs:kms:{region}:{account}:key/{key_id}"]})
    if bucket:
        objects = f"acs:oss:*:*:{bucket}/{prefix.strip('/') + '/' if prefix.strip('/') else ''}*"
        statements.append({"Effect": "Allow", "Action": ["oss:GetObject"], "Resource": [objects]})
        listing: dict[str, object] = {"Effect": "Allow", "Action": ["oss:ListObjects"],
                                      "Resource": [f"acs:oss:*:*:{bucket}"]}
        if prefix.strip("/"):
            listing["Condition"] = {"StringLike": {"oss:Prefix": [f"{prefix.strip('/')}/*"]}}
        statements.append(listing)
    return json.dumps({"Version": "1", "Statement": statements}, sort_keys=True)
