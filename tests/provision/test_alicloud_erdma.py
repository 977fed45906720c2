"""Multi-node replicas over eRDMA: the NCCL variables (IB verbs on the erdma devices, no silent socket fallback,
INFO logs), the LL128 MTU rule enforced at every boot, and readiness that proves NCCL runs over eRDMA. The boot
scripts run for real with bash in a sandbox (fake journal, sysfs and `ip`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infragen.sizing import plan_file
from infragen.sizing.bootstrap import select_bootstrap
from tests.plan_factory import make_plan
from tests.render.test_scripts import fake, run, sandbox

ROOT = Path(__file__).resolve().parents[2]
IB_LOG = ("(RayWorkerWrapper pid=812, ip=10.0.0.11) iZ2ze:812:901 [0] NCCL INFO NET/IB : Using [0]erdma_0:1/RoCE "
          "[1]erdma_1:1/RoCE [RO]; OOB eth0:10.0.0.11<0>\n(RayWorkerWrapper pid=812) NCCL INFO Using network IB")


def test_erdma_plans_carry_the_nccl_variables_and_the_mtu_rule() -> None:
    plan = plan_file(ROOT / "examples" / "ali-multinode.yaml")
    assert plan.network.rdma == "erdma" and plan.deployment.nodes_per_replica > 1
    env = plan.engine.env
    assert env["NCCL_IB_HCA"] == "erdma" and env["NCCL_NET"] == "IB" and env["NCCL_IB_DISABLE"] == "0"
    assert env["NCCL_DEBUG"] == "INFO" and "NET" in env["NCCL_DEBUG_SUBSYS"]  # the line readiness reads
    assert "NCCL_NET_GDR_LEVEL" not in env and "NCCL_IB_GID_INDEX" not in env  # GPUDirect on; NCCL picks the GID
    assert plan.bootstrap is not None and plan.bootstrap.erdma_mtus == [1400, 8500]
    single, _ = select_bootstrap(cloud="alicloud", engine="vllm", engine_version="0.34.0", gpu_count=1, erdma=False,
                                 nodes=1, weights_source="modelscope", hf_endpoint=None)
    assert single is not None and single.erdma_mtus == []


def _check_sandbox(tmp_path: Path, mtus: dict[str, int]) -> tuple[Path, Path, Path]:
    root = sandbox(make_plan("multinode", "alicloud"), "worker", tmp_path / "root")
    script = root / "usr/local/sbin/infragen-gpu-check"
    net = tmp_path / "sys/class/net"
    for name, mtu in mtus.items():
        (net / name).mkdir(parents=True)
        (net / name / "mtu").write_text(f"{mtu}\n")
    script.write_text(script.read_text().replace("/sys/class/net", str(net)))
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    fake(bin_dir, "nvidia-smi", 'case "$*" in -L) for i in 0 1 2 3 4 5 6 7; do echo "GPU $i: H20"; done ;; '
                                '*) echo "H20, 580.159.03" ;; esac\n')
    fake(bin_dir, "ibv_devices", "echo '    erdma_0   02163efffe000001'\n")
    fake(bin_dir, "ip", f'echo "ip $*" >> {calls}\n')
    return root, bin_dir, calls


@pytest.mark.parametrize(("mtus", "expected"), [
    ({"eth0": 1500}, ["ip link set eth0 mtu 1400"]),  # ECS default, no jumbo frames: 1400
    ({"eth0": 8500, "eth1": 9000}, ["ip link set eth0 mtu 8500", "ip link set eth1 mtu 8500"]),  # jumbo frames on
    ({"eth0": 1400, "eth1": 1500}, ["ip link set eth0 mtu 1400", "ip link set eth1 mtu 1400"]),
])
def test_every_boot_sets_the_ll128_mtu_on_each_eri(tmp_path: Path, mtus: dict[str, int],
                                                   expected: list[str]) -> None:
    root, bin_dir, calls = _check_sandbox(tmp_path, mtus)
    result = run(root, "infragen-gpu-check", bin_dir)
    assert result.returncode == 0, result.stderr
    assert calls.read_text().splitlines() == expected


def test_the_mtu_step_fails_loudly_when_the_mtu_cannot_be_set(tmp_path: Path) -> None:
    root, bin_dir, _ = _check_sandbox(tmp_path, {"eth0": 1500})
    fake(bin_dir, "ip", "exit 2\n")
    assert run(root, "infragen-gpu-check", bin_dir).returncode != 0


def test_single_node_and_aws_nodes_touch_no_mtu() -> None:
    from infragen.render import render_user_data

    for plan, role in ((make_plan("single", "alicloud"), "replica"), (make_plan("multinode", "aws"), "worker")):
        assert "/sys/class/net" not in render_user_data(plan, role, head_address=None if role == "replica"
                                                        else "10.0.0.10")


def _head(tmp_path: Path, journal: str) -> tuple[Path, Path]:
    root = sandbox(make_plan("multinode", "alicloud"), "head", tmp_path / "root")
    (root / "run/infragen").mkdir(parents=True, exist_ok=True)
    (root / "run/infragen/auth-header").write_text("Authorization: Bearer x\n")
    bin_dir = tmp_path / "bin"
    fake(bin_dir, "curl", "exit 0\n")
    fake(bin_dir, "journalctl", f"cat <<'EOF'\n{journal}\nEOF\n")
    return root, bin_dir


def test_readiness_passes_when_nccl_uses_ib_verbs_on_erdma(tmp_path: Path) -> None:
    root, bin_dir = _head(tmp_path, IB_LOG)
    result = run(root, "infragen-ready", bin_dir)
    assert result.returncode == 0, result.stderr
    assert "eRDMA transport:" in result.stderr and "erdma_0" in result.stderr
    assert (root / "run/infragen/ready").exists()


@pytest.mark.parametrize(("journal", "message"), [
    ("NCCL INFO Bootstrap: Using eth0:10.0.0.10<0>", "no NCCL NET/IB erdma line"),
    ("NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.10<0>", "no NCCL NET/IB erdma line"),
    (IB_LOG + "\nNCCL INFO Using network Socket", "fell back to TCP sockets"),
])
def test_readiness_fails_loudly_without_the_erdma_transport(tmp_path: Path, journal: str, message: str) -> None:
    root, bin_dir = _head(tmp_path, journal)
    result = run(root, "infragen-ready", bin_dir)
    assert result.returncode != 0 and message in result.stderr
    assert not (root / "run/infragen/ready").exists()
