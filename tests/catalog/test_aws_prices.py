"""AWS price coverage (issue #3) and exact us-west-2 figures read from the cited SkyPilot file (real packaged data)."""

from __future__ import annotations

import pytest

from infragen.catalog import Catalog, load_catalog

#: GPU families issue #3 wants priced in at least one region.
GPU_FAMILIES = ("g4dn", "g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e", "p5en")
#: The file the us-west-2 (and us-east-2) rows were transcribed from (infragen/catalog/refresh/supplements.yaml).
SKYPILOT_FILE = "skypilot-org/skypilot-catalog@2c3d7ea7 catalogs/v9/aws/vms.csv"

#: (instance type, on-demand USD/h, lowest regular-AZ spot USD/h) exactly as read for us-west-2 in that file.
US_WEST_2 = [
    ("g4dn.xlarge", 0.526, 0.2147),  # Local Zone usw2-lax1-az1 (0.0669) is not the lowest taken
    ("g5.xlarge", 1.006, 0.5232),
    ("g6.xlarge", 0.8048, 0.3539),
    ("g6e.48xlarge", 30.13118, 12.3069),
    ("p3.2xlarge", 3.06, 0.3548),
    ("p4d.24xlarge", 21.95764, 10.6942),
    ("p5.4xlarge", 6.88, 4.8202),
    ("p5.48xlarge", 55.04, 9.3722),
    ("p5en.48xlarge", 63.296, 17.8226),
    ("p6-b300.48xlarge", 142.416, 15.9815),
    ("c7i.2xlarge", 0.357, 0.1095),
    ("m8g.48xlarge", 8.61696, 1.2326),
]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.mark.parametrize("family", GPU_FAMILIES)
def test_every_gpu_family_has_a_price_in_some_region(catalog: Catalog, family: str) -> None:
    insts = [i for i in catalog.instances_for("aws") if i.family == family]
    assert insts, family
    assert any(p.on_demand_usd_per_hour or p.spot_usd_per_hour for i in insts for p in i.prices), family


def test_p5e_is_spot_only(catalog: Catalog) -> None:
    # vms.csv leaves Price (on-demand) empty in every p5e row; only its spot figures could be taken
    p5e = catalog.instance("p5e.48xlarge")
    # (eu-west-2 is listed with neither price, so it is not priced)
    assert {p.region for p in p5e.prices} == {"us-west-2", "us-east-2", "ap-southeast-2", "ap-southeast-3",
                                              "eu-north-1"}
    assert all(p.on_demand_usd_per_hour is None for p in p5e.prices)
    spot = {p.region: p.spot_usd_per_hour for p in p5e.prices}
    assert spot == {"us-west-2": pytest.approx(17.7513), "us-east-2": pytest.approx(14.0291),
                    "ap-southeast-2": pytest.approx(44.8171), "ap-southeast-3": pytest.approx(10.0644),
                    "eu-north-1": pytest.approx(12.9925)}


def test_both_required_regions_are_priced(catalog: Catalog) -> None:
    assert {"us-east-1", "us-west-2"} <= set(catalog.regions("aws"))


@pytest.mark.parametrize(("itype", "on_demand", "spot"), US_WEST_2)
def test_us_west_2_prices_are_the_figures_read(catalog: Catalog, itype: str, on_demand: float, spot: float) -> None:
    price = catalog.instance(itype).price_in("us-west-2")
    assert price is not None, itype
    assert price.on_demand_usd_per_hour == pytest.approx(on_demand, rel=0, abs=1e-9)
    assert price.spot_usd_per_hour == pytest.approx(spot, rel=0, abs=1e-9)


def test_us_west_2_rows_cite_skypilot_not_the_us_east_1_table(catalog: Catalog) -> None:
    priced = [i for i in catalog.instances_for("aws") if i.price_in("us-west-2") is not None]
    assert len(priced) == len(catalog.instances_for("aws"))  # vms.csv lists every catalog type in us-west-2
    for inst in priced:
        price = inst.price_in("us-west-2")
        assert price is not None
        assert price.source.startswith(SKYPILOT_FILE), inst.id
        assert "karpenter" not in price.source.lower(), inst.id
        assert price.as_of == "unknown", inst.id  # the file records no snapshot date
        if price.spot_usd_per_hour is not None:
            assert price.spot_source and "usw2-az" in price.spot_source, inst.id
