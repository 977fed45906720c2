"""`infragen catalog`: list instance types with prices, list GPUs, refresh the data files from the cloud APIs.

Presentation only: filtering and rows come from the Catalog API; the refresh logic lives in infragen.catalog.refresh.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import click

from infragen.catalog import Catalog, InstanceType, load_catalog
from infragen.catalog.availability import Availability, load_availability
from infragen.errors import InputError, UnknownNameError

CLOUD_CHOICE = click.Choice(["aws", "alicloud"])
FORMAT_CHOICE = click.Choice(["table", "json"])
#: top-level modules whose exceptions are cloud API / credential failures (shown as Error:, exit 2)
SDK_ERROR_MODULES = {"botocore", "boto3", "Tea", "darabonba", "alibabacloud_tea_openapi"}


def catalog_rows(
    catalog: Catalog,
    *,
    cloud: str | None = None,
    region: str | None = None,
    gpu: str | None = None,
    min_gpu_memory_gib: float | None = None,
    availability: Mapping[tuple[str, str], Availability] | None = None,
) -> list[dict[str, Any]]:
    """One row per instance type x region price; unpriced types (without --region) get region/price None.
    `sold_in` lists the regions `availability` says sell the type (None where it has no data)."""
    if region is not None:
        clouds = [cloud] if cloud else ["aws", "alicloud"]
        known = sorted({r for c in clouds for r in catalog.known_regions(c)})
        if region not in known:
            raise UnknownNameError("region", region, known, where="--region")
        priced = sorted({r for c in clouds for r in catalog.regions(c)})
        if region not in priced:
            raise InputError(f"--region: {region!r} is a known region, but the catalog has no price there "
                             f"(priced regions: {', '.join(priced)})",
                             fix="plan there with your own price: `prices:` in the workload or --prices FILE")
    gpu_id = catalog.accelerator(gpu).id if gpu is not None else None
    rows: list[dict[str, Any]] = []
    for inst in catalog.instances_for(cloud, region):
        if gpu_id is not None and inst.gpu != gpu_id:
            continue
        if min_gpu_memory_gib is not None and (inst.gpu_memory_gib or 0) < min_gpu_memory_gib:
            continue
        rows += list(_rows_of(inst, region, (availability or {}).get((inst.cloud, inst.id))))
    rows.sort(key=lambda r: (r["cloud"], r["region"] or "~", r["usd_per_hour"] is None, r["usd_per_hour"] or 0,
                             r["instance_type"]))
    return rows


def _rows_of(inst: InstanceType, region: str | None, sold: Availability | None) -> Iterator[dict[str, Any]]:
    base: dict[str, Any] = {
        "cloud": inst.cloud,
        "instance_type": inst.id,
        "family": inst.family,
        "gpu": inst.gpu,
        "gpu_count": inst.gpu_count,
        "gpu_memory_gib": inst.gpu_memory_gib,
        "total_gpu_memory_gib": inst.gpu_memory_gib * inst.gpu_count if inst.gpu_memory_gib else None,
        "vcpus": inst.vcpus,
        "memory_gib": inst.memory_gib,
        "cpu": inst.cpu,
        "cpu_arch": inst.cpu_arch,
        "local_nvme_gib": inst.local_nvme_gib,
        "network_gbps": inst.network_gbps,
        "rdma": inst.rdma,
        "efa_interfaces": inst.efa_interfaces,
        "source": inst.source,
        "sold_in": list(sold.regions) if sold else None,
        "sold_in_zones": list(sold.zones) if sold else None,
        "sold_in_source": f"{sold.source} (as of {sold.as_of})" if sold else None,
    }
    prices = [p for p in inst.prices if region is None or p.region == region]
    if not prices:
        yield {**base, "region": None, "usd_per_hour": None, "spot_usd_per_hour": None, "cny_per_hour": None,
               "price_as_of": None, "price_source": None, "zones": []}
    for p in prices:
        yield {**base, "region": p.region, "usd_per_hour": p.on_demand_usd_per_hour,
               "spot_usd_per_hour": p.spot_usd_per_hour, "cny_per_hour": p.on_demand_cny_per_hour,
               "price_as_of": p.as_of, "price_source": p.source, "zones": list(p.zones)}


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:.0f}"
    return str(value)


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str, int]]) -> str:
    """Plain aligned text; `columns` = (key, header, decimals)."""
    cells = [[h for _, h, _ in columns]] + [[_fmt(r[k], d) for k, _, d in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


INSTANCE_COLUMNS = [
    ("cloud", "cloud", 0), ("instance_type", "instance_type", 0), ("gpu", "gpu", 0), ("gpu_count", "n", 0),
    ("gpu_memory_gib", "gpu_gib", 1), ("vcpus", "vcpus", 0), ("memory_gib", "mem_gib", 0),
    ("local_nvme_gib", "nvme_gib", 0), ("network_gbps", "net_gbps", 1), ("rdma", "rdma", 0),
    ("region", "region", 0), ("usd_per_hour", "usd_per_hour", 4), ("spot_usd_per_hour", "spot_usd", 4),
]


@click.group(invoke_without_command=True)
@click.option("--cloud", type=CLOUD_CHOICE, default=None, help="Only this cloud.")
@click.option("--region", default=None, help="Only types priced in this region (one row each).")
@click.option("--gpu", default=None, help="Only this GPU (id or alias: H100, l40s-48gb, A100-80GB...).")
@click.option("--min-gpu-memory-gib", type=click.FloatRange(min=0), default=None,
              help="Only types whose GPUs have at least this much memory each (as the cloud exposes it).")
@click.option("--format", "fmt", type=FORMAT_CHOICE, default="table", show_default=True)
@click.pass_context
def catalog(ctx: click.Context, cloud: str | None, region: str | None, gpu: str | None,
            min_gpu_memory_gib: float | None, fmt: str) -> None:
    """List instance types with their hourly price per region (unpriced types show '-')."""
    if ctx.invoked_subcommand is not None:
        return
    if min_gpu_memory_gib is not None and not math.isfinite(min_gpu_memory_gib):
        raise click.BadParameter(f"{min_gpu_memory_gib} is not a number of GiB", param_hint="'--min-gpu-memory-gib'")
    rows = catalog_rows(load_catalog(), cloud=cloud, region=region, gpu=gpu, min_gpu_memory_gib=min_gpu_memory_gib,
                        availability=load_availability())
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("No instance type matches these filters.", err=True)
        return
    click.echo(_table(rows, INSTANCE_COLUMNS))
    cat = load_catalog()
    if any(r["cloud"] == "alicloud" and r["usd_per_hour"] for r in rows):
        click.echo(f"\nAlibaba prices are CNY x {cat.usd_per_cny} USD/CNY ({cat.fx_source}).")


GPU_COLUMNS = [
    ("id", "id", 0), ("memory_gib", "mem_gib", 0), ("memory_bandwidth_gb_per_s", "bw_gb_s", 0),
    ("bf16_tflops", "bf16_tflops", 1), ("fp16_tflops", "fp16_tflops", 1), ("fp8_tflops", "fp8_tflops", 1),
    ("int8_tops", "int8_tops", 1), ("interconnect", "link", 0), ("interconnect_gb_per_s", "link_gb_s", 0),
    ("confidence", "confidence", 0), ("missing", "missing figure: blocks", 0),
]


@catalog.command("gpus")
@click.option("--format", "fmt", type=FORMAT_CHOICE, default="table", show_default=True)
def gpus(fmt: str) -> None:
    """List the accelerators: memory, bandwidth, dense tensor throughput, interconnect ('-' = no sourced figure),
    and what each missing figure stops the planner from doing."""
    from infragen.sizing.gaps import figure_gaps

    accs = list(load_catalog().accelerators.values())
    if fmt == "json":
        click.echo(json.dumps([{**a.model_dump(mode="json"), "missing_figures": [
            {"figure": g.figure, "blocks": g.blocks} for g in figure_gaps(a)]} for a in accs], indent=2))
        return
    rows = [{**a.model_dump(), "missing": "; ".join(
        f"{g.figure} (fallback)" if g.blocks.startswith("nothing") else f"{g.figure}: {g.blocks}"
        for g in figure_gaps(a)) or None} for a in accs]
    click.echo(_table(rows, GPU_COLUMNS))
    click.echo("\nAliases: " + "; ".join(f"{a.id}={','.join(a.aliases)}" for a in accs if a.aliases))


@catalog.command("refresh")
@click.option("--cloud", type=CLOUD_CHOICE, required=True)
@click.option("--region", "regions", multiple=True,
              help="Region to price (repeatable). Default: the regions already priced in the data file.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory to write the data file to, for review (default: the packaged data file).")
@click.option("--no-pricing-api", is_flag=True,
              help="AWS: keep on-demand prices as they are (for emulators such as moto that lack GetProducts).")
def refresh(cloud: str, regions: tuple[str, ...], out: Path | None, no_pricing_api: bool) -> None:
    """Rewrite the cloud's data file from its live APIs (needs credentials and the `refresh` extra)."""
    from infragen.catalog.refresh import run_refresh
    from infragen.cli.output import prepare_dir

    if out is not None:
        prepare_dir(out)  # an unusable --out is exit 2 before any API call

    with click.progressbar(length=1, label=f"Refreshing {cloud}", show_pos=True) as bar:

        def progress(step: str, done: int, total: int) -> None:
            bar.length = max(total, 1)
            bar.label = f"{cloud}: {step}"
            bar.update(done - bar.pos)

        try:
            clients = None
            if cloud == "aws" and no_pricing_api:
                from infragen.catalog.refresh.aws import default_clients

                clients = (default_clients(regions[0] if regions else "us-east-1")[0], None)
            path, summary = run_refresh(cloud, list(regions), out, progress=progress, clients=clients)
        except ImportError as exc:
            raise InputError(f"catalog refresh needs the cloud SDK: {exc}",
                             fix="pip install 'infragen[refresh]'") from None
        except Exception as exc:
            # credential and API failures of the SDKs are the user's to fix; anything else is a bug
            if type(exc).__module__.split(".")[0] in SDK_ERROR_MODULES:
                raise InputError(f"catalog refresh: {cloud} API call failed: {exc}",
                                 fix="check credentials and region, or use --out to a scratch directory") from None
            raise
    click.echo(f"wrote {path}: {summary}")
    click.echo("Review the diff before committing (git diff -- infragen/catalog/data).")
