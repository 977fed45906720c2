"""`infragen preflight` on Alibaba Cloud. No emulator exists for ECS or KMS and no account was used: every response
below is written in the API reference's shape (field names as alibabacloud_ecs20140526 7.11.8 and
alibabacloud_kms20160120 3.3.1 name them), NOT recorded from a live account. Each request and response passes
through the SDK's own models (`<Action>Request` / `<Action>ResponseBody`, from_map then to_map), so a misspelt
field name is dropped by the SDK and the check then fails the test.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from alibabacloud_ecs20140526 import models as ecs_models
from alibabacloud_kms20160120 import models as kms_models
from Tea.exceptions import TeaException

from infragen.cli import main
from infragen.plan import Plan
from infragen.preflight import Check, PreflightTarget, render_checks, run_preflight
from tests.plan_factory import make_plan

MODELS = {"ecs": ecs_models, "kms": kms_models}
SECRETS = {"infragen:hfToken": {"secure": "v1:abc"}, "infragen:apiKey": {"secure": "v1:def"}}
KMS = {"infragen:kmsInstanceId": "kst-bjj62f5ba0ca8tv", "infragen:kmsKeyId": "key-bjj62f5ba0cadsy",
       "infragen:imageId": "m-2ze0mn8g3x8qcefm1p9d"}
Handler = Callable[[dict[str, Any]], dict[str, Any]]


def attributes(*, verified: str = "yes", max_vcpus: int = 1000, used: int = 0, spot_max: int = 800) -> dict[str, Any]:
    def item(name: str, value: str) -> dict[str, Any]:
        return {"AttributeName": name, "AttributeValues": {"ValueItem": [{"Value": value, "Count": 1}]}}

    return {"RequestId": "r", "AccountAttributeItems": {"AccountAttributeItem": [
        item("real-name-authentication", verified), item("max-postpaid-instance-vcpu-count", str(max_vcpus)),
        item("used-postpaid-instance-vcpu-count", str(used)), item("max-spot-instance-vcpu-count", str(spot_max)),
        item("used-spot-instance-vcpu-count", "0")]}}


def stock(instance_type: str, zones: dict[str, str]) -> dict[str, Any]:
    return {"RequestId": "r", "AvailableZones": {"AvailableZone": [
        {"ZoneId": z, "RegionId": "cn-hangzhou", "Status": "Available" if c in ("WithStock", "ClosedWithStock")
         else "SoldOut", "StatusCategory": c, "AvailableResources": {"AvailableResource": [
             {"Type": "InstanceType", "SupportedResources": {"SupportedResource": [
                 {"Value": instance_type, "Status": "Available" if c != "WithoutStock" else "SoldOut",
                  "StatusCategory": c}]}}]}} for z, c in zones.items()]}}


def image(image_id: str, *, name: str = "ubuntu_22_04_x64_20G_alibase_20261010.vhd", arch: str = "x86_64",
          imds: str = "v2", created: str = "2026-10-10T00:00:00Z") -> dict[str, Any]:
    return {"ImageId": image_id, "ImageName": name, "Architecture": arch, "CreationTime": created,
            "Status": "Available", "ImageOwnerAlias": "system", "Features": {"ImdsSupport": imds}}


class Recorded:
    """The preflight's `Api` seam, answering from hand-written responses checked against the SDK's models."""

    def __init__(self, **handlers: Handler) -> None:
        self.handlers = handlers
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(self, service: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
        models = MODELS[service]
        request = getattr(models, f"{action}Request")().from_map(params).to_map()
        assert kept(params, request), f"{action}: a request field the SDK does not know: {params}"
        self.calls.append((service, action, params))
        answer = self.handlers[action](params)
        body = getattr(models, f"{action}ResponseBody")().from_map(answer).to_map()
        assert kept(answer, body), f"{action}: a response field the SDK does not know: {answer}"
        return body


def kept(sent: Any, model: Any) -> bool:
    """Whether every field of `sent` survived the SDK model (which drops names it does not know)."""
    if isinstance(sent, dict):
        return isinstance(model, dict) and all(k in model and kept(v, model[k]) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(model, list) and len(sent) == len(model) and all(map(kept, sent, model))
    return bool(sent == model)


def not_found(code: str = "Forbidden.ResourceNotFound") -> Handler:
    def raise_(_: dict[str, Any]) -> dict[str, Any]:
        raise TeaException({"code": code, "message": "The resource is not found.", "data": {"statusCode": 404}})

    return raise_


def ready(plan: Plan | None = None, **overrides: Handler) -> Recorded:
    """A ready account (real-name verified, quota to spare, stock in two zones, KMS instance and key enabled)."""
    handlers: dict[str, Handler] = {
        "DescribeAccountAttributes": lambda _: attributes(),
        "DescribeAvailableResource": lambda p: stock(p["InstanceType"], {f"{p['RegionId']}-h": "WithStock",
                                                                         f"{p['RegionId']}-k": "ClosedWithStock"}),
        "DescribeImages": lambda p: {"RequestId": "r", "TotalCount": 1, "Images": {"Image": [
            image(p.get("ImageId") or "m-system-new")]}},
        "GetKmsInstance": lambda p: {"RequestId": "r", "KmsInstance": {"InstanceId": p["KmsInstanceId"],
                                                                       "Status": "Connected"}},
        "DescribeKey": lambda p: {"RequestId": "r", "KeyMetadata": {
            "KeyId": p["KeyId"], "KeyState": "Enabled", "KeySpec": "Aliyun_AES_256", "KeyUsage": "ENCRYPT/DECRYPT",
            "DKMSInstanceId": KMS["infragen:kmsInstanceId"]}},
        "DescribeSecret": not_found(),
        "DescribeDeploymentSetSupportedInstanceTypeFamily": lambda _: {
            "RequestId": "r", "InstanceTypeFamilies": "ecs.ebmgn8v,ecs.ebmgn7ex,ecs.gn8v,ecs.ebmgn8is"},
    }
    return Recorded(**{**handlers, **overrides})


def target(plan: Plan, config: dict[str, Any] | None = None, stack: str | None = "ali-test") -> PreflightTarget:
    return PreflightTarget(plan=plan, source=stack or "plan.json", stack=stack,
                           config={**SECRETS, **KMS, **(config or {})})


def by_name(checks: list[Check], name: str) -> list[Check]:
    return [c for c in checks if c.name == name]


def test_a_ready_account_passes_every_check() -> None:
    plan = make_plan("single", "alicloud")
    api = ready(plan)
    checks = run_preflight(target(plan), clients=api)
    assert [c.name for c in checks] == ["credentials", "real-name", "vcpu-quota", "zones", "image", "kms", "kms",
                                        "secrets", "secrets", "download"]
    assert all(c.status == "ok" for c in checks), render_checks(target(plan), checks)
    zones = by_name(checks, "zones")[0]
    assert "cn-hangzhou-h, cn-hangzhou-k" in zones.detail and "low in cn-hangzhou-k" in zones.detail
    stock_call = next(p for _, a, p in api.calls if a == "DescribeAvailableResource")
    assert stock_call == {"RegionId": plan.deployment.region, "DestinationResource": "InstanceType",
                          "InstanceType": plan.deployment.instance_type, "InstanceChargeType": "PostPaid",
                          "ResourceType": "instance"}
    assert not any(a in ("GetSecretValue",) for _, a, _ in api.calls), "preflight never reads a secret value"


def test_quota_counts_what_runs_and_spot_plans_check_the_spot_quota() -> None:
    plan = make_plan("multinode", "alicloud")
    per_node = plan.hardware.vcpus
    assert per_node is not None
    need = per_node * plan.deployment.nodes
    tight = ready(plan, DescribeAccountAttributes=lambda _: attributes(max_vcpus=need + 10, used=20))
    quota = by_name(run_preflight(target(plan), clients=tight), "vcpu-quota")[0]
    assert quota.status == "fail" and f"20 in use + {need} needed" in quota.detail
    assert quota.fix is not None and f"at least {need + 20}" in quota.fix
    spot = make_plan("single", "alicloud", spot=True)
    checks = run_preflight(target(spot), clients=ready(spot, DescribeAccountAttributes=lambda _: attributes(
        max_vcpus=0, spot_max=1000)))
    assert by_name(checks, "vcpu-quota")[0].status == "ok"
    assert "max-spot-instance-vcpu-count 1000" in by_name(checks, "vcpu-quota")[0].detail
    spot_call = ready(spot)
    run_preflight(target(spot), clients=spot_call)
    assert next(p for _, a, p in spot_call.calls if a == "DescribeAvailableResource")["SpotStrategy"] == "SpotAsPriceGo"


def test_quota_covers_the_autoscaling_ceiling(tmp_path: Path) -> None:
    from infragen.sizing import plan_file
    from tests.provision.test_alicloud_autoscaling import DAILY

    workload = tmp_path / "ali-daily.yaml"
    workload.write_text(DAILY)
    plan = plan_file(workload)
    sc, per_node = plan.scaling, plan.hardware.vcpus
    assert sc is not None and per_node is not None and sc.max_replicas > plan.deployment.nodes
    need = per_node * sc.max_replicas  # one replica per node: the groups may grow to the ceiling
    quota = by_name(run_preflight(target(plan), clients=ready(plan, DescribeAccountAttributes=lambda _: attributes(
        max_vcpus=per_node * plan.deployment.nodes + 10, used=0))), "vcpu-quota")[0]
    assert quota.status == "fail" and f"0 in use + {need} needed" in quota.detail
    assert "autoscaling ceiling" in quota.detail


def test_mainland_regions_need_real_name_verification() -> None:
    plan = make_plan("single", "alicloud")  # cn-hangzhou
    checks = run_preflight(target(plan), clients=ready(plan, DescribeAccountAttributes=lambda _: attributes(
        verified="no")))
    real = by_name(checks, "real-name")[0]
    assert real.status == "fail" and "Chinese mainland" in real.detail


def test_zones_sold_out_everywhere_or_in_the_configured_zone_fail() -> None:
    plan = make_plan("single", "alicloud")
    d = plan.deployment
    sold = ready(plan, DescribeAvailableResource=lambda _: stock(d.instance_type, {f"{d.region}-h": "WithoutStock"}))
    zones = by_name(run_preflight(target(plan), clients=sold), "zones")[0]
    assert zones.status == "fail" and "WithoutStock" in zones.detail
    pinned = run_preflight(target(plan, {"infragen:nodeZones": [f"{d.region}-j"]}), clients=ready(plan))
    zones = by_name(pinned, "zones")[0]
    assert zones.status == "fail" and f"{d.region}-j not offered" in zones.detail
    assert zones.fix is not None and f"{d.region}-h" in zones.fix
    low = ready(plan, DescribeAvailableResource=lambda _: stock(d.instance_type, {f"{d.region}-h": "ClosedWithStock"}))
    assert by_name(run_preflight(target(plan), clients=low), "zones")[0].status == "warn"


def test_zone_fix_lists_zones_with_stock_best_first() -> None:
    plan = make_plan("single", "alicloud")
    d = plan.deployment
    api = ready(plan, DescribeAvailableResource=lambda _: stock(d.instance_type, {
        f"{d.region}-b": "ClosedWithStock", f"{d.region}-g": "WithoutStock", f"{d.region}-k": "WithStock"}))
    zones = by_name(run_preflight(target(plan, {"infragen:nodeZones": [f"{d.region}-g"]}), clients=api), "zones")[0]
    assert zones.status == "fail" and zones.fix is not None
    assert zones.fix.endswith(f"{d.region}-k, {d.region}-b>")  # WithStock before ClosedWithStock; sold out left out


def test_multinode_plans_need_a_family_with_lowlatency_deployment_sets() -> None:
    plan = make_plan("multinode", "alicloud")
    assert plan.network.placement == "cluster"
    family = "ecs." + plan.deployment.instance_type.split(".")[1]
    ok = by_name(run_preflight(target(plan), clients=ready(plan)), "deployment-set")
    assert [c.status for c in ok] == ["ok"] and family in ok[0].detail
    refused = ready(plan, DescribeDeploymentSetSupportedInstanceTypeFamily=lambda _: {
        "RequestId": "r", "InstanceTypeFamilies": "ecs.i2g,ecs.i1"})
    check = by_name(run_preflight(target(plan), clients=refused), "deployment-set")[0]
    assert check.status == "fail" and "does not support LowLatency" in check.detail
    single = make_plan("single", "alicloud")
    api = ready(single)
    assert not by_name(run_preflight(target(single), clients=api), "deployment-set")
    assert not any(a == "DescribeDeploymentSetSupportedInstanceTypeFamily" for _, a, _ in api.calls)


def test_image_pinned_must_exist_match_the_arch_and_take_hardened_metadata() -> None:
    plan = make_plan("single", "alicloud")
    gone = ready(plan, DescribeImages=lambda _: {"RequestId": "r", "TotalCount": 0, "Images": {"Image": []}})
    assert by_name(run_preflight(target(plan), clients=gone), "image")[0].status == "fail"
    arm = ready(plan, DescribeImages=lambda p: {"RequestId": "r", "Images": {"Image": [image(p["ImageId"],
                                                                                            arch="arm64")]}})
    assert "needs x86_64" in by_name(run_preflight(target(plan), clients=arm), "image")[0].detail
    v1 = ready(plan, DescribeImages=lambda p: {"RequestId": "r", "Images": {"Image": [image(p["ImageId"],
                                                                                           imds="v1")]}})
    check = by_name(run_preflight(target(plan), clients=v1), "image")[0]
    assert check.status == "warn" and "ImdsSupport is v1" in check.detail


def test_image_unpinned_is_the_newest_matching_system_image_and_asks_to_pin() -> None:
    plan = make_plan("single", "alicloud")
    images = [image("m-old", created="2025-01-01T00:00:00Z"), image("m-new", created="2026-11-01T00:00:00Z"),
              image("m-centos", name="centos_7_9_x64_20G_alibase_20261101.vhd", created="2026-12-01T00:00:00Z")]
    api = ready(plan, DescribeImages=lambda _: {"RequestId": "r", "Images": {"Image": images}})
    config = {**SECRETS, "infragen:kmsInstanceId": KMS["infragen:kmsInstanceId"],
              "infragen:kmsKeyId": KMS["infragen:kmsKeyId"]}
    checks = run_preflight(PreflightTarget(plan=plan, source="s", stack="s", config=config), clients=api)
    check = by_name(checks, "image")[0]
    assert check.status == "warn" and check.detail.startswith("m-new ")
    assert check.fix == "pulumi config set --stack s infragen:imageId m-new"
    request = next(p for _, a, p in api.calls if a == "DescribeImages")
    assert request["ImageOwnerAlias"] == "system" and request["InstanceType"] == plan.deployment.instance_type


def test_kms_instance_and_key_must_be_set_enabled_and_belong_together() -> None:
    plan = make_plan("single", "alicloud")
    unset = PreflightTarget(plan=plan, source="s", stack="s", config=SECRETS)
    kms = by_name(run_preflight(unset, clients=ready(plan)), "kms")
    assert kms[0].status == "fail" and "infragen:kmsInstanceId and infragen:kmsKeyId not set" in kms[0].detail
    off = ready(plan, GetKmsInstance=lambda p: {"KmsInstance": {"InstanceId": p["KmsInstanceId"],
                                                               "Status": "Uninitialized"}},
                DescribeKey=lambda p: {"KeyMetadata": {"KeyId": p["KeyId"], "KeyState": "PendingDeletion",
                                                       "DKMSInstanceId": "kst-other"}})
    kms = by_name(run_preflight(target(plan), clients=off), "kms")
    assert [c.status for c in kms] == ["fail", "fail"]
    assert "Uninitialized" in kms[0].detail and "PendingDeletion" in kms[1].detail and "kst-other" in kms[1].detail


def test_secret_names_taken_by_someone_else_or_being_deleted_fail() -> None:
    plan = make_plan("single", "alicloud")

    names = plan.secrets.for_stack("ali-test")  # the stack's own names, as the Alibaba program creates them

    def secret(p: dict[str, Any]) -> dict[str, Any]:
        if p["SecretName"] == names.hf_token_name:
            return {"SecretName": p["SecretName"], "PlannedDeleteTime": "2026-12-10T00:00:00Z"}
        return {"SecretName": p["SecretName"], "Tags": {"Tag": [{"TagKey": "owner", "TagValue": "someone"}]}}

    checks = by_name(run_preflight(target(plan), clients=ready(plan, DescribeSecret=secret)), "secrets")
    assert [c.status for c in checks] == ["fail", "fail"]
    assert "scheduled for deletion" in checks[0].detail and "not created by infragen" in checks[1].detail
    assert names.hf_token_name in checks[0].detail and names.api_key_name in checks[1].detail
    ours = ready(plan, DescribeSecret=lambda p: {"SecretName": p["SecretName"], "Tags": {"Tag": [
        {"TagKey": "infragen:workload", "TagValue": plan.workload}]}})
    assert all(c.status == "ok" for c in by_name(run_preflight(target(plan), clients=ours), "secrets"))
    unset = PreflightTarget(plan=plan, source="s", stack="s", config=KMS)
    assert "lacks secret config" in by_name(run_preflight(unset, clients=ready(plan)), "secrets")[0].detail


def test_secrets_are_checked_under_the_stack_names() -> None:
    """The stack's names are asked for (never the plan's stack-free ones); a secret under this stack's name that
    another stack tagged as its own is a collision."""
    plan = make_plan("single", "alicloud")
    api = ready(plan)
    checks = by_name(run_preflight(target(plan), clients=api), "secrets")
    asked = [p["SecretName"] for _, a, p in api.calls if a == "DescribeSecret"]
    names = plan.secrets.for_stack("ali-test")
    assert asked == [names.hf_token_name, names.api_key_name] and all(c.status == "ok" for c in checks)
    theirs = ready(plan, DescribeSecret=lambda p: {"SecretName": p["SecretName"], "Tags": {"Tag": [
        {"TagKey": "infragen:workload", "TagValue": plan.workload},
        {"TagKey": "infragen:stack", "TagValue": "other"}]}})
    checks = by_name(run_preflight(target(plan), clients=theirs), "secrets")
    assert [c.status for c in checks] == ["fail", "fail"] and "belongs to stack other" in checks[0].detail
    # A plan file alone (no stack) is checked under the plan's own names.
    api = ready(plan)
    run_preflight(target(plan, stack=None), clients=api)
    assert [p["SecretName"] for _, a, p in api.calls if a == "DescribeSecret"] == [
        plan.secrets.hf_token_name, plan.secrets.api_key_name]


def test_the_shared_nat_eip_download_warns_when_it_takes_hours() -> None:
    plan = make_plan("multinode", "alicloud")
    check = by_name(run_preflight(target(plan), clients=ready(plan)), "download")[0]
    assert plan.bootstrap is not None and plan.bootstrap.download_mbit_s is not None
    hours = plan.model.weights_gib * 1.0737 * 8e3 / plan.bootstrap.download_mbit_s / 3600
    assert check.status == ("warn" if hours >= 1 else "ok") and f"{hours:.1f} h" in check.detail
    assert "200 Mbit/s NAT EIP shared by" in check.detail


def test_bad_credentials_or_denied_calls_are_failed_checks_not_tracebacks() -> None:
    plan = make_plan("single", "alicloud")
    bad = ready(plan, DescribeAccountAttributes=not_found("InvalidAccessKeyId.NotFound"))
    checks = run_preflight(target(plan), clients=bad)
    assert [c.name for c in checks] == ["credentials"] and checks[0].status == "fail"
    assert "InvalidAccessKeyId.NotFound" in checks[0].detail
    denied = ready(plan, GetKmsInstance=not_found("Forbidden.RAM"))
    kms = by_name(run_preflight(target(plan), clients=denied), "kms")[0]
    assert kms.status == "fail" and kms.fix is not None and "RAM policy" in kms.fix


def test_cli_runs_an_alibaba_stack_and_exits_3_on_failure(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # The repository's stack file: its workload is planned for real; it holds no secrets or KMS ids -> failures.
    import infragen.preflight.alicloud as backend

    api = ready()
    monkeypatch.setattr(backend, "sdk_api", lambda region: api)
    with pytest.raises(SystemExit) as exc:
        main(["preflight", "ali-chat-7b"])
    out = capsys.readouterr()
    assert exc.value.code == 3
    assert "infragen preflight ali-chat-7b" in out.out and "OK    zones" in out.out
    assert "FAIL  secrets" in out.out and "FAIL  kms" in out.out
    assert "Error: ali-chat-7b:" in out.err and "preflight check(s) failed" in out.err
    region = next(p["RegionId"] for _, a, p in api.calls if a == "DescribeAvailableResource")
    assert region == "cn-beijing"
