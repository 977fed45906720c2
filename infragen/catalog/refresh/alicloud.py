"""Refresh the Alibaba Cloud data file with the official ECS SDK (DescribeInstanceTypes, DescribePrice).

Writes a file for review; never called at runtime. The client is an argument (tests replay recorded API
responses through the SDK's own models); alibabacloud_ecs20140526 is imported only inside functions.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Mapping
from typing import Any

Progress = Callable[[str, int, int], None]
DESCRIBE_BATCH = 10  # DescribeInstanceTypes takes up to 10 InstanceTypes.N per call

#: DescribeInstanceTypes GPUSpec (+ GB per GPU) -> accelerator id
API_GPU_SPECS: dict[tuple[str, float], str] = {
    ("NVIDIA T4", 16): "t4-16gb", ("NVIDIA A10", 24): "a10-24gb", ("NVIDIA V100", 16): "v100-16gb",
    ("NVIDIA V100", 32): "v100-32gb", ("NVIDIA A100", 40): "a100-40gb", ("NVIDIA L20", 48): "l20-48gb",
}


def _noop(step: str, done: int, total: int) -> None:
    return None


def default_client(region: str) -> Any:
    """An ECS client for `region` with credentials from ALIBABA_CLOUD_ACCESS_KEY_ID / _SECRET."""
    from alibabacloud_ecs20140526.client import Client
    from alibabacloud_tea_openapi.models import Config

    key, secret = os.environ.get("ALIBABA_CLOUD_ACCESS_KEY_ID"), os.environ.get("ALIBABA_CLOUD_ACCESS_KEY_SECRET")
    config = Config(access_key_id=key, access_key_secret=secret, region_id=region,
                    endpoint=f"ecs.{region}.aliyuncs.com")
    return Client(config)


def describe_instance_types(client: Any, instance_types: list[str]) -> dict[str, dict[str, Any]]:
    """DescribeInstanceTypes records (API field names) by instance type id."""
    from alibabacloud_ecs20140526 import models

    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(instance_types), DESCRIBE_BATCH):
        token: str | None = None
        while True:
            req = models.DescribeInstanceTypesRequest(instance_types=instance_types[start:start + DESCRIBE_BATCH],
                                                      next_token=token, max_results=DESCRIBE_BATCH)
            body = client.describe_instance_types(req).body.to_map()
            for rec in (body.get("InstanceTypes") or {}).get("InstanceType", []):
                found[rec["InstanceTypeId"]] = rec
            token = body.get("NextToken") or None
            if not token:
                break
    return found


def spec_from_describe(rec: Mapping[str, Any]) -> dict[str, Any]:
    """InstanceType fields the ECS API states, in catalog units (bandwidth is Kbit/s in the API)."""
    out: dict[str, Any] = {"vcpus": rec.get("CpuCoreCount"), "memory_gib": rec.get("MemorySize")}
    arch = str(rec.get("CpuArchitecture", "X86")).upper()
    out["cpu_arch"] = "arm64" if arch == "ARM" else "x86_64"
    if rec.get("ThreadsPerCore"):
        out["threads_per_core"] = int(rec["ThreadsPerCore"])
    n_gpu = int(rec.get("GPUAmount") or 0)
    if n_gpu:
        gb = float(rec.get("GPUMemorySize") or 0)
        out.update(gpu=API_GPU_SPECS.get((str(rec.get("GPUSpec", "")), gb)), gpu_count=n_gpu,
                   gpu_memory_gib=gb or None, _api_gpu=rec.get("GPUSpec"))
    else:
        out.update(gpu=None, gpu_count=0, gpu_memory_gib=None)
    rx_kbps = rec.get("InstanceBandwidthRx")
    out["network_gbps"] = rx_kbps / 1_000_000 if rx_kbps else None
    if int(rec.get("EriQuantity") or 0) > 0:
        out["rdma"] = "erdma"
    if (rec.get("NetworkCards") or {}).get("NetworkCardInfo"):
        out["network_cards"] = len(rec["NetworkCards"]["NetworkCardInfo"])
    return out


def pay_as_you_go_price(client: Any, region: str, instance_type: str) -> tuple[float, str] | None:
    """Hourly pay-as-you-go TradePrice and its currency from DescribePrice, None when not sold there."""
    from alibabacloud_ecs20140526 import models

    req = models.DescribePriceRequest(region_id=region, resource_type="instance", instance_type=instance_type,
                                      price_unit="Hour", period=1)
    try:
        body = client.describe_price(req).body.to_map()
    except Exception as exc:  # Tea SDK raises TeaException; only "not sold here" is expected
        if "InvalidInstanceType" in str(exc) or "NotSupported" in str(exc):
            return None
        raise
    price = (body.get("PriceInfo") or {}).get("Price") or {}
    value = price.get("TradePrice", price.get("OriginalPrice"))
    if not value:
        return None
    return float(value), str(price.get("Currency", "CNY"))


def refresh_alicloud_file(
    existing: Mapping[str, Any],
    *,
    client_for_region: Callable[[str], Any],
    regions: list[str],
    now: dt.datetime | None = None,
    progress: Progress = _noop,
) -> tuple[dict[str, Any], list[str]]:
    """A new alicloud.yaml content (prices in CNY, as listed) and notes for the reviewer."""
    now = now or dt.datetime.now(dt.UTC)
    today = now.date().isoformat()
    records = [dict(r) for r in existing["instances"]]
    types = [r["id"] for r in records]
    total = 1 + len(regions) * len(types)
    specs = describe_instance_types(client_for_region(regions[0]), types)
    progress("DescribeInstanceTypes", 1, total)
    notes = [f"{t}: DescribeInstanceTypes returned nothing, specs kept" for t in types if t not in specs]
    prices: dict[tuple[str, str], tuple[float, str]] = {}
    done = 1
    for region in regions:
        client = client_for_region(region)
        for itype in types:
            found = pay_as_you_go_price(client, region, itype)
            if found is not None:
                prices[(itype, region)] = found
            done += 1
            progress(f"DescribePrice {region}", done, total)
    out_records: list[dict[str, Any]] = []
    for rec in records:
        itype, new = rec["id"], dict(rec)
        if itype in specs:
            spec = spec_from_describe(specs[itype])
            api_gpu = spec.pop("_api_gpu", None)
            if spec.get("gpu_count") and spec.get("gpu") is None:
                spec["gpu"] = rec.get("gpu")
                notes.append(f"{itype}: API GPUSpec {api_gpu!r} not mapped to an accelerator id, "
                             f"kept {rec.get('gpu')!r}")
            for key, value in spec.items():
                if value is not None and rec.get(key) != value:
                    if key in rec:
                        notes.append(f"{itype}: {key} {rec.get(key)!r} -> {value!r}")
                    new[key] = value
            new["source"] = (f"Alibaba ECS DescribeInstanceTypes ({regions[0]}, {today}); "
                             f"previous: {rec.get('source', '')}")
        by_region = {p["region"]: dict(p) for p in rec.get("prices", [])}
        for region in regions:
            hit = prices.get((itype, region))
            if hit is None:
                continue
            value, currency = hit
            if currency != "CNY":
                notes.append(f"{itype} {region}: DescribePrice answered in {currency}, not CNY - price not written")
                continue
            by_region[region] = {
                "region": region, "on_demand_cny_per_hour": value, "as_of": today,
                "source": f"Alibaba ECS DescribePrice (PayAsYouGo, Hour, {region}, {today}; TradePrice)"}
        new["prices"] = [by_region[r] for r in sorted(by_region)]
        out_records.append(new)
    content = dict(existing)
    content["as_of"] = today
    content["source"] = (f"Alibaba ECS DescribeInstanceTypes / DescribePrice ({today}) via infragen catalog refresh; "
                         f"previous: {existing.get('source', '')}")
    content["instances"] = out_records
    return content, notes
