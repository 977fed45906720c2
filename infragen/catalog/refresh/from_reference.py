"""Convert the researched reference CSVs (`shared/reference/*.csv`) into the packaged catalog YAML, reproducibly.

Run by a maintainer, never at runtime: `python -m infragen.catalog.refresh.from_reference --reference DIR`.
Adds only figures with a source: cited extras from `supplements.yaml`, disk/NIC layout from moto's bundled
DescribeInstanceTypes snapshot. Writes accelerators.yaml, aws.yaml, alicloud.yaml (cpus.yaml is hand-curated).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from infragen.catalog.loader import DATA_FILES, dump_data_file, load_catalog_dir
from infragen.units import gb_to_gib

#: reference GPU name -> canonical id
GPU_IDS: dict[str, str] = {
    "T4": "t4-16gb", "A10": "a10-24gb", "A10G": "a10g-24gb", "L4": "l4-24gb", "L20": "l20-48gb",
    "L40S": "l40s-48gb", "A100-40GB": "a100-40gb", "A100-80GB": "a100-80gb", "H100-SXM": "h100-sxm-80gb",
    "H100-PCIe": "h100-pcie-80gb", "H200": "h200-141gb", "H20": "h20-96gb", "H20?": "h20-96gb",
    "V100": "v100-16gb", "V100-32GB": "v100-32gb", "B200": "b200-180gb", "B300": "b300-288gb",
    "MI300X": "mi300x-192gb",
}

#: family -> CPU model id, only where a source names the CPU (see cpus.yaml for the citations)
CPU_BY_FAMILY: dict[str, str] = {
    "c7i": "xeon-8488c", "m7i": "xeon-8488c", "r7i": "xeon-8488c",
    "c7a": "epyc-genoa", "m7a": "epyc-genoa",
    "c8g": "graviton4", "m8g": "graviton4",
    "gn6i": "xeon-8163", "gn6e": "xeon-8163", "gn6v": "xeon-8163",
    "gn7": "xeon-8269cy",
    "gn7i": "xeon-icelake", "ebmgn7i": "xeon-icelake", "c7": "xeon-icelake", "g7": "xeon-icelake",
    "r7": "xeon-icelake",
    "gn8v": "xeon-sapphire-rapids", "ebmgn8v": "xeon-sapphire-rapids", "gn8is": "xeon-sapphire-rapids",
    "ebmgn8is": "xeon-sapphire-rapids",
    "ebmgn8ia": "epyc-9t34",
    "c8y": "yitian-710", "g8y": "yitian-710",
    "c8i": "xeon-spr-or-emr-alibaba", "g8i": "xeon-spr-or-emr-alibaba", "r8i": "xeon-spr-or-emr-alibaba",
}

KARPENTER_SPECS = ("aws/karpenter-provider-aws@1d92708 website/content/en/docs/reference/instance-types.md "
                   "(AWS DescribeInstanceTypes data of 2026-07-20)")
KARPENTER_PRICE = ("aws/karpenter-provider-aws@1d92708 pkg/providers/pricing/zz_generated.pricing_aws.go "
                   "(us-east-1 Linux on-demand, generated 2026-07-20T13:44:30Z)")
SKYPILOT_SPOT = ("skypilot-org/skypilot-catalog@2c3d7ea7 catalogs/v9/aws/vms.csv (lowest us-east-1 AZ spot; "
                 "snapshot date not recorded; indicative)")
CLOUDPILOT_PRICE = ("cloudpilot-ai/karpenter-provider-alicloud@101a6dc pkg/providers/pricing/"
                    "initial-on-demand-prices.json (2024-10-10; pay-as-you-go hourly, CNY)")
MOTO_SNAPSHOT = "moto {version} bundled DescribeInstanceTypes snapshot (moto/ec2/resources/instance_types.json.gz)"
ALI_VCPU_SOURCE = ("threads_per_core: alibabacloud.com/help/en/elastic-compute-service/latest/instance-type-families "
                   "(updated 2026-02-27: x86 'each vCPU corresponds to a hyperthread of a processor core', Arm 'each "
                   "vCPU corresponds to a physical processor core')")
AWS_PRICE_AS_OF = "2026-07-20"
ALI_PRICE_AS_OF = "2024-10-10"
SPOT_AS_OF = "unknown"  # SkyPilot's file records no date; as_of is required, so say so.


def _rows(path: Path) -> Iterator[dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        yield from csv.DictReader(line for line in fh if not line.startswith("#"))


def _num(text: str) -> float | None:
    text = text.strip()
    return float(text) if text else None


def _int(text: str) -> int | None:
    value = _num(text)
    return None if value is None else int(value)


def _clean(record: dict[str, Any]) -> dict[str, Any]:
    """Drop None and empty values so the YAML shows only sourced figures."""
    return {k: v for k, v in record.items() if v is not None and v != "" and v != []}


def load_supplements(path: Path | None = None) -> dict[str, Any]:
    """Hand-transcribed, cited figures that the reference CSVs lack (see the file's header)."""
    if path is None:
        text = (resources.files("infragen.catalog.refresh") / "supplements.yaml").read_text(encoding="utf-8")
    else:
        text = path.read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(text) or {}
    return data


def load_moto_instance_types() -> tuple[dict[str, dict[str, Any]], str]:
    """moto's bundled DescribeInstanceTypes records (real AWS data) and a citation for them."""
    import moto

    raw = (resources.files("moto.ec2") / "resources" / "instance_types.json.gz").read_bytes()
    data: dict[str, dict[str, Any]] = json.loads(gzip.decompress(raw))
    return data, MOTO_SNAPSHOT.format(version=moto.__version__)


# --------------------------------------------------------------------------------------------- GPUs


def convert_gpus(rows: list[dict[str, str]], supplements: dict[str, Any]) -> list[dict[str, Any]]:
    aliases: dict[str, list[str]] = supplements.get("accelerator_aliases", {})
    driver = supplements.get("accelerator_driver_memory", {})
    driver_mib: dict[str, int] = driver.get("mib", {})
    capability: dict[str, list[str]] = supplements.get("accelerator_compute_capability", {})
    out: list[dict[str, Any]] = []
    for r in rows:
        gpu_id = GPU_IDS[r["name"]]
        interconnect = r["interconnect"]
        # "PCIe (no NVLink on g5)" must not read as NVLink: require a generation number or a bandwidth
        gen_match = re.search(r"nvlink (\d)", interconnect.lower())
        nvlink = r["vendor"] == "NVIDIA" and (gen_match is not None or bool(r["nvlink_bandwidth_gbps"]))
        generation = int(gen_match.group(1)) if gen_match else None
        pcie_gb_per_s = None
        if not nvlink and "(64 GB/s)" in interconnect:
            pcie_gb_per_s = 64.0
        link_gb_per_s = _num(r["nvlink_bandwidth_gbps"]) if nvlink else pcie_gb_per_s
        out.append(_clean({
            "id": gpu_id,
            "display_name": f"{r['vendor']} {r['name']}",
            "vendor": r["vendor"].lower(),
            "architecture": r["architecture"],
            "memory_gib": _num(r["memory_gib"]),
            "memory_type": r["memory_type"] or None,
            "memory_bandwidth_gb_per_s": _num(r["memory_bandwidth_gbps"]),
            "fp16_tflops": _num(r["fp16_dense_tflops"]),
            "bf16_tflops": _num(r["bf16_dense_tflops"]),
            "fp8_tflops": _num(r["fp8_dense_tflops"]),
            "int8_tops": _num(r["int8_dense_tops"]),
            "interconnect": "nvlink" if nvlink else "pcie",
            "nvlink_generation": generation if nvlink else None,
            # a non-NVLink fabric figure (MI300X Infinity Fabric aggregate) stays in the notes only
            "interconnect_gb_per_s": link_gb_per_s,
            "tdp_w": _num(r["tdp_w"]),
            "source": r["source"],
            "confidence": r["confidence"],
            "notes": f"Interconnect as listed: {interconnect}. {r['notes']}".strip(),
            "aliases": aliases.get(gpu_id, []),
            "driver_memory_mib": driver_mib.get(gpu_id),
            "driver_memory_source": driver["source"] if gpu_id in driver_mib else None,
            "compute_capability": capability.get(gpu_id, [None])[0],
            "compute_capability_source": capability.get(gpu_id, [None, None])[1],
        }))
    figures: dict[str, dict[str, Any]] = supplements.get("accelerator_figures", {})
    for record in out:
        extra = dict(figures.get(record["id"], {}))
        if extra:
            record["source"] = f"{record['source']}; {' '.join(extra.pop('source').split())}"
            note = extra.pop("notes", "")
            if note:
                record["notes"] = f"{record['notes']} {' '.join(note.split())}".strip()
            record.update(extra)
    out += supplements.get("extra_accelerators", [])
    return out


# ---------------------------------------------------------------------------------------------- AWS


def _moto_extras(record: dict[str, Any] | None, citation: str) -> dict[str, Any]:
    if record is None:
        return {}
    extras: dict[str, Any] = {}
    disks = (record.get("InstanceStorageInfo") or {}).get("Disks") or []
    if disks:
        extras["local_nvme_count"] = sum(int(d["Count"]) for d in disks)
    net = record.get("NetworkInfo") or {}
    if net.get("MaximumNetworkCards"):
        extras["network_cards"] = int(net["MaximumNetworkCards"])
    perf = str(net.get("NetworkPerformance", ""))
    if perf.lower().startswith("up to "):
        extras["network_burst_gbps"] = float(perf.split()[2])
    vcpu = record.get("VCpuInfo") or {}
    if vcpu.get("DefaultCores"):
        extras["physical_cores"] = int(vcpu["DefaultCores"])
    if vcpu.get("DefaultThreadsPerCore"):
        extras["threads_per_core"] = int(vcpu["DefaultThreadsPerCore"])
    extras["_citation"] = citation
    return extras


def convert_aws(
    rows: list[dict[str, str]], supplements: dict[str, Any], moto_data: dict[str, dict[str, Any]], moto_cite: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """AWS records and the disagreements found between the reference CSV and moto's snapshot."""
    extra_prices: dict[str, list[dict[str, Any]]] = supplements.get("aws_prices", {})
    out: list[dict[str, Any]] = []
    conflicts: list[str] = []
    for r in rows:
        itype = r["instance_type"]
        gpu = GPU_IDS[r["gpu"]] if r["gpu"] else None
        efa_n = _int(r["efa_interfaces"]) or 0
        moto_rec = moto_data.get(itype)
        extras = _moto_extras(moto_rec, moto_cite)
        if moto_rec is not None:
            m_vcpus = moto_rec.get("VCpuInfo", {}).get("DefaultVCpus")
            if m_vcpus is not None and _int(r["vcpus"]) not in (None, m_vcpus):
                conflicts.append(f"{itype}: vcpus CSV {r['vcpus']} vs moto {m_vcpus} (CSV kept)")
            m_efa = (moto_rec.get("NetworkInfo", {}).get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)
            if r["efa"] and m_efa != efa_n:
                conflicts.append(f"{itype}: EFA interfaces CSV {efa_n} vs moto {m_efa} (CSV kept)")
        else:
            conflicts.append(f"{itype}: not in the moto snapshot (no disk count / network card layout)")
        citation = extras.pop("_citation", None)
        source = r["source"].replace("specs: ", "", 1).split("; on-demand:")[0]
        if citation:
            source += f"; NVMe disk count, network cards, cores/threads, 'up to' bandwidth: {citation}"
        local_gb = _num(r["local_nvme_gb"]) or 0.0
        if local_gb and "local_nvme_count" not in extras:
            conflicts.append(f"{itype}: {local_gb} GB local NVMe but no disk count - local disk left out")
            local_gb = 0.0
        prices: list[dict[str, Any]] = []
        on_demand = _num(r["price_usd_hour_on_demand"])
        spot = _num(r["spot_price_usd_hour"])
        if on_demand is not None or spot is not None:
            prices.append(_clean({
                "region": "us-east-1",
                "on_demand_usd_per_hour": on_demand,
                "spot_usd_per_hour": spot,
                "source": KARPENTER_PRICE if on_demand is not None else SKYPILOT_SPOT,
                "as_of": AWS_PRICE_AS_OF if on_demand is not None else SPOT_AS_OF,
                "spot_source": f"{SKYPILOT_SPOT}; {r['spot_price_detail']}" if spot is not None else None,
            }))
        prices += extra_prices.get(itype, [])
        clock_mhz = _num(r["cpu_sustained_clock_mhz"])
        spec = dict(supplements.get("aws_specs", {}).get(itype, {}))
        if spec:
            source += "; " + spec.pop("source")
        out.append(_clean({
            "id": itype,
            "cloud": "aws",
            "family": r["family"],
            "gpu": gpu,
            "gpu_count": _int(r["gpu_count"]) or 0,
            "gpu_memory_gib": float(r["gpu_memory_mib_each"]) / 1024 if gpu else None,
            "gpu_memory_source": "AWS DescribeInstanceTypes GpuInfo MemoryInfo.SizeInMiB / 1024" if gpu else None,
            "vcpus": _int(r["vcpus"]),
            "memory_gib": _num(r["memory_gib"]),
            "cpu": CPU_BY_FAMILY.get(r["family"]),
            "cpu_arch": r["cpu_arch"] or "x86_64",
            "cpu_sustained_clock_ghz": clock_mhz / 1000 if clock_mhz else None,
            "local_nvme_count": extras.get("local_nvme_count", 0) if local_gb else 0,
            "local_nvme_gib": round(gb_to_gib(local_gb), 2),
            "network_gbps": _num(r["network_gbps"]),
            "network_burst_gbps": extras.get("network_burst_gbps"),
            "rdma": "efa" if efa_n > 0 else "none",
            "efa_interfaces": efa_n,
            "network_cards": extras.get("network_cards", 1),
            "physical_cores": extras.get("physical_cores"),
            "threads_per_core": extras.get("threads_per_core"),
            "prices": prices,
            "source": source,
            "notes": "local_nvme_gib converted from the API's GB (TotalSizeInGB)." if local_gb else "",
            **spec,
        }))
    return out, conflicts


# ------------------------------------------------------------------------------------------ Alibaba


def convert_alicloud(rows: list[dict[str, str]], supplements: dict[str, Any]) -> list[dict[str, Any]]:
    unnamed: dict[str, str] = supplements.get("alicloud_unnamed_gpus", {})
    specs: dict[str, dict[str, Any]] = supplements.get("alicloud_specs", {})
    extra_prices: dict[str, list[dict[str, Any]]] = supplements.get("alicloud_prices", {})
    out: list[dict[str, Any]] = []
    for r in rows:
        itype = r["instance_type"]
        gpu_count = _int(r["gpu_count"]) or 0
        if r["gpu"]:
            gpu: str | None = GPU_IDS[r["gpu"]]
        elif gpu_count:
            gpu = unnamed.get(f"{r['family']}:{r['gpu_memory_gb_each']}")
            if gpu is None:
                raise SystemExit(f"{itype}: unnamed GPU, add 'family:memory' to alicloud_unnamed_gpus")
        else:
            gpu = None
        prices: list[dict[str, Any]] = []
        cny = _num(r["price_cny_hour"])
        if cny:
            prices.append({"region": r["price_region"], "on_demand_cny_per_hour": cny,
                           "source": CLOUDPILOT_PRICE, "as_of": ALI_PRICE_AS_OF})
        seen = {p["region"] for p in prices}
        prices += [p for p in extra_prices.get(itype, []) if p["region"] not in seen]
        for listing in supplements.get("alicloud_price_lists", []):
            for region, table in listing["regions"].items():
                value = table.get(itype)
                if value and region not in {p["region"] for p in prices}:
                    prices.append({"region": region, "on_demand_cny_per_hour": float(value),
                                   "source": " ".join(listing["source"].split()), "as_of": listing["as_of"]})
        notes = [r["notes"]] if r["notes"] else []
        if r["erdma"] and r["erdma"] != "yes":
            notes.append(f"eRDMA: {r['erdma']}.")
        arch = r["cpu_arch"] or "x86_64"
        record = {
            "id": itype,
            "cloud": "alicloud",
            "family": r["family"],
            "gpu": gpu,
            "gpu_count": gpu_count,
            "gpu_memory_gib": _num(r["gpu_memory_gb_each"]) if gpu else None,
            "gpu_memory_source": "Alibaba doc GPU memory label (GB), as the vendor labels it" if gpu else None,
            "vcpus": _int(r["vcpus"]),
            "memory_gib": _num(r["memory_gib"]),
            "cpu": CPU_BY_FAMILY.get(r["family"]),
            "cpu_arch": arch,
            # Alibaba: an x86 vCPU is one hyperthread, an Arm vCPU one physical core (ALI_VCPU_SOURCE)
            "threads_per_core": 2 if arch == "x86_64" else 1,
            "network_gbps": _num(r["network_gbps"]),
            "network_burst_gbps": _num(r["network_burst_gbps"]),
            "rdma": "erdma" if r["erdma"] == "yes" else "none",
            "prices": prices,
            # a row whose only source is the price list has no spec source (its price carries the citation)
            "source": "" if r["source"].startswith("price:") else r["source"].split("; price:")[0],
            "notes": " ".join(notes),
        }
        spec = specs.get(itype)
        if spec:
            record.update({k: v for k, v in spec.items() if k != "source"})
            record["source"] = "; ".join(s for s in (record["source"], spec["source"]) if s)
        record["source"] = "; ".join(s for s in (record["source"], ALI_VCPU_SOURCE) if s)
        if record["vcpus"] is None and "not found" not in record["notes"].lower():
            record["notes"] = (record["notes"] + " vCPU/memory/network not found in a stored Alibaba spec table; "
                               "left absent on purpose.").strip()
        out.append(_clean(record))
    return out


# -------------------------------------------------------------------------------------------- main


def build(reference: Path, supplements: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """File name -> file content for accelerators.yaml, aws.yaml and alicloud.yaml; plus conflict notes."""
    gpus = convert_gpus(list(_rows(reference / "gpus.csv")), supplements)
    moto_data, moto_cite = load_moto_instance_types()
    aws, conflicts = convert_aws(list(_rows(reference / "aws_instances.csv")), supplements, moto_data, moto_cite)
    skip = set(supplements.get("alicloud_skip", []))
    ali_rows = [r for r in _rows(reference / "alicloud_instances.csv") if r["instance_type"] not in skip]
    columns = list(ali_rows[0]) if ali_rows else []
    for extra in supplements.get("alicloud_extra_instances", []):
        row = dict.fromkeys(columns, "")
        row.update(gpu_count="0", notes="vCPU/memory/network not found in a stored Alibaba spec table - left "
                   "absent on purpose (price only).", **extra)
        ali_rows.append(row)
    ali = convert_alicloud(ali_rows, supplements)
    fx = supplements["fx"]
    files = {
        "accelerators.yaml": {
            "schema_version": 1,
            "source": "shared/reference/gpus.csv (figures and per-row sources as researched; see each record)",
            "as_of": "2026-08-22",
            "notes": "Generated by infragen/catalog/refresh/from_reference.py; TFLOPS/TOPS are dense peaks.",
            "accelerators": gpus,
        },
        "aws.yaml": {
            "schema_version": 1,
            "source": f"shared/reference/aws_instances.csv ({KARPENTER_SPECS}); extras: {moto_cite}",
            "as_of": AWS_PRICE_AS_OF,
            "notes": "Generated by from_reference.py. network_gbps is the baseline, not the 'up to' figure.",
            "cloud": "aws",
            "instances": aws,
        },
        "alicloud.yaml": {
            "schema_version": 1,
            "source": "shared/reference/alicloud_instances.csv (Alibaba ECS docs; prices " + CLOUDPILOT_PRICE + ")",
            "as_of": ALI_PRICE_AS_OF,
            "notes": "Generated by from_reference.py. Prices are kept in CNY; USD = CNY x usd_per_cny.",
            "cloud": "alicloud",
            "usd_per_cny": fx["usd_per_cny"],
            "fx_source": fx["source"],
            "instances": ali,
        },
    }
    return files, conflicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reference", type=Path, required=True, help="directory holding gpus.csv and friends")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: the packaged data)")
    parser.add_argument("--supplements", type=Path, default=None)
    args = parser.parse_args(argv)
    out = args.out or Path(str(resources.files("infragen.catalog") / "data"))
    out.mkdir(parents=True, exist_ok=True)
    files, conflicts = build(args.reference, load_supplements(args.supplements))
    for name, content in files.items():
        (out / name).write_text(dump_data_file(content), encoding="utf-8")
    if not (out / "cpus.yaml").exists():
        packaged = resources.files("infragen.catalog") / "data" / "cpus.yaml"
        (out / "cpus.yaml").write_text(packaged.read_text(encoding="utf-8"), encoding="utf-8")
    catalog = load_catalog_dir(out)  # refuse to leave an invalid catalog behind silently
    for line in conflicts:
        print(f"note: {line}")
    print(f"wrote {', '.join(n for n in DATA_FILES if n != 'cpus.yaml')} to {out}: "
          f"{len(catalog.accelerators)} accelerators, {len(catalog.instances_for('aws'))} AWS and "
          f"{len(catalog.instances_for('alicloud'))} Alibaba instance types")
    if args.out is None:  # the packaged data changed: the pre-built catalog.json follows it
        from infragen.catalog import compact

        return compact.main([])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
