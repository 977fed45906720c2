"""Load and check the hardware and price catalogs (accelerators, CPUs, AWS and Alibaba instance types).

Reads the packaged YAML on call (cached), never at import, and never talks to a cloud API.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infragen.catalog.parsed import data_dir
from infragen.catalog.records import Accelerator, CpuModel, InstanceType, RegionPrice
from infragen.catalog.regional import PRICES_FILE, REGIONS_FILE, parse_price_table, parse_regions, region_lists
from infragen.errors import DataError, UnknownNameError
from infragen.validation import validation_message

#: libyaml's C parser when present (5-10x faster on the catalog files), else the pure-Python one.
_FastLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SCHEMA_VERSION = 1
DATA_FILES: tuple[str, ...] = ("accelerators.yaml", "cpus.yaml", "aws.yaml", "alicloud.yaml")
#: Read when present: the regions each cloud has and the compact price table of every region.
OPTIONAL_FILES: tuple[str, ...] = (REGIONS_FILE, PRICES_FILE)
Cloud = Literal["aws", "alicloud"]
CLOUDS: tuple[str, ...] = ("aws", "alicloud")

#: Used only by catalog_from_records when a test does not care about the rate.
DEFAULT_USD_PER_CNY = 1 / 7.1286
DEFAULT_FX_SOURCE = "PBOC central parity of 2024-10-24 (7.1286 CNY per USD), as in /shared/reference/README.md"


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    schema_version: Literal[1]
    """Version of this file's layout; bump it when a field changes meaning."""
    source: str
    """Where the file's figures come from (each record adds its own `source`)."""
    as_of: str
    """Date of the newest figure in the file (YYYY-MM-DD)."""
    notes: str = ""
    """Caveats for reviewers."""


class AcceleratorFile(_File):
    """`accelerators.yaml`."""

    accelerators: list[Accelerator]
    """One record per GPU model."""


class CpuFile(_File):
    """`cpus.yaml`."""

    cpus: list[CpuModel]
    """One record per server CPU model."""


class InstanceFile(_File):
    """`aws.yaml` or `alicloud.yaml`."""

    cloud: Cloud
    """Which cloud every instance in the file belongs to."""
    usd_per_cny: float | None = Field(default=None, gt=0)
    """USD per CNY used to convert Alibaba prices (stated once here; None for AWS)."""
    fx_source: str | None = None
    """Where the exchange rate was read, with its date."""
    instances: list[InstanceType]
    """Instance types of this cloud."""


def _normal(name: str) -> str:
    """Lower-case, alphanumerics only: `H100-SXM` and `h100 sxm` compare equal."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


@dataclass(frozen=True, eq=False)  # identity equality/hash: usable as a cache key, never compared field by field
class Catalog:
    """Every accelerator, CPU and instance type infragen knows, with prices. Immutable; ask, never open files."""

    accelerators: Mapping[str, Accelerator]
    """Accelerators by canonical id (read-only mapping)."""
    cpus: Mapping[str, CpuModel]
    """CPU models by id (read-only mapping)."""
    instances: tuple[InstanceType, ...]
    """Instance types of every cloud, in data-file order (AWS first)."""
    usd_per_cny: float
    """CNY->USD rate used for Alibaba prices (stated once in alicloud.yaml)."""
    fx_source: str
    """Where and when that rate was read."""
    region_lists: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Every region of each cloud (regions.yaml), priced or not; empty in tiny test catalogs."""
    _by_type: Mapping[str, InstanceType] = field(init=False, repr=False, compare=False)
    _gpu_names: Mapping[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_type", MappingProxyType({i.id: i for i in self.instances}))
        names: dict[str, str] = {}
        for acc in self.accelerators.values():
            for name in (acc.id, acc.display_name, *acc.aliases):
                names.setdefault(_normal(name), acc.id)
        object.__setattr__(self, "_gpu_names", MappingProxyType(names))

    def accelerator(self, name: str) -> Accelerator:
        """The accelerator named by id, alias or display name (case and punctuation ignored)."""
        if name in self.accelerators:
            return self.accelerators[name]
        found = self._gpu_names.get(_normal(name))
        if found is None:
            known = list(self.accelerators)
            for acc in self.accelerators.values():
                known += acc.aliases
            raise UnknownNameError("GPU", name, known)
        return self.accelerators[found]

    def cpu(self, cpu_id: str) -> CpuModel:
        """The CPU model with this id."""
        if cpu_id not in self.cpus:
            raise UnknownNameError("CPU", cpu_id, self.cpus)
        return self.cpus[cpu_id]

    def instance(self, instance_type: str) -> InstanceType:
        """The instance type with exactly this API name (`p5.48xlarge`, `ecs.gn7i-c8g1.2xlarge`)."""
        found = self._by_type.get(instance_type)
        if found is None:
            raise UnknownNameError("instance type", instance_type, self._by_type)
        return found

    def instances_for(self, cloud: str | None = None, region: str | None = None) -> tuple[InstanceType, ...]:
        """Instance types of `cloud` (all clouds when None); with `region`, only those priced there."""
        if cloud is not None and cloud not in CLOUDS:
            raise UnknownNameError("cloud", cloud, CLOUDS)
        return tuple(
            i
            for i in self.instances
            if (cloud is None or i.cloud == cloud) and (region is None or i.price_in(region) is not None)
        )

    def regions(self, cloud: str) -> list[str]:
        """Regions of `cloud` where at least one instance type has a price, sorted."""
        if cloud not in CLOUDS:
            raise UnknownNameError("cloud", cloud, CLOUDS)
        return sorted({r for i in self.instances if i.cloud == cloud for r in i.priced_regions})

    def known_regions(self, cloud: str) -> list[str]:
        """Every region of `cloud` infragen knows (regions.yaml), plus any priced one, sorted."""
        if cloud not in CLOUDS:
            raise UnknownNameError("cloud", cloud, CLOUDS)
        return sorted(set(self.region_lists.get(cloud, ())) | set(self.regions(cloud)))


# ---------------------------------------------------------------------------------------------- building


def _check(
    accelerators: Iterable[Accelerator],
    cpus: Iterable[CpuModel],
    instances: Iterable[InstanceType],
    where: Mapping[str, str] | None = None,
) -> None:
    """Cross-record rules pydantic cannot see: unique ids, references, consistent units. Raises DataError."""
    where = where or {}
    problems: list[str] = []

    def _dupes(kind: str, ids: list[str], file_key: str) -> None:
        seen: set[str] = set()
        for i in ids:
            if i in seen:
                problems.append(f"{where.get(file_key, kind)}: duplicate {kind} id {i!r}")
            seen.add(i)

    accs, cps, insts = list(accelerators), list(cpus), list(instances)
    _dupes("accelerator", [a.id for a in accs], "accelerators")
    _dupes("cpu", [c.id for c in cps], "cpus")
    _dupes("instance type", [i.id for i in insts], "instances")
    names: dict[str, str] = {}
    for acc in accs:
        for alias in (acc.id, *acc.aliases):
            other = names.setdefault(_normal(alias), acc.id)
            if other != acc.id:
                problems.append(f"{where.get('accelerators', 'accelerators')}: alias {alias!r} of {acc.id!r} "
                                f"already names {other!r}")
    acc_ids, cpu_ids = {a.id for a in accs}, {c.id for c in cps}
    for pos, inst in enumerate(insts):
        at = f"{where.get(inst.cloud, inst.cloud)}: instances[{pos}] ({inst.id})"
        if inst.gpu is not None and inst.gpu not in acc_ids:
            problems.append(f"{at}.gpu: unknown accelerator {inst.gpu!r}")
        if (inst.gpu is None) != (inst.gpu_count == 0):
            problems.append(f"{at}: gpu and gpu_count disagree (gpu={inst.gpu!r}, gpu_count={inst.gpu_count})")
        if (inst.gpu is None) != (inst.gpu_memory_gib is None):
            problems.append(f"{at}.gpu_memory_gib: must be set exactly when gpu is set")
        if inst.cpu is not None and inst.cpu not in cpu_ids:
            problems.append(f"{at}.cpu: unknown CPU model {inst.cpu!r}")
        if (inst.rdma == "efa") != (inst.efa_interfaces > 0):
            problems.append(f"{at}: rdma={inst.rdma!r} but efa_interfaces={inst.efa_interfaces}")
        if inst.efa_interfaces > inst.network_cards:
            problems.append(f"{at}: {inst.efa_interfaces} EFA interfaces on {inst.network_cards} network cards "
                            "(AWS lays out at most one EFA per card)")
        if (inst.local_nvme_gib > 0) != (inst.local_nvme_count > 0):
            problems.append(f"{at}: local_nvme_count={inst.local_nvme_count} and local_nvme_gib="
                            f"{inst.local_nvme_gib} disagree")
        regions = [p.region for p in inst.prices]
        if len(regions) != len(set(regions)):
            problems.append(f"{at}.prices: a region appears twice")
        for k, price in enumerate(inst.prices):
            if price.on_demand_usd_per_hour is None and price.spot_usd_per_hour is None:
                problems.append(f"{at}.prices[{k}] ({price.region}): no price at all")
            if inst.cloud == "aws" and price.on_demand_cny_per_hour is not None:
                problems.append(f"{at}.prices[{k}].on_demand_cny_per_hour: AWS prices are USD")
    if problems:
        shown = problems[:8]
        more = f" (and {len(problems) - 8} more)" if len(problems) > 8 else ""
        raise DataError("catalog data: " + "; ".join(shown) + more)


def catalog_from_records(
    accelerators: Iterable[Accelerator],
    cpus: Iterable[CpuModel],
    instances: Iterable[InstanceType],
    usd_per_cny: float = DEFAULT_USD_PER_CNY,
    fx_source: str = DEFAULT_FX_SOURCE,
) -> Catalog:
    """A catalog built in memory (tiny catalogs for unit tests), checked like the packaged one."""
    accs, cps, insts = list(accelerators), list(cpus), list(instances)
    _check(accs, cps, insts)
    return Catalog(
        accelerators=MappingProxyType({a.id: a for a in accs}),
        cpus=MappingProxyType({c.id: c for c in cps}),
        instances=tuple(insts),
        usd_per_cny=usd_per_cny,
        fx_source=fx_source,
    )


def _parse(label: str, text: str, model: type[_File]) -> Any:
    try:
        data = yaml.load(text, Loader=_FastLoader)
    except yaml.YAMLError as exc:
        raise DataError(f"{label}: malformed YAML: {exc}") from None
    if not isinstance(data, dict):
        raise DataError(f"{label}: expected a mapping at the top level, found {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise DataError(validation_message(label, exc, model)) from None


def _with_usd(inst_file: InstanceFile, label: str) -> list[InstanceType]:
    """Alibaba files state CNY and one rate; fill each price's USD from it (a written USD must agree)."""
    if inst_file.cloud == "aws":
        if inst_file.usd_per_cny is not None:
            raise DataError(f"{label}: usd_per_cny: AWS prices are USD, the rate belongs in alicloud.yaml")
        return list(inst_file.instances)
    rate = inst_file.usd_per_cny
    if rate is None or not inst_file.fx_source:
        raise DataError(f"{label}: usd_per_cny and fx_source are required for Alibaba prices (CNY)")
    out: list[InstanceType] = []
    for pos, inst in enumerate(inst_file.instances):
        prices: list[RegionPrice] = []
        for k, price in enumerate(inst.prices):
            cny = price.on_demand_cny_per_hour
            if cny is None:
                if price.on_demand_usd_per_hour is not None:
                    raise DataError(f"{label}: instances[{pos}].prices[{k}]: Alibaba price without "
                                    "on_demand_cny_per_hour (prices are kept in CNY as listed)")
                prices.append(price)
                continue
            usd = round(cny * rate, 6)
            written = price.on_demand_usd_per_hour
            if written is not None and abs(written - usd) > 0.01 * usd:
                raise DataError(f"{label}: instances[{pos}].prices[{k}].on_demand_usd_per_hour: {written} "
                                f"disagrees with {cny} CNY x {rate} USD/CNY = {usd}")
            prices.append(price.model_copy(update={"on_demand_usd_per_hour": usd}))
        out.append(inst.model_copy(update={"prices": prices}))
    return out


def _build(texts: Mapping[str, tuple[str, str]]) -> Catalog:
    """`texts`: file name -> (label for messages, YAML text)."""
    missing = [name for name in DATA_FILES if name not in texts]
    if missing:
        raise DataError(f"catalog data: missing {', '.join(missing)}")
    acc_label, acc_text = texts["accelerators.yaml"]
    cpu_label, cpu_text = texts["cpus.yaml"]
    accs: AcceleratorFile = _parse(acc_label, acc_text, AcceleratorFile)
    cps: CpuFile = _parse(cpu_label, cpu_text, CpuFile)
    instances: list[InstanceType] = []
    where = {"accelerators": acc_label, "cpus": cpu_label}
    usd_per_cny, fx_source = DEFAULT_USD_PER_CNY, ""
    for cloud in CLOUDS:
        label, text = texts[f"{cloud}.yaml"]
        inst_file: InstanceFile = _parse(label, text, InstanceFile)
        if inst_file.cloud != cloud:
            raise DataError(f"{label}: cloud: {inst_file.cloud!r} in the {cloud} file")
        wrong = [i.id for i in inst_file.instances if i.cloud != cloud]
        if wrong:
            raise DataError(f"{label}: instances of another cloud in the {cloud} file: {', '.join(wrong[:5])}")
        instances += _with_usd(inst_file, label)
        where[cloud] = label
        if cloud == "alicloud":
            usd_per_cny, fx_source = inst_file.usd_per_cny or DEFAULT_USD_PER_CNY, inst_file.fx_source or ""
    where["instances"] = " / ".join(texts[f"{c}.yaml"][0] for c in CLOUDS)
    regions = parse_regions(*texts[REGIONS_FILE]) if REGIONS_FILE in texts else None
    if PRICES_FILE in texts:
        if regions is None:
            raise DataError(f"{texts[PRICES_FILE][0]}: needs {REGIONS_FILE} (its price_sources and region lists)")
        instances = _with_regional(instances, parse_price_table(*texts[PRICES_FILE], regions), texts[PRICES_FILE][0],
                                   usd_per_cny)
    if regions is not None:
        lists = region_lists(regions)
        stray = sorted({f"{i.cloud}/{p.region}" for i in instances for p in i.prices
                        if p.region not in lists.get(i.cloud, ())})
        if stray:
            raise DataError(f"{texts[REGIONS_FILE][0]}: priced regions missing from the region lists: "
                            f"{', '.join(stray)}")
    _check(accs.accelerators, cps.cpus, instances, where)
    return Catalog(
        accelerators=MappingProxyType({a.id: a for a in accs.accelerators}),
        cpus=MappingProxyType({c.id: c for c in cps.cpus}),
        instances=tuple(instances),
        usd_per_cny=usd_per_cny,
        fx_source=fx_source,
        region_lists=MappingProxyType(dict(region_lists(regions))),
    )


def _with_regional(instances: list[InstanceType], table: Mapping[tuple[str, str], list[RegionPrice]], label: str,
                   usd_per_cny: float) -> list[InstanceType]:
    """Append the price table's rows to their instance types (Alibaba CNY converted like the YAML prices)."""
    known = {(i.cloud, i.id) for i in instances}
    unknown = sorted(f"{cloud}/{itype}" for cloud, itype in table if (cloud, itype) not in known)
    if unknown:
        raise DataError(f"{label}: instance types not in the catalog: {', '.join(unknown[:5])}")
    out: list[InstanceType] = []
    for inst in instances:
        rows = table.get((inst.cloud, inst.id))
        if not rows:
            out.append(inst)
            continue
        if inst.cloud == "alicloud":
            rows = [p if p.on_demand_cny_per_hour is None else p.model_copy(
                update={"on_demand_usd_per_hour": round(p.on_demand_cny_per_hour * usd_per_cny, 6)}) for p in rows]
        out.append(inst.model_copy(update={"prices": [*inst.prices, *rows]}))
    return out


@functools.cache
def load_catalog() -> Catalog:
    """The packaged catalog, read once per process: the pre-built data/catalog.json and catalog_prices.jsonl when
    present (their test keeps them equal to the YAML/CSV sources; price rows are parsed only when asked for), else
    built from those sources."""
    base = data_dir()
    compact, prices = base / "catalog.json", base / "catalog_prices.jsonl"
    if compact.is_file() and prices.is_file():
        import json

        from infragen.catalog.compact import catalog_from_compact

        return catalog_from_compact(json.loads(compact.read_text(encoding="utf-8")),
                                    prices.read_text(encoding="utf-8"))
    texts = {name: (f"infragen/catalog/data/{name}", (base / name).read_text(encoding="utf-8"))
             for name in DATA_FILES + OPTIONAL_FILES if (base / name).is_file()}
    return _build(texts)


def load_catalog_dir(path: Path | str) -> Catalog:
    """A catalog from a directory holding the four data files (refresh review, tests)."""
    root = Path(path)
    texts: dict[str, tuple[str, str]] = {}
    for name in DATA_FILES:
        file = root / name
        try:
            texts[name] = (str(file), file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(f"{file}: file not found (a catalog directory holds {', '.join(DATA_FILES)})") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"{file}: cannot read: {exc}") from None
    for name in OPTIONAL_FILES:
        if (root / name).is_file():
            texts[name] = (str(root / name), (root / name).read_text(encoding="utf-8"))
    return _build(texts)


def dump_data_file(data: Mapping[str, Any]) -> str:
    """YAML text of one data file, keys in insertion order (used by the refresh and reference scripts)."""
    return yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True, width=120)
