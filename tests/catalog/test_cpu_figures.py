"""Integrity of the CPU figures and CPU-only instance specs the llama.cpp speed model needs (real packaged files)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from infragen.catalog import Catalog, load_catalog
from infragen.catalog.records import CpuModel
from infragen.errors import MissingFigureError
from infragen.sizing.cpu_performance import cpu_setup

ROOT = Path(__file__).resolve().parents[2]
#: Figures the llama.cpp CPU model cannot do without.
SPEED_FIGURES = ("fp32_flops_per_cycle_per_core", "sustained_clock_ghz", "memory_bandwidth_gb_per_s")
#: CPUs behind a CPU-only instance type that still lack a speed figure (docs/catalog.md, "Known gaps"); may only shrink.
KNOWN_SPEED_GAPS: dict[str, set[str]] = {"yitian-710": {"memory_bandwidth_gb_per_s"}}
#: CPU-only families the planner must be able to size (vCPU, memory, network, CPU model all sourced).
CPU_ONLY_FAMILIES = ("c7i", "m7i", "r7i", "c7a", "m7a", "c8g", "m8g",
                     "c7", "g7", "r7", "c8i", "g8i", "r8i", "c8y", "g8y")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _missing(cpu: CpuModel) -> set[str]:
    return {name for name in SPEED_FIGURES if getattr(cpu, name) is None}


def test_every_cpu_has_fp32_flops_per_cycle(catalog: Catalog) -> None:
    lacking = [c.id for c in catalog.cpus.values() if c.fp32_flops_per_cycle_per_core is None]
    assert not lacking


def test_cpus_of_cpu_only_types_have_speed_figures_or_are_listed_gaps(catalog: Catalog) -> None:
    used = {i.cpu for i in catalog.instances if i.gpu is None and i.cpu is not None}
    gaps = {cpu_id: _missing(catalog.cpus[cpu_id]) for cpu_id in sorted(used) if _missing(catalog.cpus[cpu_id])}
    assert gaps == KNOWN_SPEED_GAPS


def test_known_gap_still_raises_missing_figure(catalog: Catalog) -> None:
    with pytest.raises(MissingFigureError, match="memory_bandwidth_gb_per_s"):
        cpu_setup(catalog.cpu("yitian-710"), 8)


@pytest.mark.parametrize("family", CPU_ONLY_FAMILIES)
def test_cpu_only_families_are_fully_specified(catalog: Catalog, family: str) -> None:
    insts = [i for i in catalog.instances if i.family == family]
    assert insts, family
    for inst in insts:
        assert inst.gpu is None
        assert None not in (inst.vcpus, inst.memory_gib, inst.network_gbps, inst.cpu), inst.id
        assert inst.source.strip(), inst.id


def test_alibaba_eighth_generation_sizes_follow_the_family_ratio(catalog: Catalog) -> None:
    # Alibaba's pages: c = 1:2, g = 1:4, r = 1:8 vCPU to GiB; a transcription slip would break the ratio.
    ratio = {"c8i": 2, "g8i": 4, "r8i": 8, "c8y": 2, "g8y": 4}
    for inst in catalog.instances_for("alicloud"):
        if inst.family in ratio:
            assert inst.vcpus is not None and inst.memory_gib == inst.vcpus * ratio[inst.family], inst.id


def test_alibaba_cpu_assignment(catalog: Catalog) -> None:
    assert catalog.instance("ecs.g8i.2xlarge").cpu == "xeon-spr-or-emr-alibaba"
    assert catalog.instance("ecs.c8y.2xlarge").cpu == "yitian-710"
    assert catalog.instance("ecs.c8y.2xlarge").threads_per_core == 1


def test_matrix_rates_only_on_parts_with_a_matrix_unit(catalog: Catalog) -> None:
    for cpu in catalog.cpus.values():
        has_rate = cpu.amx_bf16_flops_per_cycle_per_core is not None or cpu.amx_int8_ops_per_cycle_per_core is not None
        assert has_rate == ("amx" in cpu.simd), cpu.id


def test_fp32_rate_matches_the_vector_width(catalog: Catalog) -> None:
    # two 512-bit FMA units = 64; Zen 4 (two 256-bit FMA pipes) = 32; 128-bit Arm pipes x 2 or 4 = 16 or 32.
    expected = {"xeon-8488c": 64, "xeon-sapphire-rapids": 64, "xeon-spr-or-emr-alibaba": 64, "xeon-icelake": 64,
                "xeon-8163": 64, "xeon-8269cy": 64, "epyc-genoa": 32, "epyc-9t34": 32, "graviton4": 32,
                "yitian-710": 16}
    assert {c.id: c.fp32_flops_per_cycle_per_core for c in catalog.cpus.values()} == expected


def test_refresh_supplements_ship_in_wheels() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["infragen"]
    assert "catalog/refresh/*.yaml" in patterns
    shipped = list((ROOT / "infragen").glob("catalog/refresh/*.yaml"))
    assert shipped == [ROOT / "infragen/catalog/refresh/supplements.yaml"]
