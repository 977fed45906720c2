"""Secrets component: Secrets Manager entries for the HF token and the API key (values from Pulumi secret
config), and the node role that may read exactly those two secrets, plus SSM Session Manager access.

Never puts a secret value anywhere but the secret versions; makes no sizing decision.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infragen.provision.common import TAG_STACK

#: AWS-managed policy that lets the SSM agent register the node (Session Manager replaces SSH).
SSM_CORE_POLICY = "AmazonSSMManagedInstanceCore"


@dataclass(frozen=True)
class SecretsArgs:
    """Names and values of the deployment's secrets."""

    hf_token_name: str
    """Secrets Manager name of the Hugging Face token (from the plan)."""
    api_key_name: str
    """Secrets Manager name of the API key (from the plan)."""
    hf_token: pulumi.Input[str]
    """Token value (a Pulumi secret)."""
    api_key: pulumi.Input[str]
    """API key value (a Pulumi secret)."""
    weights_bucket: tuple[str, str] | None
    """(bucket, prefix) the nodes may read model weights from; None when weights come from Hugging Face."""
    tags: dict[str, str]
    """Tags for every resource (plan digest included)."""
    stack: str = ""
    """Pulumi stack (the `infragen:stack` tag): scopes the node's lifecycle and address permissions."""
    claims_head_address: bool = False
    """Multi-node heads move their replica's fixed address onto their own interface at boot."""


class Secrets(pulumi.ComponentResource):
    """The two secrets and the instance profile allowed to read them."""

    def __init__(self, name: str, args: SecretsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("infragen:aws:Secrets", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = args.tags
        self.hf_token = self._secret(f"{name}-hf-token", args.hf_token_name, args.hf_token,
                                     "Hugging Face token the nodes use to download weights", tags)
        self.api_key = self._secret(f"{name}-api-key", args.api_key_name, args.api_key,
                                    "API key clients must send to the engine", tags)

        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
        self.role = aws.iam.Role(
            f"{name}-node-role",
            assume_role_policy=json.dumps({
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                               "Action": "sts:AssumeRole"}],
            }),
            description="infragen serving node: read its two secrets, SSM Session Manager",
            tags=tags, opts=child)
        aws.iam.RolePolicy(f"{name}-read-secrets", role=self.role.id,
                           policy=pulumi.Output.all(self.hf_token.arn, self.api_key.arn,
                                                    partition).apply(lambda a: _policy(a[0], a[1], a[2],
                                                                                       args.weights_bucket)),
                           opts=child)
        aws.iam.RolePolicy(f"{name}-node-lifecycle", role=self.role.id,
                           policy=partition.apply(lambda p: lifecycle_policy(p, args.stack,
                                                                             args.claims_head_address)),
                           opts=child)
        aws.iam.RolePolicyAttachment(f"{name}-ssm-core", role=self.role.name,
                                     policy_arn=partition.apply(lambda p: f"arn:{p}:iam::aws:policy/{SSM_CORE_POLICY}"),
                                     opts=child)
        self.instance_profile = aws.iam.InstanceProfile(f"{name}-node-profile", role=self.role.name, tags=tags,
                                                        opts=child)
        self.register_outputs({
            "hf_token_arn": self.hf_token.arn,
            "api_key_arn": self.api_key.arn,
            "instance_profile_arn": self.instance_profile.arn,
        })

    def _secret(self, logical: str, secret_name: str, value: pulumi.Input[str], description: str,
                tags: dict[str, str]) -> aws.secretsmanager.Secret:
        # No recovery window: `pulumi destroy` then `up` must be able to reuse the plan's fixed name;
        # the value itself stays in the stack's encrypted config.
        secret = aws.secretsmanager.Secret(logical, name=secret_name, description=description,
                                           recovery_window_in_days=0, tags=tags,
                                           opts=pulumi.ResourceOptions(parent=self))
        aws.secretsmanager.SecretVersion(logical, secret_id=secret.id, secret_string=pulumi.Output.secret(value),
                                         opts=pulumi.ResourceOptions(parent=secret))
        return secret


def _policy(hf_arn: str, api_arn: str, partition: str, bucket: tuple[str, str] | None) -> str:
    statements: list[dict[str, object]] = [
        {"Sid": "ReadOwnSecrets", "Effect": "Allow", "Action": ["secretsmanager:GetSecretValue"],
         "Resource": [hf_arn, api_arn]},
    ]
    if bucket is not None:
        name, prefix = bucket
        objects = f"arn:{partition}:s3:::{name}/{prefix + '/' if prefix else ''}*"
        list_stmt: dict[str, object] = {"Sid": "ListWeights", "Effect": "Allow", "Action": ["s3:ListBucket"],
                                        "Resource": [f"arn:{partition}:s3:::{name}"]}
        if prefix:
            list_stmt["Condition"] = {"StringLike": {"s3:prefix": [f"{prefix}/*", prefix]}}
        statements += [list_stmt, {"Sid": "ReadWeights", "Effect": "Allow", "Action": ["s3:GetObject"],
                                   "Resource": [objects]}]
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


def lifecycle_policy(partition: str, stack: str, claims_head_address: bool) -> str:
    """What the node's readiness unit (and a multi-node head) may do: complete its own group's launch hook and,
    on a head, take the replica's fixed address; both only on resources tagged with this stack."""
    own = {"StringEquals": {f"aws:ResourceTag/{TAG_STACK}": stack}}
    statements: list[dict[str, object]] = [
        {"Sid": "FindOwnGroup", "Effect": "Allow", "Action": ["autoscaling:DescribeAutoScalingInstances"],
         "Resource": "*"},  # no resource-level permissions for this read (service authorization reference)
        {"Sid": "CompleteLaunchHook", "Effect": "Allow", "Action": ["autoscaling:CompleteLifecycleAction"],
         "Resource": f"arn:{partition}:autoscaling:*:*:autoScalingGroup:*", "Condition": own},
    ]
    if claims_head_address:
        statements.append({
            "Sid": "ClaimHeadAddress", "Effect": "Allow", "Action": ["ec2:AssignPrivateIpAddresses"],
            "Resource": f"arn:{partition}:ec2:*:*:network-interface/*",
            "Condition": {"StringEquals": {f"aws:ResourceTag/{TAG_STACK}": stack,
                                           "aws:ResourceTag/infragen:role": "head"}}})
    return json.dumps({"Version": "2012-10-17", "Statement": statements})
