"""Where and on what the AWS nodes launch: zones chosen by instance-type offering (by zone id), a pinned image,
an On-Demand Capacity Reservation or Capacity Block, and the preview warnings about unpinned images and keys
sent in clear text. Pulumi mocks; the pure zone choice is tested on its own."""

from __future__ import annotations

from typing import Any

import pytest

from infragen.errors import InputError
from infragen.plan import Plan
from infragen.provision.aws import build_aws
from infragen.provision.aws.layout import choose_zones
from infragen.provision.aws.options import AwsOptions, load_aws_options
from tests.plan_factory import make_plan
from tests.provision.conftest import AWS_CALLS, AWS_COMPUTED, MOCK_AMI, fake_renderer, make_settings
from tests.provision.mocks import Recording, run_program

OFFERINGS = "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"


def run(plan: Plan, *, offered: list[str] | None = None, options: AwsOptions | None = None,
        **settings: Any) -> Recording:
    calls = dict(AWS_CALLS)
    if offered is not None:
        calls[OFFERINGS] = {**AWS_CALLS[OFFERINGS], "locations": offered}
    return run_program(lambda: build_aws(plan, make_settings(**settings), render_user_data=fake_renderer(plan),
                                         options=options or AwsOptions(image_id=MOCK_AMI)),
                       call_results=calls, computed=AWS_COMPUTED)


def zones_of(rec: Recording, tier: str) -> list[str]:
    return [s.inputs["availabilityZoneId"] for s in rec.of_type(SUBNET) if f"-{tier}-" in s.name]


# --- zones by offering ----------------------------------------------------------------------------------------


def test_choose_zones_keeps_nodes_in_offering_zones() -> None:
    available = ["use1-az1", "use1-az2", "use1-az4"]
    assert choose_zones(["use1-az4", "use1-az2"], available, "p5.48xlarge", "us-east-1") == (
        ["use1-az2", "use1-az4"], ["use1-az2", "use1-az4"])
    # One zone offers it: both node subnets there, the load balancer still spans two zones (ALB needs two).
    assert choose_zones(["use1-az4"], available, "p5.48xlarge", "us-east-1") == (
        ["use1-az4", "use1-az4"], ["use1-az4", "use1-az1"])
    with pytest.raises(InputError, match=r"no availability zone of us-east-1 offers p5\.48xlarge"):
        choose_zones(["usw2-az1"], available, "p5.48xlarge", "us-east-1")
    with pytest.raises(InputError, match=r"the load balancer needs 2$"):
        choose_zones(["use1-az1"], ["use1-az1"], "p5.48xlarge", "us-east-1")


def test_node_subnets_avoid_zones_without_the_instance_type() -> None:
    plan = make_plan("single", "aws")
    rec = run(plan)  # the mock offers the type in use1-az1 and use1-az2, not in use1-az4
    assert not rec.errors, rec.errors
    assert zones_of(rec, "private") == ["use1-az1", "use1-az2"]
    assert zones_of(rec, "public") == ["use1-az1", "use1-az2"]
    asked = [args for token, args in rec.calls if token == OFFERINGS]
    assert asked and asked[0]["locationType"] == "availability-zone-id"
    assert asked[0]["filters"] == [{"name": "instance-type", "values": [plan.deployment.instance_type]}]
    assert rec.exports["node_zone_ids"] == ["use1-az1", "use1-az2"]


def test_a_single_offering_zone_takes_every_node() -> None:
    rec = run(make_plan("multinode", "aws"), offered=["use1-az4"])
    assert not rec.errors, rec.errors
    assert zones_of(rec, "private") == ["use1-az4", "use1-az4"]
    assert zones_of(rec, "public") == ["use1-az4", "use1-az1"]


def test_no_offering_zone_fails_the_preview_with_the_reason() -> None:
    plan = make_plan("single", "aws")
    with pytest.raises(InputError, match=f"no availability zone of us-east-1 offers {plan.deployment.instance_type} "
                                         r"\(zones: use1-az1, use1-az2, use1-az4\)"):
        run(plan, offered=[])


def test_replicas_spread_over_two_offering_zones_unless_one_offers_the_type() -> None:
    """Single-node replicas: one group over both node subnets (two zones); multi-node replicas alternate zones,
    each whole in one (its cluster placement group is one zone)."""
    single = run(make_plan("single", "aws"))
    [group] = single.of_type("aws:autoscaling/group:Group")
    assert len(group.inputs["vpcZoneIdentifiers"]) == 2 and len(set(zones_of(single, "private"))) == 2
    plan = make_plan("multinode", "aws")
    plan = plan.model_copy(update={"deployment": plan.deployment.model_copy(update={"replicas": 2, "nodes": 4})})
    rec = run(plan)
    subnet_zone = {f"{s.name}-id": s.inputs["availabilityZoneId"] for s in rec.of_type(SUBNET)}
    zone_of = {g.name: {subnet_zone[x] for x in g.inputs["vpcZoneIdentifiers"]}
               for g in rec.of_type("aws:autoscaling/group:Group")}
    assert all(len(z) == 1 for z in zone_of.values())  # a replica stays in one zone
    r0 = {z for n, zs in zone_of.items() if "-r0-" in n for z in zs}
    r1 = {z for n, zs in zone_of.items() if "-r1-" in n for z in zs}
    assert r0 == {"use1-az1"} and r1 == {"use1-az2"}
    assert not [w for w in rec.warnings if "one zone" in w]
    lonely = run(plan, offered=["use1-az4"])
    assert any("all 2 replicas run in one zone (only use1-az4 offers" in w for w in lonely.warnings), lonely.warnings


def test_a_capacity_reservation_keeps_every_node_in_its_zone() -> None:
    plan = make_plan("single", "aws")
    options = AwsOptions(image_id=MOCK_AMI, capacity_reservation_id="cr-0123456789abcdef0",
                         capacity_reservation_zone="use1-az2")
    rec = run(plan, options=options)
    assert not rec.errors, rec.errors
    assert zones_of(rec, "private") == ["use1-az2", "use1-az2"]
    assert zones_of(rec, "public") == ["use1-az2", "use1-az1"]  # the load balancer still spans two zones
    assert rec.exports["node_zone_ids"] == ["use1-az2", "use1-az2"]
    assert any("the capacity reservation holds them in use1-az2" in w for w in rec.warnings), rec.warnings
    elsewhere = AwsOptions(image_id=MOCK_AMI, capacity_reservation_id="cr-0123456789abcdef0",
                           capacity_reservation_zone="use1-az4")  # the mocked region does not offer the type there
    with pytest.raises(InputError, match="capacityReservationZone use1-az4 is not a zone of us-east-1 that offers"):
        run(plan, options=elsewhere)


def test_no_offering_zone_ends_the_program_with_one_message() -> None:
    """The zones are chosen before any resource (a synchronous invoke), so the composition root's error boundary
    turns the InputError into one RunError line, never a traceback from inside an apply."""
    import pulumi

    from tests.provision.test_aws_program import load_program

    program = load_program()
    plan = make_plan("single", "aws")
    calls = {**AWS_CALLS, OFFERINGS: {**AWS_CALLS[OFFERINGS], "locations": [], "instanceTypes": []}}
    program.resolve_plan = lambda settings: plan  # the plan under test instead of the stack's workload
    config = {"infragen:workload": "examples/team-chatbot.yaml", "infragen:hfToken": "hf_x" * 10,
              "infragen:apiKey": "k" * 32, "infragen:imageId": MOCK_AMI}
    with pytest.raises(pulumi.RunError) as err:
        run_program(lambda: program.main(), call_results=calls, computed=AWS_COMPUTED, config=config,
                    secret_keys=("infragen:hfToken", "infragen:apiKey"))
    message = str(err.value)
    assert message.startswith("Error: no availability zone of us-east-1 offers") and "Traceback" not in message
    assert "infragen preflight" in message


# --- image pin and capacity ------------------------------------------------------------------------------------


def test_a_pinned_image_is_used_as_is_without_asking_ssm() -> None:
    rec = run(make_plan("single", "aws"), options=AwsOptions(image_id="ami-0fedcba9876543210"))
    assert {lt.inputs["imageId"] for lt in rec.of_type(LT)} == {"ami-0fedcba9876543210"}
    assert not [t for t, _ in rec.calls if t == "aws:ssm/getParameter:getParameter"]
    assert rec.exports["image_pinned"] is True


def test_capacity_reservation_and_capacity_block_reach_every_launch_template() -> None:
    plan = make_plan("multinode", "aws")
    rec = run(plan, options=AwsOptions(image_id=MOCK_AMI, capacity_reservation_id="cr-0123456789abcdef0"))
    for lt in rec.of_type(LT):
        target = lt.inputs["capacityReservationSpecification"]["capacityReservationTarget"]
        assert target == {"capacityReservationId": "cr-0123456789abcdef0"}, lt.name
        assert "instanceMarketOptions" not in lt.inputs, lt.name
    block = run(plan, options=AwsOptions(image_id=MOCK_AMI, capacity_reservation_id="cr-0123456789abcdef0",
                                         capacity_block=True))
    assert {lt.inputs["instanceMarketOptions"]["marketType"] for lt in block.of_type(LT)} == {"capacity-block"}


def test_options_are_read_and_checked() -> None:
    class Config:
        def __init__(self, values: dict[str, str]) -> None:
            self.values = values

        def get(self, key: str) -> str | None:
            return self.values.get(key)

        def get_bool(self, key: str) -> bool | None:
            return None if key not in self.values else self.values[key] == "true"

    assert load_aws_options(Config({})) == AwsOptions()  # type: ignore[arg-type]
    assert load_aws_options(Config({"imageId": "ami-0123456789abcdef0", "capacityReservationId": "cr-0abc1234",
                                    "capacityBlock": "true", "capacityReservationZone": "use1-az2"})) == AwsOptions(
        image_id="ami-0123456789abcdef0", capacity_reservation_id="cr-0abc1234", capacity_block=True,
        capacity_reservation_zone="use1-az2")
    for values, message in (({"imageId": "ubuntu"}, "infragen:imageId"),
                            ({"capacityReservationId": "cr-x; rm"}, "infragen:capacityReservationId"),
                            ({"capacityBlock": "true"}, "capacityReservationId is not set"),
                            ({"capacityReservationId": "cr-0abc1234"}, "capacityReservationZone is not"),
                            ({"capacityReservationId": "cr-0abc1234", "capacityReservationZone": "us-east-1a;x"},
                             "not an availability zone id"),
                            ({"capacityReservationZone": "use1-az2"}, "capacityReservationId is not")):
        with pytest.raises(InputError, match=message):
            load_aws_options(Config(values))  # type: ignore[arg-type]


def test_spot_plans_refuse_a_capacity_reservation() -> None:
    with pytest.raises(InputError, match="spot"):
        run(make_plan("single", "aws", spot=True),
            options=AwsOptions(image_id=MOCK_AMI, capacity_reservation_id="cr-0123456789abcdef0"))


# --- preview warnings ----------------------------------------------------------------------------------------------


def test_preview_warns_about_an_unpinned_image_and_a_key_in_clear_text() -> None:
    plan = make_plan("single", "aws")
    rec = run_program(lambda: build_aws(plan, make_settings(), render_user_data=fake_renderer(plan),
                                        options=AwsOptions()), call_results=AWS_CALLS, computed=AWS_COMPUTED)
    assert any("infragen:imageId is not set" in w for w in rec.warnings), rec.warnings
    assert any("API key in clear text" in w for w in rec.warnings), rec.warnings
    quiet = run(plan, certificate_arn="arn:aws:acm:us-east-1:123456789012:certificate/abc")
    assert quiet.warnings == []
    assert run(plan, allowed_cidrs=("203.0.113.0/24",)).warnings == []


def test_preview_warns_that_an_nlb_forwards_every_path() -> None:
    plan = make_plan("tp", "aws")
    plan = plan.model_copy(update={"network": plan.network.model_copy(update={"load_balancer": "nlb"})})
    rec = run(plan, certificate_arn="arn:aws:acm:us-east-1:123456789012:certificate/abc")
    assert any("forwards every path" in w for w in rec.warnings), rec.warnings


def test_s3_goes_through_a_free_gateway_endpoint_not_the_nat() -> None:
    """Weights from S3 would otherwise cross the NAT gateway, which bills every GB it processes."""
    rec = run(make_plan("single", "aws"))
    (endpoint,) = rec.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    assert endpoint.inputs["vpcEndpointType"] == "Gateway"
    assert endpoint.inputs["serviceName"] == "com.amazonaws.us-east-1.s3"
    private_rt = next(r.name for r in rec.of_type("aws:ec2/routeTable:RouteTable") if r.name.endswith("private-rt"))
    assert endpoint.inputs["routeTableIds"] == [f"{private_rt}-id"]
    asked = [args for token, args in rec.calls if token == "aws:ec2/getVpcEndpointService:getVpcEndpointService"]
    assert asked == [{"service": "s3", "serviceType": "Gateway"}]
