"""Alibaba stacks under Pulumi mocks: resources match the plan, and the security invariants hold.

Plans are the hand-built factory shapes on `cloud="alicloud"`; no cloud, no CLI, no planner.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest

from infragen.errors import InputError
from infragen.plan import Plan
from infragen.provision.common import TAG_DIGEST
from tests.plan_factory import SENTINEL_SECRET, make_plan
from tests.provision.test_alicloud_support import (
    GPU_IMAGE_ID,
    IMAGE_ID,
    KMS_INSTANCE_ID,
    KMS_KEY_ID,
    SENTINEL_HF,
    AliRun,
    decoded_user_data,
    dump,
    node_specs,
    run_alicloud,
)

KINDS = ["single", "packed", "tp", "multinode", "cpu"]
INSTANCE = "ecs/instance:Instance"
RULE = "ecs/securityGroupRule:SecurityGroupRule"
# Resource types the provider gives no `tags` argument (checked against pulumi-alicloud below).
UNTAGGABLE = {
    "alicloud:ecs/securityGroupRule:SecurityGroupRule": "ecs.SecurityGroupRuleArgs",
    "alicloud:ecs/eipAssociation:EipAssociation": "ecs.EipAssociationArgs",
    "alicloud:vpc/snatEntry:SnatEntry": "vpc.SnatEntryArgs",
    "alicloud:ram/rolePolicyAttachment:RolePolicyAttachment": "ram.RolePolicyAttachmentArgs",
    "alicloud:ecs/ecsDeploymentSet:EcsDeploymentSet": "ecs.EcsDeploymentSetArgs",
    "alicloud:ecs/ecsNetworkInterfaceAttachment:EcsNetworkInterfaceAttachment": "ecs.EcsNetworkInterfaceAttachmentArgs",
    "alicloud:alb/loadBalancerSecurityGroupAttachment:LoadBalancerSecurityGroupAttachment":
        "alb.LoadBalancerSecurityGroupAttachmentArgs",
    "alicloud:nlb/serverGroupServerAttachment:ServerGroupServerAttachment": "nlb.ServerGroupServerAttachmentArgs",
    "alicloud:ecs/ramRoleAttachment:RamRoleAttachment": "ecs.RamRoleAttachmentArgs",
    "alicloud:alb/rule:Rule": "alb.RuleArgs",
    "alicloud:ess/lifecycleHook:LifecycleHook": "ess.LifecycleHookArgs",
    "alicloud:ess/serverGroupAttachment:ServerGroupAttachment": "ess.ServerGroupAttachmentArgs",
    "alicloud:ess/scalingRule:ScalingRule": "ess.ScalingRuleArgs",
    "alicloud:ess/scheduledTask:ScheduledTask": "ess.ScheduledTaskArgs",
    "alicloud:ess/instanceRefresh:InstanceRefresh": "ess.InstanceRefreshArgs",
}


def _plan_with(plan: Plan, **sections: dict[str, Any]) -> Plan:
    """The plan with some fields of some sections replaced (validated again, new digest)."""
    data = plan.model_dump(mode="json", exclude={"digest"})
    for section, fields in sections.items():
        data[section] = {**data[section], **fields}
    return Plan.model_validate(data)


@pytest.fixture(scope="module", params=KINDS)
def stack(request: pytest.FixtureRequest) -> tuple[Plan, AliRun, dict[str, Any]]:
    plan = make_plan(request.param, "alicloud")
    run = run_alicloud(plan)
    return plan, run, run.exports


def test_instances_match_the_plan(stack: tuple[Plan, AliRun, dict[str, Any]]) -> None:
    plan, mocks, _ = stack
    specs = node_specs(mocks)
    # Multi-node replicas are fixed instances; single-node replicas launch from one template in scaling groups.
    assert sum(spec.nodes for spec in specs) == plan.deployment.nodes
    assert len(specs) == (plan.deployment.nodes if plan.deployment.nodes_per_replica > 1 else 1)
    for spec in specs:
        inputs, name = spec.inputs, spec.resource.name
        assert inputs["instanceType"] == plan.deployment.instance_type, name
        # No image id configured: GPU nodes too boot the Ubuntu system image and install their driver at first boot.
        assert inputs["imageId"] == IMAGE_ID, name
        assert inputs["systemDiskSize"] == plan.storage.root_volume_gib
        assert inputs["systemDiskCategory"] == "cloud_essd"
        disks = inputs["dataDisks"]
        assert len(disks) == 1, name
        assert disks[0]["size"] == plan.storage.volume_gib
        assert disks[0]["category"] == plan.storage.volume_type
        assert disks[0]["performanceLevel"] == plan.storage.performance_level


def test_nodes_are_private_hardened_and_encrypted(stack: tuple[Plan, AliRun, dict[str, Any]]) -> None:
    _, mocks, _ = stack
    for spec in node_specs(mocks):
        inputs, name = spec.inputs, spec.resource.name
        assert inputs["internetMaxBandwidthOut"] == 0, f"{name} gets a public IP"
        assert "allocatePublicIp" not in inputs and "roleName" not in inputs, f"{name}: deprecated"
        assert inputs["httpTokens"] == "required", f"{name}: metadata without a token"
        assert inputs["systemDiskEncrypted"] is True, name
        assert all(d["encrypted"] is True for d in inputs.get("dataDisks", [])), name
        assert "password" not in inputs and "keyName" not in inputs and "keyPairName" not in inputs, name
        assert inputs["spotStrategy"] == "NoSpot"


def test_no_public_ingress_but_the_listener(stack: tuple[Plan, AliRun, dict[str, Any]]) -> None:
    _, mocks, _ = stack
    groups = {r.name: r for r in mocks.of_type("ecs/securityGroup:SecurityGroup")}
    lb_sg = next(f"{name}-id" for name in groups if name.endswith("-lb-sg"))
    for rule in mocks.of_type(RULE):
        inputs = rule.inputs
        assert inputs["type"] == "ingress"
        if inputs.get("policy") == "drop":
            continue  # the LB's deny-all (checked below)
        low, high = (int(p) for p in inputs["portRange"].split("/"))
        if "sourceSecurityGroupId" not in inputs:
            assert low > 0 and not low <= 22 <= high, f"{rule.name} opens SSH or every port to {inputs['cidrIp']}"
        cidr = inputs.get("cidrIp")
        if cidr is not None and not ipaddress.ip_network(cidr).is_private:
            # Only the LB's security group may admit the internet, and only on the listener port (80, no cert).
            assert inputs["securityGroupId"] == lb_sg, f"{rule.name} opens a node to {cidr}"
            assert inputs["portRange"] == "80/80", rule.name
            assert inputs["ipProtocol"] == "tcp", rule.name
    _assert_deny_below_allows(mocks, lb_sg)


def _assert_deny_below_allows(mocks: AliRun, lb_sg: str) -> None:
    """The LB group ends with one deny-all at the lowest priority; every allow rule sits above it."""
    rules = [r.inputs for r in mocks.of_type(RULE) if r.inputs["securityGroupId"] == lb_sg]
    (deny,) = [r for r in rules if r.get("policy") == "drop"]
    assert deny["cidrIp"] == "0.0.0.0/0" and deny["ipProtocol"] == "all" and deny["portRange"] == "-1/-1"
    allows = [r for r in rules if r.get("policy") == "accept"]
    assert allows and all(r["priority"] < deny["priority"] == 100 for r in allows)


def test_load_balancer_forwards_to_the_engine_ports(stack: tuple[Plan, AliRun, dict[str, Any]]) -> None:
    plan, mocks, exports = stack
    (listener,) = mocks.of_type("alb/listener:Listener")
    assert listener.inputs["listenerPort"] == 80
    assert listener.inputs["listenerProtocol"] == "HTTP"
    # Only the API and the health path reach the engines; the rest gets a 404 from the ALB.
    rules = sorted(mocks.of_type("alb/rule:Rule"), key=lambda r: r.inputs["priority"])
    assert [r.inputs["ruleConditions"][0]["pathConfig"]["values"] for r in rules] == [
        ["/v1/*", plan.engine.health_path], ["/*"]]
    assert rules[0].inputs["ruleActions"][0]["type"] == "ForwardGroup"
    assert rules[1].inputs["ruleActions"][0]["fixedResponseConfig"]["httpCode"] == "404"
    assert listener.inputs["idleTimeout"] == plan.network.idle_timeout_s
    (group,) = mocks.of_type("alb/serverGroup:ServerGroup")
    health = group.inputs["healthCheckConfig"]
    assert health["healthCheckEnabled"] is True
    assert health["healthCheckPath"] == plan.engine.health_path
    dep = plan.deployment
    if dep.nodes_per_replica > 1:  # fixed heads: one backend per replica, on the engine port
        servers = group.inputs["servers"]
        assert len(servers) == dep.replicas, "one backend per engine instance"
        assert sorted(s["port"] for s in servers) == [plan.engine.port] * dep.replicas
    else:  # ESS adds every node of every replica group to the server group, once per engine port
        assert "servers" not in group.inputs
        attachments = mocks.of_type("ess/serverGroupAttachment:ServerGroupAttachment")
        groups = {f"{g.name}-id" for g in mocks.of_type("ess/scalingGroup:ScalingGroup")}
        ports = list(range(plan.engine.port, plan.engine.port + dep.replicas_per_node))
        assert sorted((a.inputs["scalingGroupId"], a.inputs["port"]) for a in attachments) == sorted(
            (g, p) for g in groups for p in ports)
        assert all(a.inputs["serverGroupId"] == f"{group.name}-id" and a.inputs["type"] == "ALB"
                   and a.inputs["weight"] == 100 for a in attachments)
    (alb,) = mocks.of_type("alb/loadBalancer:LoadBalancer")
    assert alb.inputs["addressType"] == "Internet"
    assert len(alb.inputs["zoneMappings"]) == 2
    assert len({z["zoneId"] for z in alb.inputs["zoneMappings"]}) == 2, "ALB needs two distinct zones"
    assert exports["endpoint"] == f"http://{alb.name}.cn-hangzhou.alb.example"


def test_nodes_accept_only_the_lb_vswitches_on_engine_ports(stack: tuple[Plan, AliRun, dict[str, Any]]) -> None:
    plan, mocks, _ = stack
    lb_cidrs = {r.inputs["cidrBlock"] for r in mocks.of_type("vpc/switch:Switch") if "-lb-" in r.name}
    node_rules = [r for r in mocks.of_type(RULE) if r.inputs["securityGroupId"].endswith("-node-sg-id")]
    low = plan.engine.port
    high = plan.engine.port + (plan.deployment.replicas_per_node - 1 if plan.deployment.nodes_per_replica == 1 else 0)
    from_cidrs = [r for r in node_rules if "cidrIp" in r.inputs]
    assert {r.inputs["cidrIp"] for r in from_cidrs} == lb_cidrs
    assert all(r.inputs["portRange"] == f"{low}/{high}" for r in from_cidrs)
    self_rules = [r for r in node_rules if "sourceSecurityGroupId" in r.inputs]
    assert len(self_rules) == (1 if plan.deployment.nodes_per_replica > 1 else 0)


def test_secrets_live_only_in_kms(stack: tuple[Plan, AliRun, dict[str, Any]]) -> None:
    plan, mocks, exports = stack
    names = plan.secrets.for_stack("test")  # the mocks' stack name: two stacks of one workload never share
    assert names.api_key_name == f"infragen/test/{plan.workload}/api-key"
    secrets = {r.inputs["secretName"]: r for r in mocks.of_type("kms/secret:Secret")}
    assert set(secrets) == {names.hf_token_name, names.api_key_name}
    assert exports["secret_names"] == [names.hf_token_name, names.api_key_name]
    for secret in secrets.values():  # KMS 3.0: the instance and its key, both (provider: required on KMS 3.0)
        assert secret.inputs["dkmsInstanceId"] == KMS_INSTANCE_ID and secret.inputs["encryptionKeyId"] == KMS_KEY_ID
        assert secret.inputs["tags"]["infragen:stack"] == "test"
    assert SENTINEL_HF in dump(secrets[names.hf_token_name].inputs["secretData"])
    assert SENTINEL_SECRET in dump(secrets[names.api_key_name].inputs["secretData"])
    for res in mocks.resources:
        if res.type == "alicloud:kms/secret:Secret":
            continue
        text = dump(res.inputs)
        assert SENTINEL_HF not in text and SENTINEL_SECRET not in text, f"{res.type} {res.name} carries a secret"
    for spec in node_specs(mocks):
        user_data = decoded_user_data(spec.resource)
        assert SENTINEL_HF not in user_data and SENTINEL_SECRET not in user_data, spec.resource.name
        # The nodes read the stack's names (the renderer is handed them), never the plan's stack-free ones.
        assert f"secrets={names.hf_token_name} {names.api_key_name}" in user_data, spec.resource.name


def test_role_reads_exactly_the_two_secrets(stack: tuple[Plan, AliRun, dict[str, Any]]) -> None:
    plan, mocks, _ = stack
    (role,) = mocks.of_type("ram/role:Role")
    trust = json.loads(role.inputs["assumeRolePolicyDocument"])
    assert trust["Statement"][0]["Principal"]["Service"] == ["ecs.aliyuncs.com"]
    (policy,) = mocks.of_type("ram/policy:Policy")
    statement, decrypt = json.loads(policy.inputs["policyDocument"])["Statement"]
    assert statement["Action"] == ["kms:GetSecretValue"]
    resources = statement["Resource"]
    assert len(resources) == 2 and not any("*" in r for r in resources)
    names = plan.secrets.for_stack("test")
    assert {r.rsplit("secret/", 1)[1] for r in resources} == {names.hf_token_name, names.api_key_name}
    # RAM names are account-wide: the role and its policy carry the stack too.
    assert role.inputs["roleName"].endswith("-test-node") and policy.inputs["policyName"].endswith("-test-read-secrets")
    # The secrets are encrypted with the configured KMS 3.0 key: the role may decrypt with that key only.
    assert decrypt == {"Effect": "Allow", "Action": ["kms:Decrypt"],
                       "Resource": [f"acs:kms:cn-hangzhou:123456789:key/{KMS_KEY_ID}"]}
    (attachment,) = mocks.of_type("ram/rolePolicyAttachment:RolePolicyAttachment")
    assert attachment.inputs["roleName"] == role.inputs["roleName"]
    # The role reaches each fixed instance through ecs.RamRoleAttachment (the instance's role_name is deprecated),
    # and every node of the replica groups through their launch template.
    attached = {a.inputs["instanceId"]: a.inputs["ramRoleName"]
                for a in mocks.of_type("ecs/ramRoleAttachment:RamRoleAttachment")}
    assert attached == {f"{i.name}-id": role.inputs["roleName"] for i in mocks.of_type(INSTANCE)}
    assert all(t.inputs["ramRoleName"] == role.inputs["roleName"]
               for t in mocks.of_type("ecs/ecsLaunchTemplate:EcsLaunchTemplate"))


def test_every_taggable_resource_carries_the_digest(stack: tuple[Plan, AliRun, dict[str, Any]]) -> None:
    plan, mocks, _ = stack
    for res in mocks.resources:
        if not res.type.startswith("alicloud:") or res.type in UNTAGGABLE:
            continue
        if res.type == "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate":
            # The template's own tags carry it; the tags it gives its nodes do not (a new template version, and so
            # an instance refresh, for every price refresh otherwise): tests/render/test_node_digest.py.
            assert res.inputs["templateTags"][TAG_DIGEST] == plan.digest, res.name
            assert TAG_DIGEST not in res.inputs["tags"], res.name
            continue
        assert res.inputs.get("tags", {}).get(TAG_DIGEST) == plan.digest, f"{res.type} {res.name} lacks the digest"


def test_untaggable_types_really_take_no_tags() -> None:
    import importlib
    import inspect

    for args_path in UNTAGGABLE.values():
        module, cls = args_path.split(".")
        args = getattr(importlib.import_module(f"pulumi_alicloud.{module}"), cls)
        assert "tags" not in inspect.signature(args.__init__).parameters, f"{args_path} takes tags: tag it"


def test_egress_goes_through_nat_with_snat_per_node_vswitch(stack: tuple[Plan, AliRun, dict[str, Any]]) -> None:
    _, mocks, _ = stack
    (nat,) = mocks.of_type("vpc/natGateway:NatGateway")
    assert nat.inputs["natType"] == "Enhanced"
    (assoc,) = mocks.of_type("ecs/eipAssociation:EipAssociation")
    assert assoc.inputs["instanceType"] == "Nat" and assoc.inputs["instanceId"] == f"{nat.name}-id"
    node_switches = {f"{r.name}-id" for r in mocks.of_type("vpc/switch:Switch") if "-nodes-" in r.name}
    snat_sources = {r.inputs["sourceVswitchId"] for r in mocks.of_type("vpc/snatEntry:SnatEntry")}
    assert snat_sources == node_switches


def test_components_parent_their_resources() -> None:
    urns = run_alicloud(make_plan("single", "alicloud")).urns
    chains = [urn.split("::")[2].split("$") for urn in urns]
    cloud = [chain for chain in chains if chain[-1].startswith("alicloud:")]
    assert len(cloud) > 20, "the stack registered too few resources"
    for chain in cloud:
        assert len(chain) >= 2 and chain[-2].startswith("infragen:alicloud:"), f"{chain[-1]} has no component parent"


def test_multinode_uses_erdma_a_low_latency_set_one_zone_and_a_fixed_head() -> None:
    plan = make_plan("multinode", "alicloud")
    mocks = run_alicloud(plan)
    instances = mocks.of_type(INSTANCE)
    (placement,) = mocks.of_type("ecs/ecsDeploymentSet:EcsDeploymentSet")
    assert placement.inputs["strategy"] == "LowLatency"
    assert {i.inputs["deploymentSetId"] for i in instances} == {f"{placement.name}-id"}
    assert len({i.inputs["vswitchId"] for i in instances}) == 1, "a replica spans one zone"
    for inst in instances:
        # ebmgn8v.48xlarge has two ERIs: the primary ENI plus one on network card 1.
        assert inst.inputs["networkInterfaceTrafficMode"] == "HighPerformance"
        assert inst.inputs["networkInterfaces"]["networkInterfaceTrafficMode"] == "HighPerformance"
        assert inst.inputs["networkInterfaces"]["networkCardIndex"] == 1
    heads = [i for i in instances if i.inputs["tags"]["infragen:role"] == "head"]
    workers = [i for i in instances if i.inputs["tags"]["infragen:role"] == "worker"]
    assert len(heads) == plan.deployment.replicas and len(workers) == plan.deployment.nodes - plan.deployment.replicas
    head_ip = heads[0].inputs["privateIp"]
    switch = next(s for s in mocks.of_type("vpc/switch:Switch") if f"{s.name}-id" == heads[0].inputs["vswitchId"])
    assert ipaddress.ip_address(head_ip) in ipaddress.ip_network(switch.inputs["cidrBlock"])
    # Every node of the replica is told where the head is; the head itself too.
    for inst in instances:
        assert f"head={head_ip}" in decoded_user_data(inst), inst.name
        assert "privateIp" not in inst.inputs or inst in heads


def test_more_eris_are_attached_as_separate_interfaces() -> None:
    plan = _plan_with(make_plan("multinode", "alicloud"), deployment={"instance_type": "ecs.ebmgn8i.32xlarge"})
    mocks = run_alicloud(plan)
    enis = mocks.of_type("ecs/ecsNetworkInterface:EcsNetworkInterface")
    attachments = mocks.of_type("ecs/ecsNetworkInterfaceAttachment:EcsNetworkInterfaceAttachment")
    # 4 ERIs per node: primary + inline secondary + two attached on network cards 2 and 3.
    assert len(enis) == 2 * plan.deployment.nodes
    assert all(e.inputs["networkInterfaceTrafficMode"] == "HighPerformance" for e in enis)
    assert sorted(a.inputs["networkCardIndex"] for a in attachments) == sorted([2, 3] * plan.deployment.nodes)


def test_single_node_replicas_have_no_rdma_and_no_placement() -> None:
    mocks = run_alicloud(make_plan("single", "alicloud"))
    assert not mocks.of_type(INSTANCE) and not mocks.of_type("ecs/ecsDeploymentSet:EcsDeploymentSet")
    (template,) = mocks.of_type("ecs/ecsLaunchTemplate:EcsLaunchTemplate")
    assert "networkInterfaces" not in template.inputs and "deploymentSetId" not in template.inputs
    assert "privateIpAddress" not in template.inputs and "head=None" in decoded_user_data(template)


def test_spot_plans_launch_spot_instances() -> None:
    mocks = run_alicloud(make_plan("single", "alicloud", spot=True))
    (template,) = mocks.of_type("ecs/ecsLaunchTemplate:EcsLaunchTemplate")
    assert template.inputs["spotStrategy"] == "SpotAsPriceGo" and template.inputs["instanceChargeType"] == "PostPaid"
    zone_call = next(args for token, args in mocks.calls if token == "alicloud:index/getZones:getZones")
    assert zone_call["spotStrategy"] == "SpotAsPriceGo"


def test_certificate_adds_an_https_listener_and_opens_443() -> None:
    mocks = run_alicloud(make_plan("single", "alicloud"), certificate="1234-cn-hangzhou")
    listeners = {r.inputs["listenerPort"]: r for r in mocks.of_type("alb/listener:Listener")}
    assert set(listeners) == {80, 443}
    assert listeners[443].inputs["certificates"]["certificateId"] == "1234-cn-hangzhou"
    public_ports = {r.inputs["portRange"] for r in mocks.of_type(RULE)
                    if r.inputs.get("cidrIp") == "0.0.0.0/0" and r.inputs["policy"] == "accept"}
    assert public_ports == {"80/80", "443/443"}
    rules = {r.name: r.inputs for r in mocks.of_type("alb/rule:Rule")}
    # HTTP only redirects to HTTPS; HTTPS carries the API rules.
    (redirect,) = [r for n, r in rules.items() if n.endswith("http-redirect")]
    assert redirect["ruleActions"][0]["redirectConfig"] == {"protocol": "HTTPS", "port": "443", "httpCode": "301"}
    assert {n.rsplit("-", 1)[-1] for n in rules if "-alb-https-" in n} == {"api", "found"}
    assert mocks.exports["endpoint"].startswith("https://")


def test_allowed_cidrs_restrict_the_listener() -> None:
    mocks = run_alicloud(make_plan("single", "alicloud"), allowed=("203.0.113.0/24", "198.51.100.0/24"))
    lb_rules = [r.inputs for r in mocks.of_type(RULE) if r.inputs["securityGroupId"].endswith("-lb-sg-id")]
    public = {r["cidrIp"] for r in lb_rules if r["policy"] == "accept"}
    assert public == {"203.0.113.0/24", "198.51.100.0/24"}
    # Without the deny-all below them the allow rules would not bind (ALB/NLB accept everyone otherwise).
    assert all(r.inputs.get("cidrIp") != "0.0.0.0/0" or r.inputs["policy"] == "drop" for r in mocks.of_type(RULE))
    _assert_deny_below_allows(mocks, "test-single-al-net-lb-sg-id")


def test_nlb_plans_get_a_tcp_nlb_with_an_http_health_check() -> None:
    plan = _plan_with(make_plan("packed", "alicloud"), network={"load_balancer": "nlb"})
    mocks = run_alicloud(plan)
    assert not mocks.of_type("alb/loadBalancer:LoadBalancer")
    (nlb,) = mocks.of_type("nlb/loadBalancer:LoadBalancer")
    assert nlb.inputs["securityGroupIds"] and len(nlb.inputs["zoneMappings"]) == 2
    (listener,) = mocks.of_type("nlb/listener:Listener")
    assert listener.inputs["listenerPort"] == 80 and listener.inputs["listenerProtocol"] == "TCP"
    (group,) = mocks.of_type("nlb/serverGroup:ServerGroup")
    assert group.inputs["healthCheck"]["healthCheckUrl"] == plan.engine.health_path
    # Packed replicas in scaling groups: ESS adds each node to the NLB server group on every engine port.
    attachments = mocks.of_type("ess/serverGroupAttachment:ServerGroupAttachment")
    assert sorted(a.inputs["port"] for a in attachments) == [8000, 8001, 8002, 8003] * len(
        mocks.of_type("ess/scalingGroup:ScalingGroup"))
    assert {a.inputs["type"] for a in attachments} == {"NLB"}
    assert {a.inputs["serverGroupId"] for a in attachments} == {f"{group.name}-id"}
    assert any(token == "alicloud:nlb/getZones:getZones" for token, _ in mocks.calls)
    assert mocks.exports["endpoint"] == f"http://{nlb.name}.cn-hangzhou.nlb.example"


def test_a_region_with_one_lb_zone_fails_with_a_message() -> None:
    # Tested on the zone picker itself: under mocks a failing apply leaves unretrieved futures behind.
    import pulumi

    from infragen.provision.alicloud.network import _pick, _pick_distinct

    with pytest.raises(pulumi.RunError, match="two zones"):
        _pick_distinct(["cn-hangzhou-h", "cn-hangzhou-h"], 1)
    assert [_pick_distinct(["a", "a", "b"], i) for i in range(2)] == ["a", "b"]
    with pytest.raises(pulumi.RunError, match="no zone"):
        _pick([], 0, "ecs.gn7i-c8g1.2xlarge")
    assert [_pick(["a", "b"], i, "x") for i in range(3)] == ["a", "b", "a"]


def test_an_essd_too_small_for_its_level_is_refused() -> None:
    plan = _plan_with(make_plan("single", "alicloud"), storage={"performance_level": "PL2"})
    with pytest.raises(InputError, match="PL2"):
        run_alicloud(plan)


def test_cpu_nodes_boot_the_newest_ubuntu_system_image() -> None:
    mocks = run_alicloud(make_plan("cpu", "alicloud"))
    (query,) = [args for token, args in mocks.calls if token == "alicloud:ecs/getImages:getImages"]
    assert query["owners"] == "system" and query["nameRegex"].startswith("^ubuntu_22_04_x64")
    assert query["mostRecent"] is True and query["instanceType"] == "ecs.c7.4xlarge"


def _refusal(plan: Plan, options: Any) -> tuple[str, Any]:
    """The rendered InputError of a refused build, and the recording (to check nothing was declared first)."""
    from infragen.provision.alicloud import build_alicloud
    from tests.provision.mocks import Recording, run_program
    from tests.provision.test_alicloud_support import COMPUTED, ZONES, call_results, make_settings

    seen = Recording()

    def program() -> dict[str, Any]:
        try:
            return build_alicloud(plan, make_settings(), options=options)
        except InputError as exc:
            seen.errors.append(exc.render())
            return {}

    rec = run_program(program, call_results=call_results(ZONES), computed=COMPUTED)
    (message,) = seen.errors
    return message, rec


def test_gpu_plans_without_a_driver_to_install_need_a_driver_image() -> None:
    from infragen.provision.alicloud import AlicloudOptions

    plan = _plan_with(make_plan("multinode", "alicloud"), bootstrap={"gpu_driver": None})
    kms = AlicloudOptions(kms_instance_id=KMS_INSTANCE_ID, kms_key_id=KMS_KEY_ID)
    message, rec = _refusal(plan, kms)
    assert "NVIDIA driver" in message and "infragen:imageId" in message and "eRDMA" in message
    assert not rec.resources, "resources declared before the error"
    # With an image named, the same plan deploys on it.
    run = run_alicloud(plan, options=AlicloudOptions(image_id=GPU_IMAGE_ID, kms_instance_id=KMS_INSTANCE_ID,
                                                     kms_key_id=KMS_KEY_ID))
    assert {spec.inputs["imageId"] for spec in node_specs(run)} == {GPU_IMAGE_ID}


@pytest.mark.parametrize("instance, key", [(None, None), (KMS_INSTANCE_ID, None), (None, KMS_KEY_ID)])
def test_kms_3_needs_the_instance_and_the_key(instance: str | None, key: str | None) -> None:
    from infragen.provision.alicloud import AlicloudOptions

    message, rec = _refusal(make_plan("single", "alicloud"),
                            AlicloudOptions(kms_instance_id=instance, kms_key_id=key))
    assert "KMS 3.0" in message and "pulumi config set infragen:kmsInstanceId" in message
    for name, value in (("infragen:kmsInstanceId", instance), ("infragen:kmsKeyId", key)):
        assert (name in message.split(" not set")[0]) == (value is None), message
    assert not rec.resources, "resources declared before the error"


def test_spot_never_meets_a_deployment_set() -> None:
    from infragen.provision.alicloud import AlicloudOptions

    message, rec = _refusal(make_plan("multinode", "alicloud", spot=True),
                            AlicloudOptions(kms_instance_id=KMS_INSTANCE_ID, kms_key_id=KMS_KEY_ID))
    assert "spot" in message and "deployment set" in message and "on-demand" in message
    assert not rec.resources
    # Spot single-node replicas have no deployment set and deploy.
    run = run_alicloud(make_plan("single", "alicloud", spot=True))
    assert not run.of_type("ecs/ecsDeploymentSet:EcsDeploymentSet")


def test_resources_go_to_the_plans_region() -> None:
    mocks = run_alicloud(make_plan("single", "alicloud"))
    (provider,) = mocks.of_type("pulumi:providers:alicloud")
    assert provider.inputs["region"] == "cn-hangzhou"


def test_the_plans_region_wins_over_the_stack_config() -> None:
    mocks = run_alicloud(make_plan("single", "alicloud"),
                         stack_config={"alicloud:region": "ap-southeast-1", "alicloud:profile": "ops"})
    (provider,) = mocks.of_type("pulumi:providers:alicloud")
    assert provider.inputs["region"] == "cn-hangzhou"
    assert provider.inputs["profile"] == "ops", "stack credentials config must reach the explicit provider"


def test_an_aws_plan_is_refused() -> None:
    with pytest.raises(InputError, match="not alicloud"):
        run_alicloud(make_plan("single", "aws"))


def test_an_nlb_with_a_certificate_offers_tls_on_443_only() -> None:
    plan = _plan_with(make_plan("packed", "alicloud"), network={"load_balancer": "nlb"})
    mocks = run_alicloud(plan, certificate="1234-cn-hangzhou")
    (listener,) = mocks.of_type("nlb/listener:Listener")
    assert listener.inputs["listenerPort"] == 443 and listener.inputs["listenerProtocol"] == "TCPSSL"
    allowed = {r.inputs["portRange"] for r in mocks.of_type(RULE) if r.inputs.get("policy") == "accept"
               and r.inputs["securityGroupId"].endswith("-lb-sg-id")}
    assert allowed == {"443/443"}
    assert mocks.exports["endpoint"].startswith("https://")
