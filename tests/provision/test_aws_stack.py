"""AWS components under Pulumi mocks, for every plan shape: resources and counts match the plan, and the
security invariants hold (no public ingress but the listeners, IMDSv2, encryption, no public IPs, no secret
in any input but its secret version, LB target port = engine port, health path set, digest tags)."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
from typing import Any

import pulumi
import pytest

from infragen.plan import Plan
from infragen.provision import build_stack
from infragen.provision.aws import build_aws
from infragen.provision.aws.compute import CAPACITY_WAIT_MARGIN_S
from infragen.provision.aws.layout import POST_HOOK_GRACE_S
from infragen.provision.aws.port_targets import DRAIN_MARGIN_S, node_registered_ports
from infragen.provision.common import TAG_DIGEST, TAG_WORKLOAD, SecretLeakError, engine_ports
from infragen.render.cloud_init import AWS_DRAIN_HOOK, AWS_LAUNCH_HOOK
from tests.plan_factory import make_plan
from tests.provision.conftest import (
    API_SENTINEL,
    AWS_CALLS,
    AWS_COMPUTED,
    HF_SENTINEL,
    MOCK_AMI,
    PROJECT_ROOT,
    fake_renderer,
    make_settings,
)
from tests.provision.mocks import Recording, run_program

LT = "aws:ec2/launchTemplate:LaunchTemplate"
ASG = "aws:autoscaling/group:Group"
INSTANCE = "aws:ec2/instance:Instance"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
TG = "aws:lb/targetGroup:TargetGroup"
RULE = "aws:lb/listenerRule:ListenerRule"
SECRET_VERSION = "aws:secretsmanager/secretVersion:SecretVersion"

KINDS = ["single", "packed", "tp", "multinode", "cpu"]


def run_aws(plan: Plan, **settings: Any) -> Recording:
    return run_program(lambda: build_aws(plan, make_settings(**settings), render_user_data=fake_renderer(plan)),
                       call_results=AWS_CALLS, computed=AWS_COMPUTED)


EXAMPLES = ["team-chatbot", "enterprise-70b", "multinode-405b", "cpu-edge"]


def example_plan(name: str) -> Plan:
    sizing = pytest.importorskip("infragen.sizing")
    if not hasattr(sizing, "plan_file"):
        pytest.skip("planner entry point infragen.sizing.plan_file not available yet")
    return sizing.plan_file(PROJECT_ROOT / "examples" / f"{name}.yaml")


@pytest.fixture(scope="module", params=[*KINDS, "single-spot", "multinode-spot", *(f"example:{e}" for e in EXAMPLES)])
def stack(request: pytest.FixtureRequest) -> tuple[Plan, Recording]:
    """Factory plans of every shape, and the plans of the four AWS example workloads."""
    if request.param.startswith("example:"):
        plan = example_plan(request.param.removeprefix("example:"))
    else:
        kind, _, spot = request.param.partition("-")
        plan = make_plan(kind, "aws", spot=bool(spot))
    rec = run_aws(plan)
    assert not rec.errors, rec.errors
    return plan, rec


def user_data_of(lt_inputs: dict[str, Any]) -> str:
    raw = base64.b64decode(lt_inputs["userData"])
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()


# -- counts follow the plan ----------------------------------------------------------------------------------
def test_node_count_matches_plan(stack: tuple[Plan, Recording]) -> None:
    plan, rec = stack
    assert sum(int(g.inputs["desiredCapacity"]) for g in rec.of_type(ASG)) == plan.deployment.nodes
    assert rec.of_type(INSTANCE) == [], "every node is in an Auto Scaling group (a lost node comes back)"
    for g in rec.of_type(ASG):
        assert g.inputs["minSize"] == g.inputs["maxSize"] == g.inputs["desiredCapacity"], g.name
    if plan.deployment.nodes_per_replica > 1:
        heads = [g for g in rec.of_type(ASG) if g.name.endswith("-head")]
        assert len(heads) == plan.deployment.replicas and all(g.inputs["desiredCapacity"] == 1 for g in heads)
        assert len(rec.of_type("aws:ec2/placementGroup:PlacementGroup")) == plan.deployment.replicas
        assert all(p.inputs["strategy"] == "cluster" for p in rec.of_type("aws:ec2/placementGroup:PlacementGroup"))
    else:
        assert len(rec.of_type(ASG)) == 1


def test_launch_templates_use_plan_instance_and_image(stack: tuple[Plan, Recording]) -> None:
    plan, rec = stack
    lts = rec.of_type(LT)
    assert lts
    for lt in lts:
        assert lt.inputs["instanceType"] == plan.deployment.instance_type, lt.name
        assert lt.inputs["imageId"] == MOCK_AMI, lt.name
    asked = [args["name"] for token, args in rec.calls if token == "aws:ssm/getParameter:getParameter"]
    arch = plan.deployment.cpu_arch
    expected = (f"/aws/service/deeplearning/ami/{arch}/" if plan.deployment.gpu else
                f"/aws/service/canonical/ubuntu/server/22.04/stable/current/{'amd64' if arch == 'x86_64' else arch}/")
    assert asked and all(name.startswith(expected) for name in asked), asked


def test_efa_interfaces_follow_plan(stack: tuple[Plan, Recording]) -> None:
    plan, rec = stack
    for lt in rec.of_type(LT):
        nics = lt.inputs["networkInterfaces"]
        if plan.network.rdma == "efa":
            assert len(nics) == plan.network.efa_interfaces, lt.name
            assert [n["networkCardIndex"] for n in nics] == list(range(plan.network.efa_interfaces))
            assert nics[0]["interfaceType"] == "efa"
            assert all(n["interfaceType"] == "efa-only" for n in nics[1:])
            assert all(len(n["securityGroups"]) >= 1 for n in nics)
        else:
            assert len(nics) == 1 and "interfaceType" not in nics[0], lt.name


def test_storage_follows_plan(stack: tuple[Plan, Recording]) -> None:
    plan, rec = stack
    for lt in rec.of_type(LT):
        devices = {d["deviceName"]: d["ebs"] for d in lt.inputs["blockDeviceMappings"]}
        root = devices.pop("/dev/sda1")
        assert root["volumeSize"] == plan.storage.root_volume_gib and root["volumeType"] == "gp3"
        if plan.storage.kind == "volume":
            data = devices.pop("/dev/sdf")
            assert data["volumeSize"] == plan.storage.volume_gib
            assert data["volumeType"] == plan.storage.volume_type
            assert data.get("iops") == plan.storage.volume_iops
            assert data.get("throughput") == plan.storage.volume_throughput_mb_per_s
        assert devices == {}, f"{lt.name}: unexpected volumes {devices}"


def test_traffic_waits_for_the_readiness_hook(stack: tuple[Plan, Recording]) -> None:
    """Serving groups hold a new node in a launch lifecycle hook (heartbeat = the plan's download + load budget)
    that the node's readiness unit completes; only then is it registered, and a refresh moves on. Workers serve
    nothing and have no hook."""
    plan, rec = stack
    serving = [g for g in rec.of_type(ASG) if g.inputs.get("targetGroupArns")]
    assert len(serving) == (plan.deployment.replicas if plan.deployment.nodes_per_replica > 1 else 1)
    budget = min(max(plan.network.health_check_grace_s, 30), 7200)
    for g in rec.of_type(ASG):
        hooks = g.inputs.get("initialLifecycleHooks")
        if g in serving:
            assert g.inputs["healthCheckType"] == "ELB", g.name
            hook, *drain = hooks
            assert hook == {"name": AWS_LAUNCH_HOOK, "lifecycleTransition": "autoscaling:EC2_INSTANCE_LAUNCHING",
                            "heartbeatTimeout": budget, "defaultResult": "ABANDON"}, g.name
            # Packed nodes register their other engine ports themselves; the group keeps a terminating one until
            # the node has deregistered and drained them (port_targets.py).
            delay = min(max(plan.network.idle_timeout_s, 30), 3600)
            assert drain == ([{"name": AWS_DRAIN_HOOK, "lifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
                               "heartbeatTimeout": min(delay + DRAIN_MARGIN_S, 7200), "defaultResult": "CONTINUE"}]
                             if node_registered_ports(plan) else []), g.name
            assert g.inputs["healthCheckGracePeriod"] == POST_HOOK_GRACE_S, g.name
            assert g.inputs["waitForCapacityTimeout"] == f"{budget + CAPACITY_WAIT_MARGIN_S}s", g.name
            if plan.deployment.nodes_per_replica == 1:  # multi-node replicas roll by replacement (test_aws_roll)
                assert g.inputs["instanceRefresh"]["preferences"]["instanceWarmup"] == str(POST_HOOK_GRACE_S)
        else:
            assert not hooks and g.inputs["healthCheckType"] == "EC2", g.name
            assert g.inputs["healthCheckGracePeriod"] == plan.network.health_check_grace_s, g.name
    for tg in rec.of_type(TG):
        assert tg.inputs["healthCheck"]["path"] == plan.engine.health_path, tg.name
        # A leaving node keeps its streams for at least the LB idle timeout (within ELB's 0-3600 s).
        assert tg.inputs["deregistrationDelay"] == min(max(plan.network.idle_timeout_s, 30), 3600), tg.name
    # One target group at the first engine port: the group registers each node there, the node its other ports.
    assert [int(t.inputs["port"]) for t in rec.of_type(TG)] == engine_ports(plan)[:1]


def test_load_balancer_matches_plan(stack: tuple[Plan, Recording]) -> None:
    plan, rec = stack
    lb = rec.one("aws:lb/loadBalancer:LoadBalancer")
    alb = plan.network.load_balancer == "alb"
    assert lb.inputs["loadBalancerType"] == ("application" if alb else "network")
    assert lb.inputs["internal"] is False
    assert len(lb.inputs["subnets"]) >= 2
    public = {s.name + "-id" for s in rec.of_type("aws:ec2/subnet:Subnet") if "public" in s.name}
    assert set(lb.inputs["subnets"]) == public
    listener = rec.one("aws:lb/listener:Listener")
    assert listener.inputs["port"] == 80
    if alb:
        assert lb.inputs["idleTimeout"] == plan.network.idle_timeout_s
        # Only /v1/* (what the API key guards) and the health path reach the engine; the rest is a 404 here.
        (default,) = listener.inputs["defaultActions"]
        assert default["type"] == "fixed-response" and default["fixedResponse"]["statusCode"] == "404"
        (rule,) = rec.of_type(RULE)
        assert rule.inputs["listenerArn"].endswith(listener.name)
        (condition,) = rule.inputs["conditions"]
        assert condition["pathPattern"]["values"] == ["/v1/*", plan.engine.health_path]
        (action,) = rule.inputs["actions"]
        forwarded = action["forward"]["targetGroups"]
        assert {f["arn"] for f in forwarded} == {f"arn:aws:mock:us-east-1:123456789012:{t.name}"
                                                 for t in rec.of_type(TG)}
    else:
        assert listener.inputs["tcpIdleTimeoutSeconds"] == plan.network.idle_timeout_s
        assert rec.of_type(RULE) == []
    assert rec.of_type("aws:lb/targetGroupAttachment:TargetGroupAttachment") == []
    tg_arns = sorted(f"arn:aws:mock:us-east-1:123456789012:{t.name}" for t in rec.of_type(TG))
    for g in rec.of_type(ASG):
        if not g.name.endswith("-workers"):
            assert sorted(g.inputs["targetGroupArns"]) == tg_arns, g.name


def test_packed_nodes_may_register_their_ports_on_their_target_group_only(stack: tuple[Plan, Recording]) -> None:
    """The node role may register and deregister targets of the stack's one target group (its ARN, not a
    wildcard), and only when the plan packs engines."""
    plan, rec = stack
    policies = [p for p in rec.of_type("aws:iam/rolePolicy:RolePolicy") if p.name.endswith("-engine-ports")]
    if not node_registered_ports(plan):
        assert policies == []
        return
    (policy,) = policies
    (tg,) = rec.of_type(TG)
    statements = {s["Sid"]: s for s in json.loads(policy.inputs["policy"])["Statement"]}
    assert statements["OwnEnginePorts"]["Resource"] == [f"arn:aws:mock:us-east-1:123456789012:{tg.name}"]
    assert set(statements["OwnEnginePorts"]["Action"]) == {"elasticloadbalancing:RegisterTargets",
                                                           "elasticloadbalancing:DeregisterTargets"}
    assert statements["FindTargetGroup"]["Action"] == ["autoscaling:DescribeAutoScalingGroups"]
    assert policy.inputs["role"].endswith("-node-role") or "node-role" in policy.inputs["role"]


def test_eight_engines_per_node_need_one_target_group() -> None:
    """More engines than an ALB action has target groups (5): still one target group, every port open to the LB."""
    from tests.provision.test_aws_layout import with_updates

    plan = make_plan("packed", "aws")
    plan = with_updates(plan, "deployment", replicas_per_node=8, gpus_per_node=8,
                        nodes=-(-plan.deployment.replicas // 8))
    plan = with_updates(plan, "engine", visible_devices=[[i] for i in range(8)])
    rec = run_aws(plan)
    assert not rec.errors, rec.errors
    (tg,) = rec.of_type(TG)
    assert int(tg.inputs["port"]) == plan.engine.port
    node_in = {r.inputs["fromPort"] for r in rec.of_type(INGRESS) if "node-sg" in r.inputs["securityGroupId"]}
    assert node_in == set(range(plan.engine.port, plan.engine.port + 8))
    assert [p.name for p in rec.of_type("aws:iam/rolePolicy:RolePolicy") if p.name.endswith("-engine-ports")]


def test_spot_uses_mixed_instances_policy(stack: tuple[Plan, Recording]) -> None:
    plan, rec = stack
    for g in rec.of_type(ASG):
        if plan.deployment.pricing == "spot":
            dist = g.inputs["mixedInstancesPolicy"]["instancesDistribution"]
            assert dist["onDemandPercentageAboveBaseCapacity"] == 0 and dist["onDemandBaseCapacity"] == 0
            assert "launchTemplate" not in g.inputs
        else:
            assert "mixedInstancesPolicy" not in g.inputs and g.inputs["launchTemplate"]["id"]


# -- security invariants -----------------------------------------------------------------------------------
def test_no_public_ingress_except_listeners(stack: tuple[Plan, Recording]) -> None:
    _, rec = stack
    for rule in rec.of_type(INGRESS):
        port_range = (rule.inputs.get("fromPort"), rule.inputs.get("toPort"))
        assert port_range != (22, 22), f"{rule.name} opens SSH"
        if rule.inputs.get("cidrIpv4") == "0.0.0.0/0":
            assert port_range in {(80, 80), (443, 443)}, f"{rule.name} opens {port_range} to the internet"
            assert "lb-sg" in rule.inputs["securityGroupId"], f"{rule.name} is not on the load balancer"
        else:
            assert rule.inputs.get("referencedSecurityGroupId"), f"{rule.name} admits a CIDR"
    for sg in rec.of_type("aws:ec2/securityGroup:SecurityGroup"):
        assert not sg.inputs.get("ingress"), f"{sg.name} has inline ingress"
    node_rules = [r for r in rec.of_type(INGRESS) if "node-sg" in r.inputs["securityGroupId"]]
    assert node_rules and all("lb-sg" in r.inputs["referencedSecurityGroupId"] for r in node_rules)


def test_imdsv2_and_encryption(stack: tuple[Plan, Recording]) -> None:
    _, rec = stack
    for lt in rec.of_type(LT):
        assert lt.inputs["metadataOptions"]["httpTokens"] == "required", lt.name
        for dev in lt.inputs["blockDeviceMappings"]:
            assert dev["ebs"]["encrypted"] == "true", f"{lt.name} {dev['deviceName']} unencrypted"
        assert "keyName" not in lt.inputs, f"{lt.name} installs an SSH key"


def test_nodes_have_no_public_ip(stack: tuple[Plan, Recording]) -> None:
    _, rec = stack
    for lt in rec.of_type(LT):
        primary = lt.inputs["networkInterfaces"][0]
        assert primary["associatePublicIpAddress"] == "false", lt.name
        assert all(n.get("associatePublicIpAddress") in (None, "false") for n in lt.inputs["networkInterfaces"])
    for subnet in rec.of_type("aws:ec2/subnet:Subnet"):
        assert subnet.inputs["mapPublicIpOnLaunch"] is False, subnet.name
    private = {s.name + "-id" for s in rec.of_type("aws:ec2/subnet:Subnet") if "private" in s.name}
    for g in rec.of_type(ASG):
        assert set(g.inputs["vpcZoneIdentifiers"]) <= private, f"{g.name} launches outside private subnets"


def test_no_secret_value_outside_secret_versions(stack: tuple[Plan, Recording]) -> None:
    plan, rec = stack
    versions = {v.inputs["secretString"] for v in rec.of_type(SECRET_VERSION)}
    assert versions == {HF_SENTINEL, API_SENTINEL}
    for where, text in rec.all_inputs_text(exclude_types=(SECRET_VERSION,)).items():
        assert HF_SENTINEL not in text and API_SENTINEL not in text, f"secret value in {where}"
    for lt in rec.of_type(LT):
        text = user_data_of(lt.inputs)
        assert text.startswith("#cloud-config")
        assert HF_SENTINEL not in text and API_SENTINEL not in text, lt.name
    names = {s.inputs["name"] for s in rec.of_type("aws:secretsmanager/secret:Secret")}
    scoped = plan.secrets.for_stack("test")  # the mocks' stack name
    assert names == {scoped.hf_token_name, scoped.api_key_name}
    assert rec.exports["api_key_secret"] == scoped.api_key_name == f"infragen/test/{plan.workload}/api-key"


def test_role_reads_exactly_its_secrets(stack: tuple[Plan, Recording]) -> None:
    _, rec = stack
    policy = json.loads(next(p for p in rec.of_type("aws:iam/rolePolicy:RolePolicy")
                             if p.name.endswith("-read-secrets")).inputs["policy"])
    secret_arns = {f"arn:aws:mock:us-east-1:123456789012:{s.name}"
                   for s in rec.of_type("aws:secretsmanager/secret:Secret")}
    (stmt,) = policy["Statement"]
    assert stmt["Action"] == ["secretsmanager:GetSecretValue"] and set(stmt["Resource"]) == secret_arns
    attached = [a.inputs["policyArn"] for a in rec.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")]
    assert attached == ["arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"]
    trust = json.loads(rec.one("aws:iam/role:Role").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}


def test_every_resource_tagged_with_digest(stack: tuple[Plan, Recording]) -> None:
    plan, rec = stack
    provider = rec.one("pulumi:providers:aws")
    assert provider.inputs["region"] == plan.deployment.region
    assert json.loads(provider.inputs["defaultTags"])["tags"][TAG_DIGEST] == plan.digest
    untagged_types = {"aws:ec2/route:Route", "aws:ec2/routeTableAssociation:RouteTableAssociation",
                      "aws:iam/rolePolicy:RolePolicy", "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
                      SECRET_VERSION, "aws:ec2/subnetCidrReservation:SubnetCidrReservation"}
    for r in rec.custom_resources():
        if r.type in untagged_types:
            continue  # these AWS types take no tags
        if r.type == ASG:
            # A group's tags reach its nodes (and replace a multi-node replica's groups): no plan digest there,
            # or a price refresh would roll every node (tests/provision/test_aws_roll.py).
            tags = {t["key"]: t["value"] for t in r.inputs["tags"]}
            assert TAG_DIGEST not in tags and tags[TAG_WORKLOAD] == plan.workload, r.name
            continue
        assert r.inputs.get("tags", {}).get(TAG_DIGEST) == plan.digest, f"{r.type} {r.name} lacks the digest tag"
    for lt in rec.of_type(LT):
        for spec in lt.inputs["tagSpecifications"]:
            assert TAG_DIGEST not in spec["tags"] and spec["tags"][TAG_WORKLOAD] == plan.workload


def test_components_parent_their_children(stack: tuple[Plan, Recording]) -> None:
    _, rec = stack
    components = {r.type for r in rec.resources if not r.custom}
    assert {"infragen:aws:Network", "infragen:aws:Secrets", "infragen:aws:LoadBalancer",
            "infragen:aws:Compute"} <= components


# -- shapes that need their own settings ---------------------------------------------------------------------
def test_multinode_head_is_a_group_of_one_holding_a_reserved_address() -> None:
    """The head is replaced by its group without `pulumi up`; its node claims the replica's fixed address, which
    the subnet reserves (EC2 never gives it to another node) and which only a head's interface may take."""
    plan = make_plan("multinode", "aws")
    rec = run_aws(plan)
    heads = [lt for lt in rec.of_type(LT) if lt.name.endswith("-head")]
    workers = [lt for lt in rec.of_type(LT) if lt.name.endswith("-worker")]
    assert len(heads) == len(workers) == plan.deployment.replicas
    assert "privateIpAddress" not in heads[0].inputs["networkInterfaces"][0]
    assert all("subnetId" not in n for lt in heads + workers for n in lt.inputs["networkInterfaces"])
    private0 = next(s.name for s in rec.of_type("aws:ec2/subnet:Subnet") if s.name.endswith("private-0")) + "-id"
    groups = {g.name.rsplit("-", 1)[1]: g for g in rec.of_type(ASG)}  # registration order varies
    assert sorted(groups) == ["head", "workers"]
    head_asg, workers_asg = groups["head"], groups["workers"]
    for g in (head_asg, workers_asg):  # one subnet, one cluster placement group, launched together
        assert g.inputs["vpcZoneIdentifiers"] == [private0] and g.inputs["placementGroup"], g.name
        assert not rec.options[(ASG, g.name)].depends_on, g.name
    assert workers_asg.inputs["healthCheckType"] == "EC2"
    assert "role=head head=10.40.0.10" in user_data_of(heads[0].inputs)
    assert "role=worker head=10.40.0.10" in user_data_of(workers[0].inputs)
    assert rec.exports["head_private_ips"] == ["10.40.0.10"]
    reservations = rec.of_type("aws:ec2/subnetCidrReservation:SubnetCidrReservation")
    assert {(r.inputs["cidrBlock"], r.inputs["reservationType"]) for r in reservations} == {
        ("10.40.0.8/29", "explicit"), ("10.40.16.8/29", "explicit")}
    nic_tags = next(t["tags"] for t in heads[0].inputs["tagSpecifications"] if t["resourceType"] == "network-interface")
    assert nic_tags["infragen:role"] == "head"
    lifecycle = json.loads(next(p for p in rec.of_type("aws:iam/rolePolicy:RolePolicy")
                                if p.name.endswith("-node-lifecycle")).inputs["policy"])
    claim = next(s for s in lifecycle["Statement"] if s["Sid"] == "ClaimHeadAddress")
    assert claim["Action"] == ["ec2:AssignPrivateIpAddresses"]
    assert claim["Condition"]["StringEquals"]["aws:ResourceTag/infragen:role"] == "head"
    efa_rules = [r for r in rec.of_type(INGRESS) if "efa-sg" in r.inputs["securityGroupId"]]
    assert len(efa_rules) == 1 and efa_rules[0].inputs["ipProtocol"] == "-1"
    assert efa_rules[0].inputs["referencedSecurityGroupId"] == efa_rules[0].inputs["securityGroupId"]


def test_certificate_adds_https_and_redirects_http() -> None:
    plan = make_plan("single", "aws")
    rec = run_aws(plan, certificate_arn="arn:aws:acm:us-east-1:123456789012:certificate/abc",
                  allowed_cidrs=("203.0.113.0/24",))
    listeners = {int(li.inputs["port"]): li for li in rec.of_type("aws:lb/listener:Listener")}
    assert set(listeners) == {80, 443}
    assert listeners[443].inputs["protocol"] == "HTTPS" and listeners[443].inputs["certificateArn"]
    assert listeners[80].inputs["defaultActions"][0]["type"] == "redirect"
    cidrs = {r.inputs.get("cidrIpv4") for r in rec.of_type(INGRESS)} - {None}
    assert cidrs == {"203.0.113.0/24"}
    assert rec.exports["endpoint"].startswith("https://")


def test_nlb_plan_gets_network_load_balancer() -> None:
    plan = make_plan("tp", "aws")
    plan = plan.model_copy(update={"network": plan.network.model_copy(update={"load_balancer": "nlb"})})
    rec = run_aws(plan)
    lb = rec.one("aws:lb/loadBalancer:LoadBalancer")
    assert lb.inputs["loadBalancerType"] == "network" and "idleTimeout" not in lb.inputs
    (listener,) = rec.of_type("aws:lb/listener:Listener")
    assert listener.inputs["protocol"] == "TCP"
    assert listener.inputs["tcpIdleTimeoutSeconds"] == plan.network.idle_timeout_s
    assert rec.one(TG).inputs["healthCheck"]["path"] == plan.engine.health_path


def test_leaking_renderer_fails_the_update() -> None:
    plan = make_plan("single", "aws")

    plain = "correct-horse-battery-staple"  # not credential-shaped: only the value comparison can catch it
    settings = dataclasses.replace(make_settings(), api_key=pulumi.Output.secret(plain))

    def leaky(role: str, head: str | None) -> str:
        return f"#cloud-config\n# key {plain}\n"

    with pytest.raises(SecretLeakError, match="secret value"):
        run_program(lambda: build_aws(plan, settings, render_user_data=leaky),
                    call_results=AWS_CALLS, computed=AWS_COMPUTED)


def test_credential_shaped_user_data_is_rejected() -> None:
    plan = make_plan("single", "aws")

    def leaky(role: str, head: str | None) -> str:
        return f"#cloud-config\n# token {HF_SENTINEL}\n"

    with pytest.raises(SecretLeakError, match="credential"):
        run_program(lambda: build_aws(plan, make_settings(), render_user_data=leaky),
                    call_results=AWS_CALLS, computed=AWS_COMPUTED)


def test_build_stack_dispatches_and_adds_plan_exports() -> None:
    plan = make_plan("cpu", "aws")
    from infragen.provision.aws import build_aws as real_build

    def program() -> dict[str, Any]:
        import infragen.provision.aws as aws_pkg

        original = aws_pkg.build_aws
        aws_pkg.build_aws = lambda p, s: real_build(p, s, render_user_data=fake_renderer(p))  # type: ignore
        try:
            return build_stack(plan, make_settings())
        finally:
            aws_pkg.build_aws = original

    rec = run_program(program, call_results=AWS_CALLS, computed=AWS_COMPUTED)
    assert rec.exports["plan_digest"] == plan.digest
    assert rec.exports["instance_type"] == "c7i.4xlarge" and rec.exports["replicas"] == 2
    assert rec.exports["monthly_cost_usd"] == round(plan.cost.usd_per_month, 2)
    assert rec.exports["endpoint"].startswith("http://") and rec.exports["endpoint"].endswith(".elb.mock")


def test_plan_region_wins_over_stack_region() -> None:
    plan = make_plan("cpu", "aws")
    rec = run_program(lambda: build_aws(plan, make_settings(), render_user_data=fake_renderer(plan)),
                      call_results=AWS_CALLS, computed=AWS_COMPUTED, config={"aws:region": "eu-west-1"})
    assert rec.one("pulumi:providers:aws").inputs["region"] == "us-east-1"
    custom = list(rec.custom_resources())
    assert custom and all(r.type.startswith("aws:") for r in custom)


def test_preview_runs_every_shape() -> None:
    for kind in KINDS:
        plan = make_plan(kind, "aws", spot=kind == "multinode")
        rec = run_program(lambda plan=plan: build_aws(plan, make_settings(), render_user_data=fake_renderer(plan)),
                          call_results=AWS_CALLS, computed=AWS_COMPUTED, preview=True)
        assert not rec.errors and rec.of_type(LT), kind


def test_importing_provision_loads_no_cloud_sdk() -> None:
    import subprocess
    import sys

    code = ("import sys, infragen.provision, infragen.provision.common\n"
            "print(','.join(m for m in ('pulumi_aws', 'pulumi_alicloud') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("kind", KINDS)
def test_real_renderer_user_data_fits_and_names_the_head(kind: str) -> None:
    pytest.importorskip("infragen.render")
    plan = make_plan(kind, "aws")
    rec = run_program(lambda: build_aws(plan, make_settings()), call_results=AWS_CALLS, computed=AWS_COMPUTED)
    assert not rec.errors, rec.errors
    for lt in rec.of_type(LT):
        assert len(base64.b64decode(lt.inputs["userData"])) <= 16 * 1024, lt.name
        text = user_data_of(lt.inputs)
        assert text.startswith("#cloud-config") and plan.digest not in text, lt.name
        assert " node " in text.splitlines()[1], lt.name  # its node digest (tests/render/test_node_digest.py)
        assert HF_SENTINEL not in text and API_SENTINEL not in text
        if plan.deployment.nodes_per_replica > 1:
            assert "10.40.0.10" in text, f"{lt.name} does not know the head address"


def test_nlb_tls_listener_sets_no_idle_timeout() -> None:
    plan = make_plan("tp", "aws")
    plan = plan.model_copy(update={"network": plan.network.model_copy(update={"load_balancer": "nlb"})})
    rec = run_aws(plan, certificate_arn="arn:aws:acm:us-east-1:123456789012:certificate/abc")
    (listener,) = rec.of_type("aws:lb/listener:Listener")
    assert listener.inputs["protocol"] == "TLS" and "tcpIdleTimeoutSeconds" not in listener.inputs


def test_two_stacks_of_one_workload_share_no_secret_and_no_permission() -> None:
    """Secret names carry the stack, the nodes read exactly those (real renderer), and a node's lifecycle and
    address permissions are conditioned on its own stack's tag."""
    plan = make_plan("multinode", "aws")
    runs = {stack: run_program(lambda: build_aws(plan, make_settings()), call_results=AWS_CALLS,
                               computed=AWS_COMPUTED, stack=stack) for stack in ("prod", "staging")}
    names = {stack: sorted(s.inputs["name"] for s in rec.of_type("aws:secretsmanager/secret:Secret"))
             for stack, rec in runs.items()}
    assert names["prod"] == [f"infragen/prod/{plan.workload}/api-key", f"infragen/prod/{plan.workload}/hf-token"]
    assert not set(names["prod"]) & set(names["staging"])
    for stack, rec in runs.items():
        for lt in rec.of_type(LT):
            text = user_data_of(lt.inputs)
            assert f"infragen/{stack}/{plan.workload}/api-key" in text, lt.name
            assert f"'{plan.secrets.api_key_name}'" not in text and f" {plan.secrets.api_key_name} " not in text
        lifecycle = json.loads(next(p for p in rec.of_type("aws:iam/rolePolicy:RolePolicy")
                                    if p.name.endswith("-node-lifecycle")).inputs["policy"])
        for statement in lifecycle["Statement"]:
            if "Condition" in statement:
                assert statement["Condition"]["StringEquals"]["aws:ResourceTag/infragen:stack"] == stack
        vpc = rec.one("aws:ec2/vpc:Vpc")
        assert vpc.inputs["tags"]["infragen:stack"] == stack
