"""`infragen preflight` on AWS against moto (in-process `mock_aws`: STS, EC2 offerings/instances/images,
Secrets Manager, ACM, SSM). Where moto does not implement a call, a botocore Stubber answers with a response in
the API reference's shape (not recorded from a live account): Service Quotas for EC2 codes (moto serves only
`vpc`), SSM's public DLAMI parameter (moto refuses `/aws/` names), DescribeCapacityReservations (not
implemented), an empty spot price history (moto always has one) and STS errors. Spot price history itself is
moto's (DescribeSpotPriceHistory, with moto's placeholder prices).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from infragen.cli import main
from infragen.plan import Plan
from infragen.preflight import Check, PreflightTarget, render_checks, run_preflight
from tests.plan_factory import make_plan

REGION = "us-east-1"
SECRETS = {"infragen:hfToken": {"secure": "v1:abc"}, "infragen:apiKey": {"secure": "v1:def"}}
QUIET = {"infragen:allowedCidrs": ["203.0.113.0/24"]}


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield


class Mixed:
    """A moto client with some operations answered by a stubbed client instead."""

    def __init__(self, real: Any, stubbed: Any, operations: set[str]) -> None:
        self._real, self._stubbed, self._ops = real, stubbed, operations

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stubbed if name in self._ops else self._real, name)


def quota_stub(value: float, code: str = "L-DB2E81BA") -> Any:
    sq = boto3.client("service-quotas", region_name=REGION)
    stub = Stubber(sq)
    stub.add_response("get_service_quota", {"Quota": {
        "ServiceCode": "ec2", "QuotaCode": code, "QuotaName": "Running On-Demand G and VT instances",
        "Value": value, "Unit": "None", "Adjustable": True, "GlobalQuota": False}},
        {"ServiceCode": "ec2", "QuotaCode": code})
    stub.activate()
    return sq


def clients(*, quota: float = 96.0, code: str = "L-DB2E81BA", ssm_value: str | None = None,
            capacity: dict[str, Any] | None = None, region: str = REGION) -> Any:
    real: dict[str, Any] = {}
    stubs: dict[str, Any] = {"service-quotas": quota_stub(quota, code)}
    if ssm_value is not None:
        ssm = boto3.client("ssm", region_name=region)
        stub = Stubber(ssm)
        stub.add_response("get_parameter", {"Parameter": {"Name": "p", "Type": "String", "Value": ssm_value}})
        stub.activate()
        stubs["ssm"] = ssm
    if capacity is not None:
        ec2 = boto3.client("ec2", region_name=region)
        stub = Stubber(ec2)
        stub.add_response("describe_capacity_reservations", {"CapacityReservations": [capacity]})
        stub.activate()
        stubs["ec2-cr"] = ec2

    def factory(service: str) -> Any:
        if service == "ec2" and "ec2-cr" in stubs:
            return Mixed(real.setdefault("ec2", boto3.client("ec2", region_name=region)), stubs["ec2-cr"],
                         {"describe_capacity_reservations"})
        if service in stubs:
            return stubs[service]
        return real.setdefault(service, boto3.client(service, region_name=region))

    return factory


def x86_image() -> str:
    images = boto3.client("ec2", region_name=REGION).describe_images(Owners=["amazon"])["Images"]
    return next(i["ImageId"] for i in images if i["Architecture"] == "x86_64")


def target(plan: Plan | None = None, **config: Any) -> PreflightTarget:
    cfg = {**SECRETS, **QUIET, "infragen:imageId": x86_image()}
    cfg.update({f"infragen:{k}": v for k, v in config.items()})
    cfg = {k: v for k, v in cfg.items() if v is not None}
    return PreflightTarget(plan=plan or make_plan("tp"), source="aws-test", stack="aws-test", config=cfg)


def by_name(checks: list[Check]) -> dict[str, list[Check]]:
    out: dict[str, list[Check]] = {}
    for c in checks:
        out.setdefault(c.name, []).append(c)
    return out


def in_region(plan: Plan, region: str) -> Plan:
    return plan.model_copy(update={"deployment": plan.deployment.model_copy(update={"region": region})})


# --- the checks --------------------------------------------------------------------------------------------------


def test_a_ready_account_passes_every_check() -> None:
    checks = run_preflight(target(), clients=clients())
    assert {c.status for c in checks} == {"ok"}, render_checks(target(), checks)
    names = [c.name for c in checks]
    assert names[0] == "credentials" and {"zones", "vcpu-quota", "image", "secrets", "certificate"} <= set(names)
    zones = by_name(checks)["zones"][0].detail
    assert "use1-az1" in zones and "use1-az3" not in zones  # moto's offerings for g6e.12xlarge


def test_quota_counts_what_already_runs_and_says_what_to_request() -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    ec2.run_instances(ImageId=x86_image(), InstanceType="g6e.xlarge", MinCount=2, MaxCount=2)  # 2 x 4 vCPUs
    ec2.run_instances(ImageId=x86_image(), InstanceType="c7i.large", MinCount=1, MaxCount=1)  # other class
    checks = by_name(run_preflight(target(), clients=clients(quota=50)))["vcpu-quota"]
    assert checks[0].status == "fail"
    assert "8 in use + 48 needed" in checks[0].detail and "L-DB2E81BA" in checks[0].detail
    assert checks[0].fix == ("aws service-quotas request-service-quota-increase --region us-east-1 "
                             "--service-code ec2 --quota-code L-DB2E81BA --desired-value 56")
    assert by_name(run_preflight(target(), clients=clients(quota=56)))["vcpu-quota"][0].status == "ok"


def test_spot_plans_check_the_spot_quota() -> None:
    plan = make_plan("tp", spot=True)
    check = by_name(run_preflight(target(plan), clients=clients(code="L-3819A6DF")))["vcpu-quota"][0]
    assert check.status == "ok" and "L-3819A6DF" in check.detail


def test_zones_fail_where_no_zone_offers_the_type_and_warn_on_one() -> None:
    none = in_region(make_plan("tp"), "sa-east-1")  # moto: no sa-east-1 zone offers g6e.12xlarge
    check = by_name(run_preflight(target(none, imageId=None), clients=clients(region="sa-east-1")))["zones"][0]
    assert check.status == "fail" and "no availability zone of sa-east-1 offers g6e.12xlarge" in check.detail
    one = in_region(make_plan("multinode"), "sa-east-1")  # p5.48xlarge: sae1-az3 only
    check = by_name(run_preflight(target(one, imageId=None),
                                  clients=clients(code="L-417A185B", region="sa-east-1")))["zones"][0]
    assert check.status == "warn" and "sae1-az3" in check.detail


def test_image_unpinned_resolves_and_asks_to_pin() -> None:
    ami = x86_image()
    check = by_name(run_preflight(target(imageId=None), clients=clients(ssm_value=ami)))["image"][0]
    assert check.status == "warn" and ami in check.detail
    assert check.fix == f"pulumi config set --stack aws-test infragen:imageId {ami}"


def test_image_parameter_missing_or_wrong_image_fails() -> None:
    # moto has no public DLAMI parameter: the real ParameterNotFound path.
    check = by_name(run_preflight(target(imageId=None), clients=clients()))["image"][0]
    assert check.status == "fail" and "does not resolve" in check.detail
    check = by_name(run_preflight(target(imageId="ami-00000000"), clients=clients()))["image"][0]
    assert check.status == "fail" and "not visible" in check.detail


def test_secret_names_taken_by_someone_else_or_being_deleted_fail() -> None:
    plan = make_plan("tp")
    names = plan.secrets.for_stack("aws-test")  # the stack's own names, as the AWS program creates them
    sm = boto3.client("secretsmanager", region_name=REGION)
    sm.create_secret(Name=names.hf_token_name, SecretString="x")
    sm.create_secret(Name=names.api_key_name, SecretString="y")
    sm.delete_secret(SecretId=names.api_key_name, RecoveryWindowInDays=7)
    checks = by_name(run_preflight(target(plan), clients=clients()))["secrets"]
    assert [c.status for c in checks] == ["fail", "fail"]
    assert "not created by infragen" in checks[0].detail and "scheduled for deletion" in checks[1].detail
    assert names.hf_token_name in checks[0].detail


def test_secrets_are_checked_under_the_stack_names() -> None:
    """Another stack of the same workload owns its own names: no collision; the plan's stack-free names are
    not what a stack creates. A secret tagged for another stack under this stack's name is a collision."""
    plan = make_plan("tp")
    sm = boto3.client("secretsmanager", region_name=REGION)
    for name in (plan.secrets.hf_token_name, plan.secrets.api_key_name,
                 plan.secrets.for_stack("other").api_key_name):
        sm.create_secret(Name=name, SecretString="x", Tags=[{"Key": "infragen:workload", "Value": plan.workload}])
    checks = by_name(run_preflight(target(plan), clients=clients()))["secrets"]
    assert [c.status for c in checks] == ["ok", "ok"] and all("free" in c.detail for c in checks)
    taken = plan.secrets.for_stack("aws-test").api_key_name
    sm.create_secret(Name=taken, SecretString="x", Tags=[{"Key": "infragen:stack", "Value": "other"}])
    checks = by_name(run_preflight(target(plan), clients=clients()))["secrets"]
    assert [c.status for c in checks] == ["ok", "fail"] and "belongs to stack other" in checks[1].detail


def test_secret_config_must_be_set_as_secrets() -> None:
    checks = by_name(run_preflight(target(apiKey="plain-text"), clients=clients()))["secrets"]
    assert checks[0].status == "fail" and "infragen:apiKey" in checks[0].detail
    assert "--secret infragen:apiKey" in (checks[0].fix or "")


def test_certificate_must_be_issued_in_the_region_and_open_http_warns() -> None:
    arn = boto3.client("acm", region_name=REGION).request_certificate(DomainName="llm.example.com")["CertificateArn"]
    check = by_name(run_preflight(target(certificateArn=arn), clients=clients()))["certificate"][0]
    assert check.status == "fail" and "not ISSUED" in check.detail
    other = arn.replace(REGION, "eu-west-1")
    check = by_name(run_preflight(target(certificateArn=other), clients=clients()))["certificate"][0]
    assert check.status == "fail" and "eu-west-1" in check.detail
    check = by_name(run_preflight(target(allowedCidrs=None), clients=clients()))["certificate"][0]
    assert check.status == "warn" and "clear text" in check.detail


def test_capacity_reservation_must_match_the_plan() -> None:
    cr = {"CapacityReservationId": "cr-0123456789abcdef0", "InstanceType": "g6e.12xlarge",
          "AvailabilityZone": "us-east-1a", "State": "active", "AvailableInstanceCount": 1, "TotalInstanceCount": 1}
    ok = by_name(run_preflight(target(capacityReservationId=cr["CapacityReservationId"]),
                               clients=clients(capacity=cr)))["capacity"][0]
    assert ok.status == "ok"
    bad = {**cr, "InstanceType": "p5.48xlarge", "AvailableInstanceCount": 0}
    check = by_name(run_preflight(target(capacityReservationId=cr["CapacityReservationId"]),
                                  clients=clients(capacity=bad)))["capacity"][0]
    assert check.status == "fail" and "is for p5.48xlarge" in check.detail and "0 instance(s) free" in check.detail


def test_capacity_reservation_zone_must_be_configured_and_match() -> None:
    cr = {"CapacityReservationId": "cr-0123456789abcdef0", "InstanceType": "g6e.12xlarge",
          "AvailabilityZone": "us-east-1c", "AvailabilityZoneId": "use1-az2", "State": "active",
          "AvailableInstanceCount": 1, "TotalInstanceCount": 1}
    rid = cr["CapacityReservationId"]
    unset = by_name(run_preflight(target(capacityReservationId=rid), clients=clients(capacity=cr)))["capacity"][0]
    assert unset.status == "fail" and "capacityReservationZone is not set" in unset.detail
    assert unset.fix == "pulumi config set --stack aws-test infragen:capacityReservationZone use1-az2"
    wrong = by_name(run_preflight(target(capacityReservationId=rid, capacityReservationZone="use1-az1"),
                                  clients=clients(capacity=cr)))["capacity"][0]
    assert wrong.status == "fail" and "is use1-az1" in wrong.detail
    ok = by_name(run_preflight(target(capacityReservationId=rid, capacityReservationZone="use1-az2"),
                               clients=clients(capacity=cr)))["capacity"][0]
    assert ok.status == "ok" and "use1-az2" in ok.detail
    block = {**cr, "State": "scheduled", "ReservationType": "capacity-block", "StartDate": "2026-12-24T11:30:00Z"}
    later = by_name(run_preflight(target(capacityReservationId=rid, capacityReservationZone="use1-az2"),
                                  clients=clients(capacity=block)))["capacity"][0]
    assert later.status == "warn" and "starts 2026-12-24" in later.detail


def spot_plan(itype: str, *, base: int, alternatives: list[str] | None = None) -> Plan:
    from infragen.plan import SpotPlan

    plan = make_plan("single", "aws", spot=True)
    d = plan.deployment.model_copy(update={"instance_type": itype, "replicas": 3, "nodes": 3})
    hardware = plan.hardware.model_copy(update={"vcpus": 8})
    return plan.model_copy(update={"deployment": d, "hardware": hardware, "spot": SpotPlan(
        on_demand_base_replicas=base, on_demand_base_nodes=base, spot_nodes=3 - base, base_basis="test",
        alternative_instance_types=alternatives or [], usd_per_month_expected=None, interruption_note="none",
        risk="test")})


def test_spot_plans_need_a_spot_market_in_the_offering_zones() -> None:
    """moto serves spot price history (with its own placeholder prices) for real instance types only."""
    checks = by_name(run_preflight(target(spot_plan("g6e.2xlarge", base=1, alternatives=["g6e.4xlarge"])),
                                   clients=clients(code="L-3819A6DF")))
    main, alternative = checks["spot"]
    assert main.status == "ok" and "g6e.2xlarge spot prices: use1-az" in main.detail
    assert alternative.status == "ok" and alternative.detail.startswith("alternative g6e.4xlarge: spot prices in")
    missing = by_name(run_preflight(target(spot_plan("g6e.2xlarge", base=1, alternatives=["zz9.bogus"])),
                                    clients=clients(code="L-3819A6DF")))["spot"][1]
    assert missing.status == "warn" and "alternative zz9.bogus: no spot price" in missing.detail
    assert "spot" not in by_name(run_preflight(target(), clients=clients()))


def test_a_spot_type_without_a_spot_market_fails() -> None:
    from infragen.preflight.aws import _spot

    ec2 = boto3.client("ec2", region_name=REGION)
    plan = spot_plan("g6e.2xlarge", base=1)
    # No spot price history anywhere (a type without a spot market): answered by a stub, moto always has one.
    stubbed = boto3.client("ec2", region_name=REGION)
    stub = Stubber(stubbed)
    stub.add_response("describe_spot_price_history", {"SpotPriceHistory": []})
    stub.activate()

    class NoSpotMarket(Mixed):
        def get_paginator(self, name: str) -> Any:
            return (stubbed if name == "describe_spot_price_history" else ec2).get_paginator(name)

    checks = _spot(target(plan), lambda service: NoSpotMarket(ec2, stubbed, set()))
    assert [c.status for c in checks] == ["fail"] and "no spot price for g6e.2xlarge" in checks[0].detail


def test_a_spot_plans_base_counts_against_the_on_demand_quota() -> None:
    plan = spot_plan("g6e.2xlarge", base=1)
    sq = boto3.client("service-quotas", region_name=REGION)
    stub = Stubber(sq)
    for code, value in (("L-DB2E81BA", 8.0), ("L-3819A6DF", 8.0)):
        stub.add_response("get_service_quota", {"Quota": {
            "ServiceCode": "ec2", "QuotaCode": code, "QuotaName": "q", "Value": value, "Unit": "None",
            "Adjustable": True, "GlobalQuota": False}}, {"ServiceCode": "ec2", "QuotaCode": code})
    stub.activate()
    factory = clients()
    checks = by_name(run_preflight(target(plan), clients=lambda s: sq if s == "service-quotas" else factory(s)))
    on_demand, spot = checks["vcpu-quota"]
    assert on_demand.status == "ok" and "(L-DB2E81BA)" in on_demand.detail and "8 needed (1 x" in on_demand.detail
    assert spot.status == "fail" and "(L-3819A6DF)" in spot.detail and "16 needed (2 x" in spot.detail


def test_bad_credentials_stop_at_the_first_check() -> None:
    sts = boto3.client("sts", region_name=REGION)
    stub = Stubber(sts)
    stub.add_client_error("get_caller_identity", "ExpiredToken", "The security token included in the request "
                          "is expired")
    stub.activate()
    checks = run_preflight(target(), clients=lambda service: sts)
    assert len(checks) == 1 and checks[0].status == "fail" and "ExpiredToken" in checks[0].detail


# --- the command -------------------------------------------------------------------------------------------------


def test_cli_runs_a_stack_and_exits_3_on_failure(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # The real boto3 clients under moto; moto's Service Quotas serves only `vpc`, so its backend is taught one
    # EC2 quota (the fake is patched, not infragen). The repository's stack file holds no secrets -> a failure.
    from moto.servicequotas.models import ServiceQuotasBackend

    quota = {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA", "QuotaName": "Running On-Demand G and VT instances",
             "Value": 64.0, "Unit": "None", "Adjustable": True, "GlobalQuota": False}
    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", lambda self, service_code, quota_code: quota)
    with pytest.raises(SystemExit) as exit_info:
        main(["preflight", "aws-chat-7b"])
    out = capsys.readouterr()
    assert exit_info.value.code == 3
    assert "infragen preflight aws-chat-7b" in out.out and "FAIL  secrets" in out.out
    assert "OK    vcpu-quota" in out.out and "64 vCPUs" in out.out
    assert "Error: aws-chat-7b:" in out.err and "preflight check(s) failed" in out.err


def test_cli_unknown_stack_is_an_input_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["preflight", "aws-chat-7"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "no stack file" in err and "did you mean 'aws-chat-7b'" in err
