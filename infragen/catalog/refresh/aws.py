"""Refresh the AWS data file from EC2 DescribeInstanceTypes, DescribeSpotPriceHistory and Pricing GetProducts.

Writes a file for review; never called at runtime. Clients are arguments (tests pass moto-backed ones);
boto3 is imported only in `default_clients`. Figures the APIs do not return keep their values and sources.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from infragen.units import gb_to_gib

Progress = Callable[[str, int, int], None]
DESCRIBE_BATCH = 100  # DescribeInstanceTypes accepts at most 100 InstanceTypes per call

#: AWS API GPU Name -> accelerator id (the API says "H100" for the SXM part on p5, "A100" for both sizes)
API_GPU_NAMES: dict[tuple[str, int], str] = {
    ("T4", 16384): "t4-16gb", ("A10G", 22888): "a10g-24gb", ("L4", 22888): "l4-24gb", ("L40S", 45776): "l40s-48gb",
    ("V100", 16384): "v100-16gb", ("V100", 32768): "v100-32gb", ("A100", 40960): "a100-40gb",
    ("A100", 81920): "a100-80gb", ("H100", 81920): "h100-sxm-80gb", ("H200", 144384): "h200-141gb",
    ("B200", 183359): "b200-180gb", ("B300", 275040): "b300-288gb",
}


def _noop(step: str, done: int, total: int) -> None:
    return None


def default_clients(region: str) -> tuple[Callable[[str], Any], Any]:
    """(ec2 client factory by region, pricing client). The Pricing API answers from us-east-1."""
    import boto3

    return (lambda r: boto3.client("ec2", region_name=r)), boto3.client("pricing", region_name="us-east-1")


def _invalid_type(exc: Exception) -> bool:
    from botocore.exceptions import ClientError

    return isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") == "InvalidInstanceType"


def describe_instance_types(ec2: Any, instance_types: list[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """DescribeInstanceTypes records by type, plus the types the region does not offer."""
    from botocore.exceptions import ClientError

    found: dict[str, dict[str, Any]] = {}
    missing: list[str] = []
    for start in range(0, len(instance_types), DESCRIBE_BATCH):
        batch = instance_types[start:start + DESCRIBE_BATCH]
        try:
            for page in ec2.get_paginator("describe_instance_types").paginate(InstanceTypes=batch):
                for rec in page["InstanceTypes"]:
                    found[rec["InstanceType"]] = rec
        except ClientError as exc:  # one type the region lacks fails the whole batch
            if not _invalid_type(exc):
                raise
            for itype in batch:  # retry one by one to find which types are not offered
                try:
                    for rec in ec2.describe_instance_types(InstanceTypes=[itype])["InstanceTypes"]:
                        found[rec["InstanceType"]] = rec
                except ClientError as inner:
                    if not _invalid_type(inner):
                        raise
                    missing.append(itype)
    return found, missing


def spec_from_describe(rec: Mapping[str, Any]) -> dict[str, Any]:
    """InstanceType fields the EC2 API states, in catalog units."""
    out: dict[str, Any] = {}
    vcpu = rec.get("VCpuInfo", {})
    out["vcpus"] = vcpu.get("DefaultVCpus")
    out["physical_cores"] = vcpu.get("DefaultCores")
    out["threads_per_core"] = vcpu.get("DefaultThreadsPerCore")
    mem = rec.get("MemoryInfo", {}).get("SizeInMiB")
    out["memory_gib"] = mem / 1024 if mem else None
    proc = rec.get("ProcessorInfo", {})
    archs = proc.get("SupportedArchitectures", [])
    out["cpu_arch"] = "arm64" if "arm64" in archs else "x86_64"
    out["cpu_sustained_clock_ghz"] = proc.get("SustainedClockSpeedInGhz")
    gpus = rec.get("GpuInfo", {}).get("Gpus", [])
    if gpus:
        g = gpus[0]
        mib = int(g.get("MemoryInfo", {}).get("SizeInMiB", 0))
        out["gpu"] = API_GPU_NAMES.get((g.get("Name", ""), mib))
        out["gpu_count"] = int(g.get("Count", 0))
        out["gpu_memory_gib"] = mib / 1024 if mib else None
        out["_api_gpu_name"] = g.get("Name")
    else:
        out.update(gpu=None, gpu_count=0, gpu_memory_gib=None)
    storage = rec.get("InstanceStorageInfo") or {}
    disks = storage.get("Disks") or []
    out["local_nvme_count"] = sum(int(d.get("Count", 0)) for d in disks)
    out["local_nvme_gib"] = round(gb_to_gib(float(storage.get("TotalSizeInGB", 0))), 2)
    net = rec.get("NetworkInfo", {})
    cards = net.get("NetworkCards") or []
    perf = str(net.get("NetworkPerformance", ""))
    words = perf.split()
    if len(words) == 2 and words[1] == "Gigabit" and words[0].replace(".", "", 1).isdigit():
        # fixed-rate types: the instance-level figure is the total (g6e.48xlarge "400 Gigabit" over 4 cards
        # of 400 each; summing the cards would claim 1600)
        out["network_gbps"] = float(words[0])
    else:  # "Up to N Gigabit": the baseline is what the card guarantees
        out["network_gbps"] = sum(float(c.get("BaselineBandwidthInGbps", 0)) for c in cards) or None
    out["network_burst_gbps"] = float(words[2]) if perf.lower().startswith("up to ") else None
    out["network_cards"] = int(net.get("MaximumNetworkCards", 1) or 1)
    efa = int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)) if net.get("EfaSupported") else 0
    out["efa_interfaces"] = efa
    out["rdma"] = "efa" if efa else "none"
    return out


def spot_prices(ec2: Any, instance_types: list[str], now: dt.datetime) -> dict[str, tuple[float, str]]:
    """Lowest current Linux spot price per type across the region's AZs: type -> (USD/h, 'az=price;...')."""
    by_type: dict[str, dict[str, float]] = {}
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=instance_types, ProductDescriptions=["Linux/UNIX", "Linux/UNIX (Amazon VPC)"], StartTime=now)
    for page in pages:
        for item in page["SpotPriceHistory"]:
            price = float(item["SpotPrice"])
            if price <= 0:
                continue
            zones = by_type.setdefault(item["InstanceType"], {})
            az = item["AvailabilityZone"]
            zones[az] = min(price, zones.get(az, price))
    return {t: (min(z.values()), ";".join(f"{a}={p}" for a, p in sorted(z.items()))) for t, z in by_type.items()}


def on_demand_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """GetProducts filters for the plain Linux, shared-tenancy, no-licence, used-capacity hourly price."""
    terms = {"instanceType": instance_type, "regionCode": region, "operatingSystem": "Linux", "tenancy": "Shared",
             "preInstalledSw": "NA", "capacitystatus": "Used", "licenseModel": "No License required"}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in terms.items()]


def parse_get_products(pages: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """(instance type, region) -> on-demand USD/hour from GetProducts pages (PriceList holds JSON strings).

    Keeps only Linux / Shared / NA / Used / no-licence products and positive hourly USD dimensions, so a
    reservation or Windows row that slips through the filters never becomes the price.
    """
    prices: dict[tuple[str, str], float] = {}
    for page in pages:
        for raw in page.get("PriceList", []):
            item = json.loads(raw) if isinstance(raw, str) else raw
            attrs = item.get("product", {}).get("attributes", {})
            if (attrs.get("operatingSystem"), attrs.get("tenancy"), attrs.get("preInstalledSw"),
                    attrs.get("capacitystatus")) != ("Linux", "Shared", "NA", "Used"):
                continue
            if attrs.get("licenseModel", "No License required") != "No License required":
                continue
            key = (attrs.get("instanceType", ""), attrs.get("regionCode", ""))
            for term in item.get("terms", {}).get("OnDemand", {}).values():
                for dim in term.get("priceDimensions", {}).values():
                    usd = float(dim.get("pricePerUnit", {}).get("USD", "0"))
                    if usd > 0 and dim.get("unit", "Hrs") in ("Hrs", "Hours"):
                        prices[key] = usd
    return prices


def on_demand_prices(pricing: Any, instance_types: list[str], region: str,
                     progress: Progress, offset: int, total: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, itype in enumerate(instance_types):
        pages = pricing.get_paginator("get_products").paginate(
            ServiceCode="AmazonEC2", Filters=on_demand_filters(itype, region), FormatVersion="aws_v1")
        for (t, r), usd in parse_get_products(pages).items():
            if t == itype and r == region:
                out[itype] = usd
        progress(f"on-demand prices {region}", offset + k + 1, total)
    return out


def refresh_aws_file(
    existing: Mapping[str, Any],
    *,
    ec2_for_region: Callable[[str], Any],
    pricing: Any | None,
    regions: list[str],
    now: dt.datetime | None = None,
    progress: Progress = _noop,
) -> tuple[dict[str, Any], list[str]]:
    """A new aws.yaml content from the live APIs, and notes for the reviewer.

    `existing` is the current file (parsed YAML): its instance list decides which types are refreshed, and
    its figures the APIs do not state (GPU id when the API name is ambiguous, CPU model, sources) are kept.
    With `pricing` None, on-demand prices are kept as they were (moto cannot answer GetProducts).
    """
    now = now or dt.datetime.now(dt.UTC)
    today = now.date().isoformat()
    records = [dict(r) for r in existing["instances"]]
    types = [r["id"] for r in records]
    total = 1 + len(regions) * (1 + (len(types) if pricing is not None else 0))
    done = 0
    specs, missing = describe_instance_types(ec2_for_region(regions[0]), types)
    done += 1
    progress("DescribeInstanceTypes", done, total)
    notes: list[str] = [f"{t}: not offered in {regions[0]}, specs kept from the previous file" for t in missing]
    spot_by_region: dict[str, dict[str, tuple[float, str]]] = {}
    od_by_region: dict[str, dict[str, float]] = {}
    for region in regions:
        spot_by_region[region] = spot_prices(ec2_for_region(region), types, now)
        done += 1
        progress(f"spot prices {region}", done, total)
        if pricing is not None:
            od_by_region[region] = on_demand_prices(pricing, types, region, progress, done, total)
            done += len(types)
    api_source = f"AWS EC2 DescribeInstanceTypes ({regions[0]}, {today})"
    out_records: list[dict[str, Any]] = []
    for rec in records:
        itype = rec["id"]
        new = dict(rec)
        if itype in specs:
            spec = spec_from_describe(specs[itype])
            api_gpu = spec.pop("_api_gpu_name", None)
            if spec.get("gpu_count") and spec.get("gpu") is None:
                spec["gpu"] = rec.get("gpu")  # keep the reviewed id; flag it
                notes.append(f"{itype}: API GPU {api_gpu!r} not mapped to an accelerator id, kept {rec.get('gpu')!r}")
            for key, value in spec.items():
                if value is not None and rec.get(key) != value:
                    if key in rec:
                        notes.append(f"{itype}: {key} {rec.get(key)!r} -> {value!r}")
                    new[key] = value
            if (new.get("local_nvme_gib") or 0) == 0:
                new["local_nvme_count"] = 0
            old_source = rec.get("source", "")
            new["source"] = api_source + ("; previous: " + old_source if old_source else "")
        new["prices"] = _merge_prices(rec.get("prices", []), itype, regions, spot_by_region, od_by_region, today)
        out_records.append(new)
    content = dict(existing)
    content["as_of"] = today
    content["source"] = (f"AWS EC2 DescribeInstanceTypes / DescribeSpotPriceHistory"
                         f"{' / Pricing GetProducts' if pricing is not None else ''} ({today}) via "
                         f"infragen catalog refresh; previous: {existing.get('source', '')}")
    content["instances"] = out_records
    return content, notes


def _merge_prices(
    old: list[dict[str, Any]], itype: str, regions: list[str], spot_by_region: Mapping[str, Mapping[str, Any]],
    od_by_region: Mapping[str, Mapping[str, float]], today: str,
) -> list[dict[str, Any]]:
    by_region = {p["region"]: dict(p) for p in old}
    for region in regions:
        price = by_region.get(region, {"region": region})
        od = od_by_region.get(region, {}).get(itype)
        if od is not None:
            price.update(on_demand_usd_per_hour=od, as_of=today,
                         source=f"AWS Pricing GetProducts (Linux, Shared, on-demand, {region}, {today})")
        spot = spot_by_region.get(region, {}).get(itype)
        if spot is not None:
            price["spot_usd_per_hour"] = spot[0]
            price["spot_source"] = f"AWS EC2 DescribeSpotPriceHistory ({region}, {today}, lowest AZ): {spot[1]}"
            if "source" not in price:
                price.update(source=price["spot_source"], as_of=today)
        if "source" in price:
            by_region[region] = price
    return [by_region[r] for r in sorted(by_region)]
