"""EFA on AWS multi-node replicas, as the rendered user-data sets it up: the Ray and engine units find the EFA
tools and aws-ofi-nccl without a login shell and may pin memory; the node refuses to start Ray without a usable
EFA provider; readiness proves NCCL runs on NET/OFI. The boot scripts run for real in a sandbox."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from infragen.plan import Plan
from infragen.render import render_user_data
from tests.plan_factory import make_plan
from tests.render.support import REPO, example_plan, tool
from tests.render.test_scripts import fake, sandbox

EFA_BIN = "/opt/amazon/efa/bin"
OFI_NCCL_LIB = "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"


def _files(plan: Plan, role: str) -> dict[str, str]:
    address = None if role == "replica" else "10.0.0.10"
    text = render_user_data(plan, role, head_address=address)
    return {f["path"]: f["content"] for f in yaml.safe_load(text)["write_files"]}


def _service(unit: str) -> dict[str, list[str]]:
    """`Key=value` lines of a unit's [Service] section, grouped by key."""
    section, out = "", {}  # type: ignore[var-annotated]
    for line in unit.splitlines():
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


@pytest.mark.parametrize("role", ["head", "worker"])
def test_ray_and_engine_units_get_the_efa_paths_and_memlock(role: str) -> None:
    files = _files(make_plan("multinode", "aws"), role)
    # The boot unit too: infragen-gpu-check runs fi_info there.
    units = ["/etc/systemd/system/infragen-boot.service", "/etc/systemd/system/infragen-ray.service"]
    if role == "head":
        units.append("/etc/systemd/system/infragen-engine@.service")
    for path in units:
        service = _service(files[path])
        env = dict(v.split("=", 1) for v in service.get("Environment", []) if v.startswith(("PATH=", "LD_LIB")))
        assert env["PATH"].split(":")[0] == EFA_BIN, path
        assert "/usr/bin" in env["PATH"].split(":"), f"{path}: PATH must keep the system directories"
        assert OFI_NCCL_LIB in env["LD_LIBRARY_PATH"].split(":"), path
        assert "/opt/amazon/efa/lib" in env["LD_LIBRARY_PATH"].split(":"), path
        assert service["LimitMEMLOCK"] == ["infinity"], path


def test_arm64_nodes_get_the_aarch64_plugin_directory() -> None:
    plan = make_plan("multinode", "aws")
    plan = plan.model_copy(update={"deployment": plan.deployment.model_copy(update={"cpu_arch": "arm64"})})
    unit = _files(plan, "worker")["/etc/systemd/system/infragen-ray.service"]
    assert "/opt/amazon/ofi-nccl/lib/aarch64-linux-gnu" in unit
    assert "x86_64-linux-gnu" not in unit


@pytest.mark.parametrize(("kind", "cloud"), [("single", "aws"), ("tp", "aws"), ("multinode", "alicloud")])
def test_plans_without_efa_get_none_of_it(kind: str, cloud: str) -> None:
    plan = make_plan(kind, cloud)  # type: ignore[arg-type]
    roles = ["head", "worker"] if kind == "multinode" else ["replica"]
    for role in roles:
        text = "".join(_files(plan, role).values())
        assert "/opt/amazon" not in text and "LimitMEMLOCK" not in text and "NET/OFI" not in text, (kind, role)


def test_planned_efa_env_forces_ofi_and_drops_nccl_proto() -> None:
    plan = example_plan(REPO / "examples" / "multinode-405b.yaml")
    assert plan.network.rdma == "efa"
    env = plan.engine.env
    assert "NCCL_PROTO" not in env  # only aws-ofi-nccl <= 1.5 needed it (aws-ofi-nccl doc/efa-env-var.md)
    assert env["NCCL_NET"] == "AWS Libfabric"  # a missing plugin fails instead of falling back to sockets
    assert env["NCCL_DEBUG"] == "INFO" and "INIT" in env["NCCL_DEBUG_SUBSYS"]  # the NET/OFI line readiness reads
    common = _files(plan, "head")["/etc/infragen/engine-common.env"]
    assert "NCCL_PROTO" not in common and "NCCL_NET=" in common


# --- the scripts, run -----------------------------------------------------------------------------------------


def _run(root: Path, script: str, bin_dir: Path, *, memlock_kib: int | None = None,
         imds: str = "http://127.0.0.1:9/") -> subprocess.CompletedProcess[str]:
    bash = tool("bash")
    prefix = f"ulimit -S -l {memlock_kib}; " if memlock_kib is not None else ""
    cmd = [bash, "-c", f'{prefix}exec "$0" "$1"', bash, str(root / "usr/local/sbin" / script)]
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(root), "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)


def _head(tmp_path: Path, journal: str) -> tuple[Path, Path]:
    root = sandbox(make_plan("multinode", "aws"), "head", tmp_path / "root")
    (root / "run/infragen").mkdir(parents=True, exist_ok=True)
    (root / "run/infragen/auth-header").write_text("Authorization: Bearer x\n")
    bin_dir = tmp_path / "bin"
    # curl: the engine answers; the instance metadata gives an instance id; the node is past its launch hook.
    fake(bin_dir, "curl", 'case "$*" in *meta-data/instance-id*) echo i-0123456789abcdef0 ;; esac\n')
    fake(bin_dir, "aws", "echo None\n")
    fake(bin_dir, "journalctl", f"cat <<'EOF'\n{journal}\nEOF\n")
    return root, bin_dir


OFI_LOG = ("(RayWorkerWrapper pid=812, ip=10.40.0.11) ip-10-40-0-11:812:901 [0] NCCL INFO NET/OFI Initializing "
           "aws-ofi-nccl 1.13.2\n(RayWorkerWrapper pid=812) NCCL INFO Using network AWS Libfabric")


def test_readiness_passes_when_nccl_reports_net_ofi(tmp_path: Path) -> None:
    root, bin_dir = _head(tmp_path, OFI_LOG)
    result = _run(root, "infragen-ready", bin_dir)
    assert result.returncode == 0, result.stderr
    assert "EFA transport:" in result.stderr and "NET/OFI" in result.stderr
    assert (root / "run/infragen/ready").exists()


@pytest.mark.parametrize(("journal", "message"), [
    ("NCCL INFO Bootstrap: Using ens32:10.40.0.10", "no NCCL NET/OFI line"),
    (OFI_LOG + "\nNCCL INFO Using network Socket", "fell back to TCP sockets"),
])
def test_readiness_fails_loudly_without_efa_transport(tmp_path: Path, journal: str, message: str) -> None:
    root, bin_dir = _head(tmp_path, journal)
    result = _run(root, "infragen-ready", bin_dir)
    assert result.returncode != 0
    assert message in result.stderr
    assert not (root / "run/infragen/ready").exists()


@pytest.mark.parametrize(("fi_info", "memlock_kib", "message"), [
    (None, None, "no fi_info on PATH"),
    ("exit 1\n", None, "fi_info finds no efa provider"),
    ("exit 0\n", 64, "locked memory is 64 KiB"),
])
def test_ray_refuses_to_start_without_usable_efa(tmp_path: Path, fi_info: str | None, memlock_kib: int | None,
                                                 message: str) -> None:
    root = sandbox(make_plan("multinode", "aws"), "worker", tmp_path / "root")
    bin_dir = tmp_path / "bin"
    fake(bin_dir, "ip", "echo '10.40.0.10 via 10.40.0.1 dev ens32 src 10.40.0.12 uid 0'\n")
    if fi_info is not None:
        fake(bin_dir, "fi_info", fi_info)
    ray = root / "opt/infragen/venv/bin/ray"
    ray.parent.mkdir(parents=True, exist_ok=True)
    ray.write_text("#!/bin/bash\necho ray-started\n")
    ray.chmod(0o755)
    result = _run(root, "infragen-ray", bin_dir, memlock_kib=memlock_kib)
    assert result.returncode != 0, result.stdout
    assert message in result.stderr
    assert "ray-started" not in result.stdout
