"""`infragen render`: write each node role's cloud-init user-data for a plan (or a workload, planned first).

Reads and writes files only; the rendering itself is infragen.render's, the planning infragen.sizing's.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import click

from infragen.cli.output import prepare_dir, write_into
from infragen.errors import InputError
from infragen.plan import Plan, load_plan


@click.command()
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(path_type=Path), required=True,
              help="Directory to write replica.yaml, or head.yaml and worker.yaml, into.")
@click.option("--head-address", default=None, metavar="IP",
              help="Private IP of the multi-node head (the provisioner fixes it). Default: 10.0.0.10.")
@click.option("--llama-cpp-repo", default=None, metavar="URL",
              help="Git URL llama.cpp nodes clone the pinned tag from (a mirror). Default: llama.cpp's own repository.")
def render(source: Path, out_dir: Path, head_address: str | None, llama_cpp_repo: str | None) -> None:
    """Write the user-data of every node role of SOURCE (a plan .json, or a workload .yaml to plan first)."""
    from infragen.render import DEFAULT_HEAD_ADDRESS, LLAMA_CPP_REPO, render_all

    if head_address is not None:
        try:
            ipaddress.IPv4Address(head_address)
        except ValueError:
            raise InputError(f"--head-address: {head_address!r} is not an IPv4 address") from None
    plan = _load(source)
    files = render_all(plan, head_address=head_address or DEFAULT_HEAD_ADDRESS,
                       llama_cpp_repo=llama_cpp_repo or LLAMA_CPP_REPO)
    prepare_dir(out_dir)
    for name, text in files.items():
        path = write_into(out_dir, name, text)
        click.echo(f"{path}  {len(text.encode())} bytes")
    click.echo(f"plan {plan.digest}: {plan.workload}, {plan.deployment.nodes} x {plan.deployment.instance_type}")


def _load(source: Path) -> Plan:
    try:
        is_file, exists = source.is_file(), source.exists()
    except OSError as exc:  # a name too long to look up, a loop of links
        raise InputError(f"{source}: cannot be read: {(exc.strerror or type(exc).__name__).lower()}") from None
    if not is_file:
        raise InputError(f"{source} does not exist" if not exists else f"{source}: not a plan or workload file")
    if source.suffix == ".json":
        return load_plan(source)
    import infragen.sizing as sizing  # a broken sizing package is a bug: let its ImportError show

    plan_file = getattr(sizing, "plan_file", None)
    if plan_file is None:
        raise InputError(f"{source}: planning a workload needs infragen.sizing.plan_file, which this build lacks",
                         fix="pass a plan JSON written by `infragen plan --out`")
    plan: Plan = plan_file(source)
    return plan
