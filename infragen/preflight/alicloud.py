"""Alibaba Cloud preflight: the account (credentials, real-name verification in the Chinese mainland, the vCPU
quota of pay-as-you-go or spot instances), stock of the instance type in the region's zones
(DescribeAvailableResource), the system or pinned image, the KMS 3.0 instance, key and secret names, and the
weight download through the shared NAT EIP.

Alibaba's Python SDK (alibabacloud_ecs20140526, alibabacloud_kms20160120), read-only calls only; never reads a
secret value. The SDK is reached through one seam, `Api`, so the tests replay responses without an account.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from infragen.catalog import load_catalog
from infragen.catalog.alicloud_node import load_alicloud_node
from infragen.errors import InfragenError, InputError
from infragen.preflight import Check, PreflightTarget

#: (service "ecs" | "kms", action such as "DescribeAvailableResource", request fields by their API names) ->
#: the response body as a dict of API names (the SDK model's `to_map()`).
Api = Callable[[str, str, dict[str, Any]], dict[str, Any]]

#: DescribeAvailableResource StatusCategory values that can still sell (Alibaba's API reference; ClosedWithStock:
#: low stock, "prefer WithStock"; WithoutStock: sold out, will be replenished; ClosedWithoutStock: sold out for good).
IN_STOCK = ("WithStock", "ClosedWithStock")
QUOTA_ATTRIBUTES = ("real-name-authentication", "max-postpaid-instance-vcpu-count", "used-postpaid-instance-vcpu-count",
                    "max-spot-instance-vcpu-count", "used-spot-instance-vcpu-count")
SECRET_NOT_FOUND = "Forbidden.ResourceNotFound"
#: ECS deployment sets, LowLatency strategy: every instance in one zone, at most 20 per zone (ECS "Deployment set"
#: docs, limits of the network low-latency strategy).
LOW_LATENCY_MAX_INSTANCES = 20


def check_alicloud(target: PreflightTarget, api: Api | None = None) -> list[Check]:
    """Every Alibaba check for the target, in the order a first deploy meets them."""
    call = api or sdk_api(target.plan.deployment.region)
    account = _guard_many("account", lambda: _account(target, call))
    if any(c.status == "fail" and c.name == "credentials" for c in account):
        return account
    checks = account
    for name, fn in (("zones", _zones), ("deployment-set", _deployment_set), ("image", _image), ("kms", _kms),
                     ("secrets", _secrets)):
        checks += _guard_many(name, lambda fn=fn: fn(target, call))
    return checks + _download(target)


# --- checks ------------------------------------------------------------------------------------------------------


def _account(target: PreflightTarget, call: Api) -> list[Check]:
    d = target.plan.deployment
    try:
        body = call("ecs", "DescribeAccountAttributes",
                    {"RegionId": d.region, "AttributeName": list(QUOTA_ATTRIBUTES)})
    except sdk_errors() as exc:  # bad or missing credentials, no network: one failed check ends the run
        return [_failed("credentials", exc, fix="set ALIBABA_CLOUD_ACCESS_KEY_ID / ALIBABA_CLOUD_ACCESS_KEY_SECRET "
                                                 "(or a profile made with `aliyun configure`)")]
    attrs = _attributes(body)
    out = [Check("credentials", "ok", f"ECS answers in {d.region}")]
    verified = (attrs.get("real-name-authentication") or [""])[0].lower()
    if d.region in load_alicloud_node().real_name_regions:
        if verified in ("yes", "true"):
            out.append(Check("real-name", "ok", "account is real-name verified"))
        else:
            out.append(Check("real-name", "fail", f"real-name-authentication is {verified or 'not reported'}: ECS "
                             f"creates no instance in {d.region} (Chinese mainland) before real-name verification",
                             fix="complete real-name verification in the Alibaba Cloud account center"))
    out.append(_quota(target, attrs))
    return out


def _attributes(body: dict[str, Any]) -> dict[str, list[str]]:
    items = (body.get("AccountAttributeItems") or {}).get("AccountAttributeItem") or []
    return {str(i.get("AttributeName")): [str(v.get("Value")) for v in
                                          (i.get("AttributeValues") or {}).get("ValueItem") or []] for i in items}


def _quota(target: PreflightTarget, attrs: dict[str, list[str]]) -> Check:
    d = target.plan.deployment
    kind = "spot" if d.pricing == "spot" else "postpaid"
    limit, used = attrs.get(f"max-{kind}-instance-vcpu-count"), attrs.get(f"used-{kind}-instance-vcpu-count")
    per_node = target.plan.hardware.vcpus
    if not limit or per_node is None:
        return Check("vcpu-quota", "warn", f"max-{kind}-instance-vcpu-count not reported (or the plan has no vCPU "
                     "count); not checked", fix="check the ECS quota in the Quota Center console")
    # A fleet that autoscales (single-node replicas with a daily view) may grow to the plan's ceiling.
    sc = target.plan.scaling
    nodes = d.nodes
    if sc is not None and d.nodes_per_replica == 1:
        nodes = max(nodes, -(-sc.max_replicas // d.replicas_per_node))
    cap, in_use, needed = float(limit[0]), float((used or ["0"])[0]), per_node * nodes
    ceiling = " at the autoscaling ceiling" if nodes > d.nodes else ""
    detail = (f"max-{kind}-instance-vcpu-count {cap:g}; {in_use:g} in use + {needed} needed ({nodes} x "
              f"{d.instance_type}{ceiling}, {per_node} vCPUs each)")
    if in_use + needed > cap:
        return Check("vcpu-quota", "fail", detail, fix=f"raise the {'spot' if kind == 'spot' else 'pay-as-you-go'} "
                     f"instance vCPU quota of {d.region} to at least {in_use + needed:g} in the Quota Center")
    return Check("vcpu-quota", "ok", detail)


def _zones(target: PreflightTarget, call: Api) -> list[Check]:
    d = target.plan.deployment
    stock = zone_stock(call, d.region, d.instance_type, spot=d.pricing == "spot")
    # Best first: WithStock zones, then ClosedWithStock (low stock) ones; the fix lists them in that order.
    selling = sorted((z for z, category in stock.items() if category in IN_STOCK),
                     key=lambda z: IN_STOCK.index(stock[z]))
    wanted = target.setting("nodeZones") or []
    wanted = [wanted] if isinstance(wanted, str) else [str(z) for z in wanted]
    if wanted:
        empty = [z for z in wanted if z not in selling]
        if empty:
            states = ", ".join(f"{z} {stock.get(z, 'not offered')}" for z in empty)
            return [Check("zones", "fail", f"infragen:nodeZones {', '.join(empty)}: no {d.instance_type} in stock "
                          f"({states})",
                          fix="pulumi config set --path 'infragen:nodeZones[0]' <a zone with stock: "
                              f"{', '.join(selling) or 'none in this region'}>")]
    if not selling:
        return [Check("zones", "fail", f"no zone of {d.region} has {d.instance_type} in stock "
                      f"({', '.join(f'{z} {c}' for z, c in stock.items()) or 'not offered at all'})",
                      fix="plan another region (workload `regions`) or instance family, or ask Alibaba sales")]
    low = [z for z in selling if stock[z] != "WithStock"]
    detail = f"{d.instance_type} in stock in {', '.join(selling)}"
    if len(low) == len(selling):
        return [Check("zones", "warn", detail + " (all ClosedWithStock: low stock, creation may fail)",
                      fix="try now, or plan another region with WithStock zones")]
    return [Check("zones", "ok", detail + (f" (low in {', '.join(low)})" if low else ""))]


def _deployment_set(target: PreflightTarget, call: Api) -> list[Check]:
    """Multi-node replicas go into a LowLatency deployment set each: the family must support the strategy."""
    plan = target.plan
    if plan.network.placement != "cluster":
        return []
    d = plan.deployment
    if d.nodes_per_replica > LOW_LATENCY_MAX_INSTANCES:
        return [Check("deployment-set", "fail", f"{d.nodes_per_replica} nodes per replica; a LowLatency deployment "
                      f"set holds at most {LOW_LATENCY_MAX_INSTANCES} instances in its one zone",
                      fix="plan fewer nodes per replica (larger instance types)")]
    try:
        family = "ecs." + load_catalog().instance(d.instance_type).family
    except InfragenError:
        return [Check("deployment-set", "warn", f"{d.instance_type} is not in the catalog: its family's support for "
                      "LowLatency deployment sets was not checked")]
    body = call("ecs", "DescribeDeploymentSetSupportedInstanceTypeFamily",
                {"RegionId": d.region, "Strategy": "LowLatency"})
    supported = {f.strip() for f in str(body.get("InstanceTypeFamilies") or "").split(",") if f.strip()}
    if family not in supported:
        return [Check("deployment-set", "fail", f"{family} does not support LowLatency deployment sets in {d.region}; "
                      "ECS refuses the multi-node replicas' placement",
                      fix="plan an instance family that does (DescribeDeploymentSetSupportedInstanceTypeFamily, "
                          "Strategy=LowLatency), or a single-node layout")]
    return [Check("deployment-set", "ok", f"{family} supports LowLatency deployment sets ({d.nodes_per_replica} "
                  f"nodes per replica, at most {LOW_LATENCY_MAX_INSTANCES})")]


def zone_stock(call: Api, region: str, instance_type: str, *, spot: bool) -> dict[str, str]:
    """zone id -> StatusCategory of the instance type there (pay-as-you-go, or spot at market price)."""
    params: dict[str, Any] = {"RegionId": region, "DestinationResource": "InstanceType", "InstanceType": instance_type,
                              "InstanceChargeType": "PostPaid", "ResourceType": "instance"}
    if spot:
        params["SpotStrategy"] = "SpotAsPriceGo"
    body = call("ecs", "DescribeAvailableResource", params)
    found: dict[str, str] = {}
    for zone in (body.get("AvailableZones") or {}).get("AvailableZone") or []:
        for res in (zone.get("AvailableResources") or {}).get("AvailableResource") or []:
            for item in (res.get("SupportedResources") or {}).get("SupportedResource") or []:
                if item.get("Value") == instance_type:
                    category = item.get("StatusCategory") or ("WithStock" if item.get("Status") == "Available"
                                                              else "WithoutStock")
                    found[str(zone.get("ZoneId"))] = str(category)
    return dict(sorted(found.items()))


def _image(target: PreflightTarget, call: Api) -> list[Check]:
    d = target.plan.deployment
    arch = "arm64" if d.cpu_arch == "arm64" else "x86_64"
    pinned = target.setting("imageId")
    if pinned:
        images = _images(call("ecs", "DescribeImages", {"RegionId": d.region, "ImageId": str(pinned)}))
        if not images:
            return [Check("image", "fail", f"infragen:imageId {pinned} is not visible in {d.region}",
                          fix="pin an image of this region (or unset infragen:imageId for the Ubuntu system image)")]
        image = images[0]
        if image.get("Architecture") != arch:
            return [Check("image", "fail", f"{pinned} is {image.get('Architecture')}; {d.instance_type} needs {arch}")]
        imds = (image.get("Features") or {}).get("ImdsSupport")
        if imds != "v2":
            return [Check("image", "warn", f"{pinned} {image.get('ImageName', '')}: Features.ImdsSupport is "
                          f"{imds or 'unset'}, not v2; the nodes run metadata in hardened mode and its cloud-init "
                          "may not read the user data", fix="use an image whose cloud-init sends the metadata token "
                          "(docs/alicloud.md, Images)")]
        return [Check("image", "ok", f"{pinned} {image.get('ImageName', '')} (pinned by infragen:imageId)")]
    regex = load_alicloud_node().system_image_name_regex[d.cpu_arch]
    images = _images(call("ecs", "DescribeImages", {
        "RegionId": d.region, "ImageOwnerAlias": "system", "InstanceType": d.instance_type, "Architecture": arch,
        "OSType": "linux", "Status": "Available", "PageSize": 100}))
    matching = sorted((i for i in images if re.search(regex, str(i.get("ImageName", "")))),
                      key=lambda i: str(i.get("CreationTime", "")), reverse=True)
    if not matching:
        return [Check("image", "fail", f"no system image matching {regex} for {d.instance_type} in {d.region}",
                      fix="pin an image: pulumi config set infragen:imageId m-...")]
    newest = matching[0]
    stack = f" --stack {target.stack}" if target.stack else ""
    return [Check("image", "warn", f"{newest.get('ImageId')} {newest.get('ImageName')} (newest {regex}); not "
                  "pinned, so a newer system image replaces every node at the next `pulumi up`",
                  fix=f"pulumi config set{stack} infragen:imageId {newest.get('ImageId')}")]


def _images(body: dict[str, Any]) -> list[dict[str, Any]]:
    return list((body.get("Images") or {}).get("Image") or [])


def _kms(target: PreflightTarget, call: Api) -> list[Check]:
    instance_id, key_id = target.setting("kmsInstanceId"), target.setting("kmsKeyId")
    missing = [k for k, v in (("infragen:kmsInstanceId", instance_id), ("infragen:kmsKeyId", key_id)) if not v]
    if missing:
        return [Check("kms", "fail", f"{' and '.join(missing)} not set: on KMS 3.0 the stack's secrets need the KMS "
                      "instance and a symmetric key of it", fix="pulumi config set infragen:kmsInstanceId kst-...; "
                      "pulumi config set infragen:kmsKeyId key-... (docs/alicloud.md, First deploy)")]
    out = []
    instance = call("kms", "GetKmsInstance", {"KmsInstanceId": str(instance_id)}).get("KmsInstance") or {}
    status = instance.get("Status")
    if status != "Connected":
        out.append(Check("kms", "fail", f"KMS instance {instance_id} is {status or 'not found'}, not Connected "
                         "(enabled)", fix="enable the KMS instance in the KMS console (bind it to a VPC)"))
    else:
        out.append(Check("kms", "ok", f"KMS instance {instance_id} Connected"))
    key = call("kms", "DescribeKey", {"KeyId": str(key_id)}).get("KeyMetadata") or {}
    problems = []
    if key.get("KeyState") != "Enabled":
        problems.append(f"is {key.get('KeyState') or 'not found'}, not Enabled")
    if key.get("DKMSInstanceId") != instance_id:
        problems.append(f"belongs to {key.get('DKMSInstanceId') or 'no KMS instance'}, not {instance_id}")
    if key.get("KeyUsage") not in (None, "ENCRYPT/DECRYPT"):
        problems.append(f"is for {key.get('KeyUsage')}, not ENCRYPT/DECRYPT")
    if problems:
        out.append(Check("kms", "fail", f"key {key_id} " + "; ".join(problems),
                         fix="create a symmetric key (ENCRYPT/DECRYPT) in that KMS instance and set infragen:kmsKeyId"))
    else:
        out.append(Check("kms", "ok", f"key {key_id} ({key.get('KeySpec')}) Enabled in {instance_id}"))
    return out


def _secrets(target: PreflightTarget, call: Api) -> list[Check]:
    plan, out = target.plan, target.secret_config_checks()
    # A stack's secrets carry its name (the Alibaba program's `plan.secrets.for_stack`, as on AWS); a plan file
    # alone is checked under the plan's own names.
    names = plan.secrets.for_stack(target.stack) if target.stack is not None else plan.secrets
    for name in (names.hf_token_name, names.api_key_name):
        try:
            found = call("kms", "DescribeSecret", {"SecretName": name, "FetchTags": "true"})
        except sdk_errors() as exc:  # only "not found" is an answer here; the rest go to the guard
            if getattr(exc, "code", None) != SECRET_NOT_FOUND:
                raise
            out.append(Check("secrets", "ok", f"{name}: free; the stack creates it"))
            continue
        tags = {t.get("TagKey"): t.get("TagValue") for t in (found.get("Tags") or {}).get("Tag") or []}
        if found.get("PlannedDeleteTime"):
            out.append(Check("secrets", "fail", f"{name} is scheduled for deletion, so the stack cannot create it",
                             fix=f"aliyun kms RestoreSecret --SecretName {name} (then delete it with "
                                 "ForceDeleteWithoutRecovery), or wait for the deletion"))
        elif target.stack is not None and tags.get("infragen:stack") not in (None, target.stack):
            out.append(Check("secrets", "fail", f"{name} belongs to stack {tags['infragen:stack']}; creating it "
                             "again fails", fix=f"delete stack {tags['infragen:stack']}'s secret or deploy under "
                             "another stack name"))
        elif tags.get("infragen:workload") == plan.workload:
            out.append(Check("secrets", "ok", f"{name}: exists, created by infragen for {plan.workload}"))
        else:
            out.append(Check("secrets", "fail", f"{name} exists and was not created by infragen; creating it fails",
                             fix="delete or rename that secret, or rename the workload"))
    return out


def _download(target: PreflightTarget) -> list[Check]:
    """The one NAT EIP every node downloads through (no API call: the plan carries each node's share)."""
    plan = target.plan
    share = plan.bootstrap.download_mbit_s if plan.bootstrap else None
    if share is None:
        return [Check("download", "ok", f"weights from {plan.model.weights_source}: not through the NAT EIP")]
    eip = load_alicloud_node().nat_eip_bandwidth_mbit_s
    hours = plan.model.weights_gib * 1.0737 * 8e3 / share / 3600
    detail = (f"{plan.model.weights_gib:.0f} GiB per node at {share:g} Mbit/s ({eip} Mbit/s NAT EIP shared by "
              f"{plan.deployment.nodes} node(s)): about {hours:.1f} h")
    if hours >= 1:
        return [Check("download", "warn", detail, fix="stage the weights in OSS (weights: oss://bucket/prefix, read "
                      "over the internal network) or deploy fewer nodes at a time")]
    return [Check("download", "ok", detail)]


# --- plumbing ----------------------------------------------------------------------------------------------------


def _failed(name: str, exc: Exception, *, fix: str | None = None) -> Check:
    code, message = getattr(exc, "code", None), getattr(exc, "message", None) or str(exc)
    if code and ("Forbidden" in str(code) or "NoPermission" in str(code)):
        fix = "grant the caller read access for this call (RAM policy)"
    return Check(name, "fail", f"{code}: {message}" if code else f"{type(exc).__name__}: {message}", fix=fix)


def _guard_many(name: str, fn: Callable[[], list[Check]]) -> list[Check]:
    """Run a check; an SDK error (denied, throttled, no network) becomes a failed check, not a traceback."""
    try:
        return fn()
    except sdk_errors() as exc:
        return [_failed(name, exc)]


def sdk_errors() -> tuple[type[Exception], ...]:
    """What Alibaba's SDK raises for an API error, a credential problem or the network (bugs stay tracebacks)."""
    errors: list[type[Exception]] = [OSError]  # requests' and the socket layer's errors are OSErrors
    try:
        from Tea.exceptions import TeaException  # API errors (code, message); darabonba's derive from it

        errors.append(TeaException)
    except ImportError:
        pass
    try:
        from alibabacloud_credentials.exceptions import CredentialException

        errors.append(CredentialException)
    except ImportError:
        pass
    return tuple(errors)


def sdk_api(region: str) -> Api:
    """The real seam: Alibaba's SDK clients for `region`, default credential chain, bounded timeouts and retries."""
    try:
        from alibabacloud_credentials.client import Client as Credentials
        from alibabacloud_ecs20140526 import models as ecs_models
        from alibabacloud_ecs20140526.client import Client as Ecs
        from alibabacloud_kms20160120 import models as kms_models
        from alibabacloud_kms20160120.client import Client as Kms
        from alibabacloud_tea_openapi.models import Config
        from darabonba.runtime import RuntimeOptions
    except ImportError:
        raise InputError("infragen preflight on Alibaba Cloud needs Alibaba's SDK (alibabacloud_ecs20140526, "
                         "alibabacloud_kms20160120)", fix="pip install 'infragen[preflight]'") from None
    services = {"ecs": (Ecs, ecs_models), "kms": (Kms, kms_models)}
    clients: dict[str, Any] = {}
    # Bounded: short timeouts (ms) and three attempts, so an unreachable endpoint fails the check instead of hanging.
    runtime = RuntimeOptions(connect_timeout=5000, read_timeout=20000, autoretry=True, max_attempts=3)

    def call(service: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
        client_cls, models = services[service]
        if service not in clients:
            clients[service] = client_cls(Config(credential=Credentials(), region_id=region))
        request = getattr(models, f"{action}Request")().from_map(params)
        method = getattr(clients[service], re.sub(r"(?<!^)(?=[A-Z])", "_", action).lower() + "_with_options")
        return dict(method(request, runtime).body.to_map())

    return call
