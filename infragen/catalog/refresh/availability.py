"""Write `aws_availability.csv` (which AWS region sells which catalog type) from moto's bundled offerings.

moto ships AWS DescribeInstanceTypeOfferings answers, one file per region, for location types `region` and
`availability-zone-id` (`moto/ec2/resources/instance_type_offerings/<type>/`). Run by a maintainer, never at runtime:
`python -m infragen.catalog.refresh.availability [--check]`; the key written is `aws-moto-<version>-offerings`,
which must be in `regions.yaml` `availability_sources` with the same covered regions. Types the snapshot lists
in no region get no row (no data, not "sold nowhere": e.g. p3, which SkyPilot's list prices in many regions).
"""

from __future__ import annotations

import argparse
import gzip
import json
from importlib import resources
from pathlib import Path

import yaml

from infragen.catalog.availability import AVAILABILITY_COLUMNS, AVAILABILITY_FILE

DATA = Path(str(resources.files("infragen.catalog") / "data"))


def _offerings(location_type: str) -> tuple[dict[str, set[str]], list[str]]:
    """type -> locations offering it, and the regions (file names) the snapshot covers."""
    folder = resources.files("moto.ec2") / "resources" / "instance_type_offerings" / location_type
    sold: dict[str, set[str]] = {}
    covered: list[str] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json.gz"):
            continue
        covered.append(entry.name.removesuffix(".json.gz"))
        for offer in json.loads(gzip.decompress(entry.read_bytes())):
            sold.setdefault(offer["InstanceType"], set()).add(offer["Location"])
    return sold, covered


def moto_offerings() -> tuple[str, dict[str, set[str]], list[str]]:
    """(moto version, type -> regions offering it, regions the snapshot covers)."""
    import moto

    sold, covered = _offerings("region")
    return moto.__version__, sold, covered


def moto_zone_offerings() -> dict[str, set[str]]:
    """type -> availability-zone ids offering it (the same regions as the region files)."""
    return _offerings("availability-zone-id")[0]


def source_key(version: str) -> str:
    return f"aws-moto-{version}-offerings"


def build(data_dir: Path = DATA) -> str:
    """The text of aws_availability.csv for the catalog's AWS types."""
    version, sold, _ = moto_offerings()
    zones = moto_zone_offerings()
    doc = yaml.safe_load((data_dir / "aws.yaml").read_text(encoding="utf-8"))
    lines = [",".join(AVAILABILITY_COLUMNS)]
    for itype in sorted(inst["id"] for inst in doc["instances"]):
        if sold.get(itype):
            lines.append(f"aws,{itype},{' '.join(sorted(sold[itype]))},{' '.join(sorted(zones.get(itype, ())))},"
                         f"{source_key(version)}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the packaged file differs")
    args = parser.parse_args(argv)
    text = build()
    target = DATA / AVAILABILITY_FILE
    version, _, covered = moto_offerings()
    print(f"source key {source_key(version)}; covered regions: {' '.join(covered)}")
    if args.check:
        same = target.is_file() and target.read_text(encoding="utf-8") == text
        print(f"{target}: {'up to date' if same else 'stale: rerun without --check'}")
        return 0 if same else 1
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
