"""AWS preflight: credentials, vCPU quota of the instance class (Service Quotas, minus what already runs; a spot
plan's on-demand base and spot part each against its own quota), zones offering the instance type, a spot market
for spot plans, the machine image, the stack's secrets and certificate, and a configured capacity reservation
(type, state, free count, zone). boto3, read-only calls only; never reads a secret value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from infragen.catalog.aws_deploy import load_aws_deploy
from infragen.errors import InputError
from infragen.preflight import Check, PreflightTarget

#: service name -> boto3 client, all in the plan's region (the test seam: tests pass moto or stubbed clients).
ClientFactory = Callable[[str], Any]
ANYWHERE = "0.0.0.0/0"


def check_aws(target: PreflightTarget, clients: ClientFactory | None = None) -> list[Check]:
    """Every AWS check for the target, in the order a first deploy meets them."""
    client = clients or _boto3_clients(target.plan.deployment.region)
    identity = _guard("credentials", lambda: _identity(client))
    if identity.status == "fail":
        return [identity]
    checks = [identity]
    for name, fn in (("zones", _zones), ("vcpu-quota", _quota), ("spot", _spot), ("image", _image),
                     ("secrets", _secrets), ("certificate", _certificate), ("capacity", _capacity)):
        checks += _guard_many(name, lambda fn=fn: fn(target, client))
    return checks


# --- checks ------------------------------------------------------------------------------------------------------


def _identity(client: ClientFactory) -> Check:
    who = client("sts").get_caller_identity()
    return Check("credentials", "ok", f"account {who['Account']} as {who['Arn']}")


def _zones(target: PreflightTarget, client: ClientFactory) -> list[Check]:
    d = target.plan.deployment
    offered = offered_zone_ids(client("ec2"), d.instance_type)
    if not offered:
        return [Check("zones", "fail", f"no availability zone of {d.region} offers {d.instance_type}",
                      fix="plan another region (workload `regions`) or instance family")]
    if len(offered) == 1:
        return [Check("zones", "warn", f"only {offered[0]} offers {d.instance_type}: every node lands in one zone",
                      fix="accept it, or plan a region where two zones offer the type")]
    return [Check("zones", "ok", f"{d.instance_type} offered in {', '.join(offered)}")]


def offered_zone_ids(ec2: Any, instance_type: str) -> list[str]:
    """Zone ids (`use1-az1`) of the region that offer the instance type, sorted."""
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone-id", Filters=[{"Name": "instance-type", "Values": [instance_type]}])
    return sorted({o["Location"] for page in pages for o in page["InstanceTypeOfferings"]})


def _quota(target: PreflightTarget, client: ClientFactory) -> list[Check]:
    """The vCPU quota of each capacity type the plan launches: a spot plan's on-demand base counts against the
    on-demand quota, its spot nodes against the spot quota."""
    plan = target.plan
    if plan.deployment.pricing != "spot":
        return _quota_of(target, client, spot=False, nodes=plan.deployment.nodes)
    base = plan.spot.on_demand_base_nodes if plan.spot else 0
    spot_nodes = plan.deployment.nodes - base
    return ([*(_quota_of(target, client, spot=False, nodes=base) if base else []),
             *(_quota_of(target, client, spot=True, nodes=spot_nodes) if spot_nodes else [])])


def _quota_of(target: PreflightTarget, client: ClientFactory, *, spot: bool, nodes: int) -> list[Check]:
    d = target.plan.deployment
    cls = load_aws_deploy().quota_class(d.instance_type)
    quota = None if cls is None else (cls.spot if spot else cls.on_demand)
    if cls is None or quota is None:
        return [Check("vcpu-quota", "warn", f"no known vCPU quota code for {d.instance_type} "
                      f"({'spot' if spot else 'on-demand'}); not checked",
                      fix="check EC2 limits in the Service Quotas console")]
    ec2 = client("ec2")
    per_node = target.plan.hardware.vcpus or _vcpus(ec2, [d.instance_type])[d.instance_type]
    needed = per_node * nodes
    limit = _quota_value(client("service-quotas"), quota.code)
    running = _running_vcpus(ec2, cls.families, spot=spot)
    total = running + needed
    detail = (f"{quota.name} ({quota.code}): {limit:g} vCPUs; {running} in use + {needed} needed "
              f"({nodes} x {d.instance_type}, {per_node} vCPUs each)")
    if total > limit:
        return [Check("vcpu-quota", "fail", detail,
                      fix=f"aws service-quotas request-service-quota-increase --region {d.region} "
                          f"--service-code ec2 --quota-code {quota.code} --desired-value {total}")]
    return [Check("vcpu-quota", "ok", detail)]


def _spot(target: PreflightTarget, client: ClientFactory) -> list[Check]:
    """Spot plans: a spot market for the planned type (and each same-GPU alternative) in the zones that offer it,
    from the spot price history of the last day (no history: no spot pool there)."""
    plan = target.plan
    d = plan.deployment
    if d.pricing != "spot":
        return []
    ec2 = client("ec2")
    ids = {z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    offered = set(offered_zone_ids(ec2, d.instance_type))
    out = []
    for itype in [d.instance_type, *(plan.spot.alternative_instance_types if plan.spot else [])]:
        prices = spot_prices(ec2, itype)
        zones = sorted(ids.get(name, name) for name in prices if ids.get(name, name) in offered)
        if itype != d.instance_type:
            out.append(Check("spot", "ok" if zones else "warn",
                             f"alternative {itype}: spot prices in {', '.join(zones)}" if zones else
                             f"alternative {itype}: no spot price in the zones offering {d.instance_type}; its "
                             "pool stays empty"))
            continue
        if not zones:
            return [Check("spot", "fail", f"no spot price for {itype} in any zone of {d.region} that offers it "
                          "(EC2 spot price history, last day): the spot part of the plan cannot launch",
                          fix="plan with pricing: on-demand, or another region")]
        shown = ", ".join(f"{z} ${prices[n]:.4f}/h" for n, z in sorted((n, ids.get(n, n)) for n in prices)
                          if z in zones)
        status = "ok" if len(zones) > 1 or d.replicas < 2 else "warn"
        out.append(Check("spot", status, f"{itype} spot prices: {shown}" +
                         ("" if status == "ok" else "; one zone only, so the spot replicas share one spot market"),
                         fix=None if status == "ok" else "accept it, or plan a region with two spot zones"))
    return out


def spot_prices(ec2: Any, instance_type: str) -> dict[str, float]:
    """Zone name -> the latest Linux spot price of the instance type over the last day."""
    import datetime

    since = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=[instance_type], ProductDescriptions=["Linux/UNIX", "Linux/UNIX (Amazon VPC)"],
        StartTime=since)
    latest: dict[str, tuple[Any, float]] = {}
    for page in pages:
        for row in page["SpotPriceHistory"]:
            zone, at = row["AvailabilityZone"], row["Timestamp"]
            if zone not in latest or at > latest[zone][0]:
                latest[zone] = (at, float(row["SpotPrice"]))
    return {zone: price for zone, (_, price) in latest.items()}


def _quota_value(sq: Any, code: str) -> float:
    """The account's applied value, else AWS's default (accounts that never changed it may have no applied one)."""
    try:
        return float(sq.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])
    except sq.exceptions.NoSuchResourceException:
        return float(sq.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])


def _running_vcpus(ec2: Any, families: Iterable[str], *, spot: bool) -> int:
    """vCPUs of pending/running instances of the quota class (spot or on-demand ones) in the region."""
    facts = load_aws_deploy()
    counts: dict[str, int] = {}
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])
    for page in pages:
        for reservation in page["Reservations"]:
            for inst in reservation["Instances"]:
                cls = facts.quota_class(inst["InstanceType"])
                if cls is None or not set(cls.families) & set(families):
                    continue
                if (inst.get("InstanceLifecycle") == "spot") != spot:
                    continue
                counts[inst["InstanceType"]] = counts.get(inst["InstanceType"], 0) + 1
    if not counts:
        return 0
    vcpus = _vcpus(ec2, list(counts))
    return sum(vcpus[t] * n for t, n in counts.items())


def _vcpus(ec2: Any, types: list[str]) -> dict[str, int]:
    found = ec2.describe_instance_types(InstanceTypes=types)["InstanceTypes"]
    return {t["InstanceType"]: int(t["VCpuInfo"]["DefaultVCpus"]) for t in found}


def _image(target: PreflightTarget, client: ClientFactory) -> list[Check]:
    d = target.plan.deployment
    pinned = target.setting("imageId")
    parameter = load_aws_deploy().image_parameter(gpu=bool(d.gpu), cpu_arch=d.cpu_arch)
    ec2 = client("ec2")
    if pinned:
        image_id, origin = str(pinned), "pinned by infragen:imageId"
    else:
        ssm = client("ssm")
        try:
            image_id = ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
        except ssm.exceptions.ParameterNotFound:
            return [Check("image", "fail", f"SSM parameter {parameter} does not resolve in {d.region}",
                          fix="pin an image: pulumi config set infragen:imageId ami-...")]
        origin = f"from {parameter}"
    images = ec2.describe_images(Filters=[{"Name": "image-id", "Values": [image_id]}])["Images"]
    if not images:
        return [Check("image", "fail", f"{image_id} ({origin}) is not visible in {d.region}",
                      fix="pin an AMI of this region: pulumi config set infragen:imageId ami-...")]
    image = images[0]
    want = "arm64" if d.cpu_arch == "arm64" else "x86_64"
    if image.get("Architecture") != want:
        return [Check("image", "fail", f"{image_id} ({origin}) is {image.get('Architecture')}, the plan's "
                      f"{d.instance_type} needs {want}")]
    detail = f"{image_id} {image.get('Name', '')} ({origin})"
    if pinned:
        return [Check("image", "ok", detail)]
    stack = f" --stack {target.stack}" if target.stack else ""
    return [Check("image", "warn", detail + "; not pinned, so a new AMI release rolls every node",
                  fix=f"pulumi config set{stack} infragen:imageId {image_id}")]


def _secrets(target: PreflightTarget, client: ClientFactory) -> list[Check]:
    plan, out = target.plan, target.secret_config_checks()
    sm = client("secretsmanager")
    # A stack's secrets carry its name (the AWS program's `plan.secrets.for_stack`); a plan file alone is
    # checked under the plan's own names.
    names = plan.secrets.for_stack(target.stack) if target.stack is not None else plan.secrets
    for name in (names.hf_token_name, names.api_key_name):
        try:
            found = sm.describe_secret(SecretId=name)
        except sm.exceptions.ResourceNotFoundException:
            out.append(Check("secrets", "ok", f"{name}: free; the stack creates it"))
            continue
        tags = {t["Key"]: t["Value"] for t in found.get("Tags", [])}
        owner = tags.get("infragen:stack")
        if found.get("DeletedDate"):
            out.append(Check("secrets", "fail", f"{name} is scheduled for deletion, so the stack cannot create it",
                             fix=f"aws secretsmanager restore-secret --secret-id {name} (then delete it with "
                                 "--force-delete-without-recovery), or wait for the deletion"))
        elif target.stack is not None and owner is not None and owner != target.stack:
            out.append(Check("secrets", "fail", f"{name} belongs to stack {owner}; creating it again fails",
                             fix=f"delete stack {owner}'s secret or deploy under another stack name"))
        elif tags.get("infragen:plan-digest") or tags.get("infragen:workload") == plan.workload:
            out.append(Check("secrets", "ok", f"{name}: exists, created by infragen for {plan.workload}"))
        else:
            out.append(Check("secrets", "fail", f"{name} exists and was not created by infragen; creating it fails",
                             fix="delete or rename that secret, or rename the workload"))
    return out


def _certificate(target: PreflightTarget, client: ClientFactory) -> list[Check]:
    arn = target.setting("certificateArn")
    region = target.plan.deployment.region
    if not arn:
        cidrs = target.setting("allowedCidrs") or [ANYWHERE]
        cidrs = [cidrs] if isinstance(cidrs, str) else cidrs
        if ANYWHERE in cidrs:
            return [Check("certificate", "warn", "no infragen:certificateArn and clients allowed from anywhere: "
                          "the API key crosses the internet in clear text",
                          fix="pulumi config set infragen:certificateArn arn:aws:acm:... (or restrict "
                              "infragen:allowedCidrs)")]
        return [Check("certificate", "ok", "plain HTTP, clients restricted to " + ", ".join(cidrs))]
    parts = str(arn).split(":")
    if len(parts) < 6 or parts[2] != "acm":
        raise InputError(f"{target.source}: infragen:certificateArn {arn!r} is not an ACM certificate ARN")
    if parts[3] != region:
        return [Check("certificate", "fail", f"{arn} is in {parts[3]}; the load balancer is in {region}",
                      fix=f"request or import the certificate in {region}")]
    cert = client("acm").describe_certificate(CertificateArn=str(arn))["Certificate"]
    status = cert.get("Status")
    if status != "ISSUED":
        return [Check("certificate", "fail", f"{cert.get('DomainName')} is {status}, not ISSUED",
                      fix="finish the certificate's validation (DNS record) before deploying")]
    return [Check("certificate", "ok", f"{cert.get('DomainName')} ISSUED")]


def _capacity(target: PreflightTarget, client: ClientFactory) -> list[Check]:
    rid = target.setting("capacityReservationId")
    if not rid:
        return []
    d = target.plan.deployment
    found = client("ec2").describe_capacity_reservations(CapacityReservationIds=[str(rid)])["CapacityReservations"]
    if not found:
        return [Check("capacity", "fail", f"capacity reservation {rid} not found in {d.region}")]
    cr = found[0]
    problems = []
    if cr.get("InstanceType") != d.instance_type:
        problems.append(f"is for {cr.get('InstanceType')}, the plan needs {d.instance_type}")
    if cr.get("State") not in ("active", "scheduled"):
        problems.append(f"is {cr.get('State')}")
    available = int(cr.get("AvailableInstanceCount", 0))
    # A Capacity Block is sold whole: before it starts its count is the block's (EC2 user guide, Capacity Blocks).
    if available < d.nodes:
        problems.append(f"has {available} instance(s) free, the plan needs {d.nodes}")
    zone_id, configured = cr.get("AvailabilityZoneId"), target.setting("capacityReservationZone")
    stack = f" --stack {target.stack}" if target.stack else ""
    zone_fix = f"pulumi config set{stack} infragen:capacityReservationZone {zone_id}"
    detail = f"{rid} in {cr.get('AvailabilityZone')} ({zone_id}, {cr.get('ReservationType', 'default')})"
    if problems:
        return [Check("capacity", "fail", f"{detail} " + "; ".join(problems))]
    if zone_id and configured != zone_id:
        what = "is not set" if not configured else f"is {configured}"
        return [Check("capacity", "fail", f"{detail}: infragen:capacityReservationZone {what}; every node must "
                      "launch in the reservation's zone", fix=zone_fix)]
    if cr.get("State") == "scheduled":
        return [Check("capacity", "warn", f"{detail}: scheduled, starts {cr.get('StartDate')}; launches fail "
                      "before then", fix="deploy after the reservation starts")]
    return [Check("capacity", "ok", f"{detail}: {available} x {d.instance_type} free")]


# --- plumbing ----------------------------------------------------------------------------------------------------


def _guard(name: str, fn: Callable[[], Check]) -> Check:
    return _guard_many(name, lambda: [fn()])[0]


def _guard_many(name: str, fn: Callable[[], list[Check]]) -> list[Check]:
    """Run a check; an AWS error (denied, throttled, no credentials, no network) becomes a failed check."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return fn()
    except ClientError as exc:
        err = exc.response.get("Error", {})
        return [Check(name, "fail", f"{exc.operation_name}: {err.get('Code')}: {err.get('Message')}",
                      fix="grant the caller read access for this call" if "Denied" in str(err.get("Code")) else None)]
    except BotoCoreError as exc:
        return [Check(name, "fail", f"{type(exc).__name__}: {exc}",
                      fix="configure AWS credentials (AWS_PROFILE, aws sso login)")]


def _boto3_clients(region: str) -> ClientFactory:
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise InputError("infragen preflight on AWS needs boto3", fix="pip install 'infragen[preflight]'") from None
    session = boto3.session.Session(region_name=region)
    # Bounded: a few retries and short timeouts, so an unreachable endpoint fails the check instead of hanging.
    config = Config(connect_timeout=5, read_timeout=20, retries={"max_attempts": 3, "mode": "standard"})
    cache: dict[str, Any] = {}

    def client(service: str) -> Any:
        if service not in cache:
            cache[service] = session.client(service, config=config)  # type: ignore[call-overload]
        return cache[service]

    return client
