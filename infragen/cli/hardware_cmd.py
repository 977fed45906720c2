"""`infragen hardware probe`: measure this machine and print a `--hardware` file for `infragen estimate`.

Thin: the measuring is infragen/probe.py; this prints its document as YAML and checks it loads back.
"""

from __future__ import annotations

import click
import yaml

HEADER = """\
# Written by `infragen hardware probe` on {as_of}. Use it as: infragen estimate --hardware THIS_FILE ...
# measured.memory_bandwidth_gb_per_s is what this machine's cores read together (a measurement, not the
# datasheet peak): the llama.cpp model applies cpu.measured_bandwidth_fraction of performance.yaml to it.
# cpu.memory_bandwidth_gb_per_s (absent here) would be a datasheet peak per socket, taken at a lower fraction.
"""


@click.group()
def hardware() -> None:
    """Describe the machine infragen runs on (for estimate --hardware)."""


@hardware.command()
@click.option("--repeats", type=click.IntRange(1, 100), default=10, show_default=True,
              help="Passes over the buffer per process (the best counts).")
@click.option("--buffer-mib", type=click.IntRange(1, 65536), default=None,
              help="Bytes streamed, MiB (default: 8 x the last-level cache, at least 256; smaller measures caches).")
def probe(repeats: int, buffer_mib: int | None) -> None:
    """Measure cores, SIMD flags, memory and memory bandwidth; print a --hardware YAML file."""
    from infragen.catalog import load_catalog
    from infragen.probe import probe as run_probe
    from infragen.sizing.hardware import hardware_from_document

    doc = run_probe(repeats=repeats, buffer_bytes=buffer_mib * 1024**2 if buffer_mib else None)
    hardware_from_document(doc, load_catalog(), where="hardware probe output")  # what estimate will accept
    click.echo(HEADER.format(as_of=doc["measured"]["as_of"]) + yaml.safe_dump(doc, sort_keys=False), nl=False)


__all__ = ["hardware"]
