"""Data-integrity tests on the real packaged catalog files (the only tests that read them)."""

from __future__ import annotations

import pytest

from infragen.catalog import Catalog, load_catalog

#: GPU models the issue names; each must be sold with a price in at least one region.
PRICED_GPUS = (
    "t4-16gb", "a10-24gb", "a10g-24gb", "l4-24gb", "l40s-48gb", "v100-16gb", "v100-32gb",
    "a100-40gb", "a100-80gb", "h100-sxm-80gb", "h200-141gb", "b200-180gb",
)
#: Families the issue names, per cloud.
AWS_FAMILIES = ("g4dn", "g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e", "p5en",
                "c7i", "m7i", "r7i", "c7a", "m7a", "c8g", "m8g")
ALI_FAMILIES = ("gn6i", "gn6v", "gn6e", "gn7i", "gn7e", "gn8is", "gn8v", "ebmgn8v", "c8i", "g8i", "c8y", "g8y")
#: Families the issue names that no stored price list covers (docs/catalog.md, "Known gaps"); may only shrink.
KNOWN_UNPRICED_FAMILIES = {"p5e", "gn8v", "gn8is", "ebmgn8v", "ebmgn8is", "ebmgn8ia", "ebmgn7i", "gn7", "ebmgn9g",
                           "ebmgn9ge", "ebmgn9gc"}
CANONICAL_GPU_IDS = ("t4-16gb", "a10-24gb", "a10g-24gb", "l4-24gb", "l20-48gb", "l40s-48gb", "v100-16gb",
                     "v100-32gb", "a100-40gb", "a100-80gb", "h100-sxm-80gb", "h100-pcie-80gb", "h20-96gb",
                     "h200-141gb", "b200-180gb")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def test_loads_and_is_cached(catalog: Catalog) -> None:
    assert load_catalog() is catalog


def test_enough_instance_types(catalog: Catalog) -> None:
    assert len(catalog.instances_for("aws")) >= 60
    assert len(catalog.instances_for("alicloud")) >= 40


def test_canonical_gpu_ids_present(catalog: Catalog) -> None:
    missing = [g for g in CANONICAL_GPU_IDS if g not in catalog.accelerators]
    assert not missing


@pytest.mark.parametrize("gpu", PRICED_GPUS)
def test_every_named_gpu_has_a_price_somewhere(catalog: Catalog, gpu: str) -> None:
    priced = [i.id for i in catalog.instances if i.gpu == gpu and any(p.on_demand_usd_per_hour for p in i.prices)]
    assert priced, f"no priced instance carries {gpu}"


@pytest.mark.parametrize(("cloud", "family"), [("aws", f) for f in AWS_FAMILIES] + [("alicloud", f)
                                                                                      for f in ALI_FAMILIES])
def test_named_families_present(catalog: Catalog, cloud: str, family: str) -> None:
    assert any(i.family == family for i in catalog.instances_for(cloud))


def test_unpriced_families_are_the_documented_gaps(catalog: Catalog) -> None:
    unpriced = {i.family for i in catalog.instances
                if not any(p.on_demand_usd_per_hour for p in i.prices)
                and not any(j.family == i.family and j.prices for j in catalog.instances)}
    assert unpriced <= KNOWN_UNPRICED_FAMILIES, unpriced - KNOWN_UNPRICED_FAMILIES


def test_every_figure_has_a_source(catalog: Catalog) -> None:
    for acc in catalog.accelerators.values():
        assert acc.source.strip(), acc.id
    for cpu in catalog.cpus.values():
        assert cpu.source.strip(), cpu.id
    for inst in catalog.instances:
        assert inst.source.strip(), inst.id
        for price in inst.prices:
            assert price.source.strip() and price.as_of.strip(), (inst.id, price.region)
            if price.spot_usd_per_hour is not None:
                assert (price.spot_source or price.source).strip()


def test_spot_below_on_demand(catalog: Catalog) -> None:
    for inst in catalog.instances:
        for p in inst.prices:
            if p.spot_usd_per_hour is not None and p.on_demand_usd_per_hour is not None:
                # SkyPilot rounds spot to 4 decimals: a spot capped at on-demand can read 0.00005 above it
                assert p.spot_usd_per_hour <= p.on_demand_usd_per_hour + 0.0001, (inst.id, p.region)


def test_alibaba_usd_is_cny_times_stated_rate(catalog: Catalog) -> None:
    assert 0.1 < catalog.usd_per_cny < 0.2 and catalog.fx_source
    for inst in catalog.instances_for("alicloud"):
        for p in inst.prices:
            assert p.on_demand_cny_per_hour is not None and p.on_demand_usd_per_hour is not None
            # the loader rounds USD to 6 decimals
            assert p.on_demand_usd_per_hour == pytest.approx(p.on_demand_cny_per_hour * catalog.usd_per_cny, abs=5e-7)


def test_aws_gpu_memory_is_what_the_api_exposes(catalog: Catalog) -> None:
    # AWS DescribeInstanceTypes reports 22888 MiB per L4 / A10G, not 24 GiB.
    assert catalog.instance("g6.xlarge").gpu_memory_gib == pytest.approx(22888 / 1024)
    assert catalog.instance("g5.xlarge").gpu_memory_gib == pytest.approx(22888 / 1024)
    assert catalog.instance("p5e.48xlarge").gpu_memory_gib == pytest.approx(144384 / 1024)


def test_instance_gpu_memory_never_exceeds_the_part(catalog: Catalog) -> None:
    for inst in catalog.instances:
        if inst.gpu is not None:
            assert inst.gpu_memory_gib is not None
            assert inst.gpu_memory_gib <= catalog.accelerators[inst.gpu].memory_gib + 1e-9, inst.id


def test_efa_layout(catalog: Catalog) -> None:
    p5 = catalog.instance("p5.48xlarge")
    assert (p5.rdma, p5.efa_interfaces, p5.network_cards) == ("efa", 32, 32)
    assert catalog.instance("p5en.48xlarge").efa_interfaces == 16
    assert catalog.instance("g6.xlarge").rdma == "none"


def test_h20_is_flagged_low_confidence(catalog: Catalog) -> None:
    h20 = catalog.accelerator("H20")
    assert h20.id == "h20-96gb" and h20.confidence == "low"
    assert "not name" in h20.notes or "does NOT name" in h20.notes


def test_aliases_resolve(catalog: Catalog) -> None:
    assert catalog.accelerator("H100").id == "h100-sxm-80gb"
    assert catalog.accelerator("h100").id == "h100-sxm-80gb"
    assert catalog.accelerator("A100-80GB").id == "a100-80gb"
    assert catalog.accelerator("L40S").id == "l40s-48gb"
    assert catalog.accelerator("l4-24gb").id == "l4-24gb"


def test_required_regions_have_prices(catalog: Catalog) -> None:
    assert {"us-east-1"} <= set(catalog.regions("aws"))
    assert {"cn-hangzhou", "cn-beijing"} <= set(catalog.regions("alicloud"))
