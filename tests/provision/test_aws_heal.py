"""Heads that heal and traffic gated on readiness, as the rendered AWS node scripts do it: the readiness unit
completes the Auto Scaling launch hook (only then does the group register the node with the load balancer), and
a multi-node head moves its replica's fixed address onto its own interface before Ray starts. The scripts run for
real in a sandbox, against the instance-metadata stub and a fake AWS CLI that records its calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from infragen.plan import Plan
from infragen.render.cloud_init import AWS_LAUNCH_HOOK
from tests.e2e.cloud import INSTANCE_METADATA, metadata_service
from tests.plan_factory import SENTINEL_SECRET, make_plan
from tests.render.support import tool
from tests.render.test_scripts import _on_port, engine_port, fake, run, sandbox  # noqa: F401 (fixture)

INSTANCE_ID = INSTANCE_METADATA["instance-id"]
MAC = INSTANCE_METADATA["mac"]
ENI = INSTANCE_METADATA[f"network/interfaces/macs/{MAC}/interface-id"]
HEAD = "10.0.0.10"  # the address tests.render.test_scripts.sandbox renders for multi-node roles


def fake_aws(bin_dir: Path, calls: Path, describe: str) -> None:
    """An AWS CLI that records every call and answers describe-auto-scaling-instances with `describe`."""
    fake(bin_dir, "aws", f'echo "$*" >> {calls}\n'
                         f'case "$*" in *describe-auto-scaling-instances*) printf "%s\\n" "{describe}" ;; esac\n')


def _ready_node(tmp_path: Path, port: int, key: str = SENTINEL_SECRET, grace_s: int | None = None) -> Path:
    plan = _on_port(make_plan("single", "aws"), port)
    if grace_s is not None:
        plan = plan.model_copy(update={"network": plan.network.model_copy(update={"health_check_grace_s": grace_s})})
    root = sandbox(plan, "replica", tmp_path / "root")
    (root / "run/infragen").mkdir(parents=True)
    (root / "run/infragen/auth-header").write_text(f"Authorization: Bearer {key}\n")
    return root


def _calls(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_readiness_completes_the_launch_hook_then_reports_ready(tmp_path: Path, engine_port: int) -> None:  # noqa: F811
    tool("curl")
    root, calls = _ready_node(tmp_path, engine_port), tmp_path / "calls"
    fake_aws(tmp_path / "bin", calls, "infragen-chat-replicas\tPending:Wait")
    with metadata_service() as imds:
        result = run(root, "infragen-ready", tmp_path / "bin", imds=imds.url)
    assert result.returncode == 0, result.stderr
    describe, complete = _calls(calls)
    assert describe.startswith("autoscaling describe-auto-scaling-instances") and INSTANCE_ID in describe
    assert complete.split() == [
        "autoscaling", "complete-lifecycle-action", "--region", "us-east-1", "--auto-scaling-group-name",
        "infragen-chat-replicas", "--lifecycle-hook-name", AWS_LAUNCH_HOOK, "--instance-id", INSTANCE_ID,
        "--lifecycle-action-result", "CONTINUE"]
    log = result.stderr
    assert log.index("launch hook of infragen-chat-replicas completed") < log.index("READY:")
    assert (root / "run/infragen/ready").exists()
    # IMDSv2: a token first, then the instance id with it.
    assert imds.requests[:2] == ["PUT /latest/api/token", "GET /latest/meta-data/instance-id"]


@pytest.mark.parametrize("state", ["InService", "None"])
def test_a_node_past_its_hook_or_outside_a_group_completes_nothing(tmp_path: Path, engine_port: int,  # noqa: F811
                                                                   state: str) -> None:
    """A reboot (InService) or a node rendered by hand (no group) is ready without a lifecycle call."""
    tool("curl")
    root, calls = _ready_node(tmp_path, engine_port), tmp_path / "calls"
    fake_aws(tmp_path / "bin", calls, "None" if state == "None" else f"grp\t{state}")
    with metadata_service() as imds:
        result = run(root, "infragen-ready", tmp_path / "bin", imds=imds.url)
    assert result.returncode == 0, result.stderr
    assert not [c for c in _calls(calls) if "complete-lifecycle-action" in c]
    assert "no launch hook to complete" in result.stderr and (root / "run/infragen/ready").exists()


def test_a_node_that_never_serves_never_completes_its_hook(tmp_path: Path, engine_port: int) -> None:  # noqa: F811
    """The hook then times out with ABANDON and the group replaces the node; it never takes traffic."""
    tool("curl")
    root, calls = _ready_node(tmp_path, engine_port, key="wrong", grace_s=1), tmp_path / "calls"
    fake_aws(tmp_path / "bin", calls, "grp\tPending:Wait")
    with metadata_service() as imds:
        result = run(root, "infragen-ready", tmp_path / "bin", imds=imds.url)
    assert result.returncode != 0 and "no one-token completion" in result.stderr
    assert _calls(calls) == []


def test_without_instance_metadata_readiness_fails_loudly(tmp_path: Path, engine_port: int) -> None:  # noqa: F811
    tool("curl")
    root = _ready_node(tmp_path, engine_port)
    fake_aws(tmp_path / "bin", tmp_path / "calls", "grp\tPending:Wait")
    result = run(root, "infragen-ready", tmp_path / "bin")  # metadata endpoint: a closed port
    assert result.returncode != 0 and "cannot read the instance id" in result.stderr
    assert not (root / "run/infragen/ready").exists()


# --- the head claims its replica's fixed address -----------------------------------------------------------------


def _no_efa(plan: Plan) -> Plan:
    """The same head without EFA (its own tests are in test_aws_efa.py): the sandbox cannot raise memlock."""
    return plan.model_copy(update={"network": plan.network.model_copy(update={"rdma": "none"})})


def _head(tmp_path: Path, local_ipv4s: str) -> tuple[Path, Path, dict[str, str]]:
    root = sandbox(_no_efa(make_plan("multinode", "aws")), "head", tmp_path / "root")
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    fake_aws(bin_dir, calls, "unused")
    fake(bin_dir, "ip", f'echo "ip $*" >> {calls}\n'
                        f'[ "$1" = -o ] && printf "1: lo: <LOOPBACK> mtu 65536\\n'
                        f'2: ens5: <BROADCAST,MULTICAST,UP> mtu 9001 link/ether {MAC} brd ff:ff:ff:ff:ff:ff\\n"\n'
                        "exit 0\n")
    ray = root / "opt/infragen/venv/bin/ray"
    ray.parent.mkdir(parents=True, exist_ok=True)
    ray.write_text(f'#!/bin/bash\necho "ray $*" >> {calls}\n')
    ray.chmod(0o755)
    values = {**INSTANCE_METADATA, f"network/interfaces/macs/{MAC}/local-ipv4s": local_ipv4s}
    return root, calls, values


def test_head_moves_the_fixed_address_to_itself_before_ray_starts(tmp_path: Path) -> None:
    tool("curl")
    root, calls, values = _head(tmp_path, "10.0.0.57")
    with metadata_service(values) as imds:
        result = run(root, "infragen-ray", tmp_path / "bin", imds=imds.url)
    assert result.returncode == 0, result.stderr
    assign, link, addr, ray = _calls(calls)
    # Taken from the old head if it still holds it (--allow-reassignment); the subnet reserves the address.
    assert assign.split() == ["ec2", "assign-private-ip-addresses", "--region", "us-east-1",
                              "--network-interface-id", ENI, "--private-ip-addresses", HEAD, "--allow-reassignment"]
    assert link == "ip -o link" and addr == f"ip addr replace {HEAD}/32 dev ens5"
    assert ray.startswith("ray start --block --head") and f"--node-ip-address={HEAD}" in ray
    assert f"holding {HEAD} on {ENI} (ens5)" in result.stderr


def test_head_that_already_holds_the_address_only_configures_it(tmp_path: Path) -> None:
    """A restart of the Ray unit (or a reboot): EC2 already routes the address here, Linux may have lost it."""
    tool("curl")
    root, calls, values = _head(tmp_path, f"10.0.0.57\n{HEAD}")
    with metadata_service(values) as imds:
        result = run(root, "infragen-ray", tmp_path / "bin", imds=imds.url)
    assert result.returncode == 0, result.stderr
    assert [c.split()[0] for c in _calls(calls)] == ["ip", "ip", "ray"]


def test_head_refuses_to_start_ray_when_it_cannot_take_the_address(tmp_path: Path) -> None:
    tool("curl")
    root, calls, values = _head(tmp_path, "10.0.0.57")
    fake(tmp_path / "bin", "aws", f'echo "$*" >> {calls}\nexit 254\n')  # e.g. UnauthorizedOperation
    with metadata_service(values) as imds:
        result = run(root, "infragen-ray", tmp_path / "bin", imds=imds.url)
    assert result.returncode != 0 and f"cannot move {HEAD} to {ENI}" in result.stderr
    assert not [c for c in _calls(calls) if c.startswith("ray ")]


def test_alibaba_heads_claim_nothing() -> None:
    """Alibaba heads keep their fixed address on the instance itself; the AWS claim is not rendered there."""
    from infragen.render import render_user_data

    text = render_user_data(make_plan("multinode", "alicloud"), "head", head_address=HEAD)
    assert "assign-private-ip-addresses" not in text and "complete-lifecycle-action" not in text
