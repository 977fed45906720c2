"""Scripts that (re)write the catalog data files for review: from the reference CSVs or the cloud APIs.

Never imported by the runtime; cloud SDKs (boto3, alibabacloud_ecs20140526) are imported inside functions only.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from infragen.catalog.loader import DATA_FILES, OPTIONAL_FILES, dump_data_file, load_catalog_dir

Progress = Callable[[str, int, int], None]


def packaged_data_dir() -> Path:
    return Path(str(resources.files("infragen.catalog") / "data"))


def write_reviewed(name: str, content: dict[str, Any], out: Path | None) -> Path:
    """Write one data file after checking that the whole catalog still loads with it; returns its path."""
    source_dir = packaged_data_dir()
    with tempfile.TemporaryDirectory() as tmp:
        for other in DATA_FILES + OPTIONAL_FILES:
            if (source_dir / other).is_file():
                shutil.copy(source_dir / other, Path(tmp) / other)
        (Path(tmp) / name).write_text(dump_data_file(content), encoding="utf-8")
        load_catalog_dir(tmp)  # raises DataError naming the field if the refresh produced bad data
    target_dir = out or source_dir
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / name
    target.write_text(dump_data_file(content), encoding="utf-8")
    if out is None:  # the packaged data changed: the pre-built catalog.json follows it
        from infragen.catalog import compact

        compact.main([])
    return target


def run_refresh(
    cloud: str,
    regions: list[str],
    out: Path | None,
    *,
    progress: Progress,
    clients: Any = None,
) -> tuple[Path, str]:
    """Refresh `cloud`'s data file from its APIs. `clients` overrides the SDK clients (tests).

    AWS: clients = (ec2 factory by region, pricing client or None); Alibaba: clients = client factory by region.
    """
    name = f"{cloud}.yaml"
    existing = yaml.safe_load((packaged_data_dir() / name).read_text(encoding="utf-8"))
    if not regions:
        regions = sorted({p["region"] for r in existing["instances"] for p in r.get("prices", [])})
    if cloud == "aws":
        from infragen.catalog.refresh import aws

        ec2_for_region, pricing = clients or aws.default_clients(regions[0])
        content, notes = aws.refresh_aws_file(existing, ec2_for_region=ec2_for_region, pricing=pricing,
                                              regions=regions, progress=progress)
    else:
        from infragen.catalog.refresh import alicloud

        factory = clients or alicloud.default_client
        content, notes = alicloud.refresh_alicloud_file(existing, client_for_region=factory, regions=regions,
                                                        progress=progress)
    path = write_reviewed(name, content, out)
    summary = f"{len(content['instances'])} instance types, regions {', '.join(regions)}, {len(notes)} changes/notes"
    if notes:
        notes_path = path.with_suffix(".refresh-notes.txt")
        notes_path.write_text("\n".join(notes) + "\n", encoding="utf-8")
        summary += f" (see {notes_path})"
    return path, summary
