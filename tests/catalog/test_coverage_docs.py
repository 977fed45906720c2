"""docs/catalog.md's coverage section is generated from the catalog and current."""

from __future__ import annotations

from infragen.catalog import catalog_from_records, load_catalog
from infragen.catalog.coverage import DOC, END, START, render_coverage, updated_doc


def test_coverage_section_is_current() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert updated_doc(text, render_coverage()) == text, "stale: run python -m infragen.catalog.coverage"


def test_coverage_lists_each_priced_region_with_its_families() -> None:
    section = render_coverage()
    assert section.startswith(START) and section.endswith(END)
    cat = load_catalog()
    for cloud in ("aws", "alicloud"):
        for region in cat.regions(cloud):
            assert f"| {region} |" in section
    assert "| eu-west-1 | g4dn g5 p3 p3dn p4d |" in section
    # a tiny catalog shows what it holds, nothing more
    full = cat.instance("g6e.xlarge")
    only = full.model_copy(update={"prices": [p for p in full.prices if p.region == "eu-north-1"]})
    small = catalog_from_records(cat.accelerators.values(), cat.cpus.values(),
                                 [only, cat.instance("p5.48xlarge"), cat.instance("g5.xlarge"),
                                  cat.instance("g4dn.xlarge")],
                                 usd_per_cny=cat.usd_per_cny, fx_source=cat.fx_source)
    text = render_coverage(small)
    assert "| g6e.xlarge | eu-north-1 | 1 |" in text and "| eu-north-1 | g4dn g5 g6e p5 |" in text
