"""The rendered boot scripts, run for real with bash in a sandbox: fake cloud CLIs on PATH, node paths moved
under a temporary root, a local HTTP server standing in for the engine. Asserts what they do, not how they look.
"""

from __future__ import annotations

import http.server
import json
import socket
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import yaml

from infragen.plan import Plan
from infragen.render import render_user_data
from tests.e2e.cloud import metadata_service
from tests.plan_factory import SENTINEL_SECRET, make_plan
from tests.render.support import tool

NODE_DIRS = ("/usr/local/lib/infragen", "/usr/local/sbin", "/run/infragen", "/opt/infragen", "/opt/models")
HF_SENTINEL = "hf_SENTINELsentinelSENTINELsentinel0000"


def sandbox(plan: Plan, role: str, root: Path, *, fast: bool = True, **render: str) -> Path:
    """Write the role's files under `root` with every node path moved there; returns root."""
    text = render_user_data(plan, role, head_address="10.0.0.10" if role != "replica" else None, **render)
    for f in yaml.safe_load(text)["write_files"]:
        content = f["content"]
        for d in NODE_DIRS:
            content = content.replace(d, f"{root}{d}")
        if fast:  # the same control flow without the real back-off delays
            for slow, quick in (("sleep 10", "sleep 0.05"), ("sleep 15", "sleep 0.05"), ('sleep "$delay"', "sleep 0")):
                content = content.replace(slow, quick)
        path = root / f["path"].lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        path.chmod(int(f.get("permissions", "0644"), 8))  # cloud-init writes 0644 by default
    return root


def fake(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


def run(root: Path, script: str, bin_dir: Path, *args: str,
        imds: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run a node script with fakes first on PATH; `imds`: the metadata stub's URL (AWS scripts ask it)."""
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(root),
           # Never the real link-local metadata address from a test: a closed local port unless a stub is given.
           "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds or "http://127.0.0.1:9/"}
    return subprocess.run([tool("bash"), str(root / "usr/local/sbin" / script), *args], capture_output=True,
                          text=True, env=env, timeout=60)


AWS_SECRETS = f"""
case "$*" in
  *api-key*) echo {SENTINEL_SECRET} ;;
  *hf-token*) echo {HF_SENTINEL} ;;
  *) exit 254 ;;
esac
"""


def test_secrets_land_in_0600_files_and_never_in_the_logs(tmp_path: Path) -> None:
    root = sandbox(make_plan("single"), "replica", tmp_path / "root")
    fake(tmp_path / "bin", "aws", AWS_SECRETS)
    result = run(root, "infragen-secrets", tmp_path / "bin")
    assert result.returncode == 0, result.stderr
    run_dir = root / "run/infragen"
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    for name in ("api-key", "engine.env", "auth-header", "hf-token"):
        assert stat.S_IMODE((run_dir / name).stat().st_mode) == 0o600, name
    assert (run_dir / "engine.env").read_text() == f"VLLM_API_KEY={SENTINEL_SECRET}\n"
    assert (run_dir / "auth-header").read_text() == f"Authorization: Bearer {SENTINEL_SECRET}\n"
    assert (run_dir / "api-key").read_text() == SENTINEL_SECRET
    assert (run_dir / "hf-token").read_text() == HF_SENTINEL
    assert SENTINEL_SECRET not in result.stdout + result.stderr
    assert HF_SENTINEL not in result.stdout + result.stderr


def test_unreadable_or_mangling_secrets_fail_loudly(tmp_path: Path) -> None:
    root = sandbox(make_plan("single"), "replica", tmp_path / "root")
    fake(tmp_path / "bin", "aws", 'echo "AccessDenied" >&2; exit 254\n')
    result = run(root, "infragen-secrets", tmp_path / "bin")
    assert result.returncode != 0 and "FATAL: cannot read secret infragen/test-single-aws/api-key" in result.stderr
    assert "attempt 7 of 8 failed" in result.stderr  # retried with back-off before giving up
    fake(tmp_path / "bin", "aws", 'echo "two words"\n')
    result = run(root, "infragen-secrets", tmp_path / "bin")
    assert result.returncode != 0 and "contains whitespace" in result.stderr
    assert "two words" not in result.stderr


def test_model_download_calls_the_hf_cli_until_it_works_then_is_a_no_op(tmp_path: Path) -> None:
    plan = make_plan("cpu")
    root = sandbox(plan, "replica", tmp_path / "root")
    (root / "run/infragen").mkdir(parents=True)
    (root / "run/infragen/hf-token").write_text(HF_SENTINEL)
    calls = tmp_path / "calls"
    cli = root / "opt/infragen/tools/bin/hf"
    cli.parent.mkdir(parents=True)
    # Fails once (the retry path), then records its arguments and whether it saw the token.
    cli.write_text(f'#!/bin/bash\nif [ ! -e {tmp_path}/failed ]; then touch {tmp_path}/failed; exit 1; fi\n'
                   f'echo "$* token=${{HF_TOKEN:+set}}" >> {calls}\n')
    cli.chmod(0o755)
    assert (result := run(root, "infragen-fetch-model", tmp_path / "bin")).returncode == 0, result.stderr
    assert run(root, "infragen-fetch-model", tmp_path / "bin").returncode == 0
    lines = calls.read_text().splitlines()
    assert lines == [f"download --quiet TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf "
                     f"--local-dir {root}/opt/models token=set"]


class _Engine(http.server.BaseHTTPRequestHandler):
    """Stands in for vLLM: /health at once, completions only with the API key and after two 503s."""

    completions: ClassVar[list[dict[str, object]]] = []
    busy: ClassVar[int] = 2

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.headers.get("Authorization") != f"Bearer {SENTINEL_SECRET}":
            self.send_response(401)
        elif type(self).busy > 0:
            type(self).busy -= 1
            self.send_response(503)
        else:
            type(self).completions.append(body)
            self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")


@pytest.fixture
def engine_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    _Engine.completions, _Engine.busy = [], 2
    server = http.server.HTTPServer(("127.0.0.1", port), _Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield port
    server.shutdown()


def _on_port(plan: Plan, port: int) -> Plan:
    argv = [str(port) if a == str(plan.engine.port) else a for a in plan.engine.argv]
    return plan.model_copy(update={"engine": plan.engine.model_copy(update={"port": port, "argv": argv})})


def test_ready_waits_for_a_one_token_completion(tmp_path: Path, engine_port: int) -> None:
    tool("curl")
    root = sandbox(_on_port(make_plan("single"), engine_port), "replica", tmp_path / "root")
    (root / "run/infragen").mkdir(parents=True)
    (root / "run/infragen/auth-header").write_text(f"Authorization: Bearer {SENTINEL_SECRET}\n")
    # Not in an Auto Scaling group (rendered by hand): no launch hook to complete, still READY.
    fake(tmp_path / "bin", "aws", 'case "$*" in *describe-auto-scaling-instances*) echo None ;; *) exit 9 ;; esac\n')
    with metadata_service() as imds:
        result = run(root, "infragen-ready", tmp_path / "bin", imds=imds.url)
    assert result.returncode == 0, result.stderr
    assert "no launch hook to complete" in result.stderr
    assert (root / "run/infragen/ready").exists()
    assert "READY: test-single-aws" in result.stderr
    assert _Engine.completions == [{"model": "qwen2-7b", "prompt": "Hello", "max_tokens": 1}]
    assert SENTINEL_SECRET not in result.stdout + result.stderr


def test_ready_fails_when_the_key_is_refused(tmp_path: Path, engine_port: int) -> None:
    tool("curl")
    plan = _on_port(make_plan("single"), engine_port)
    plan = plan.model_copy(update={"network": plan.network.model_copy(update={"health_check_grace_s": 1})})
    root = sandbox(plan, "replica", tmp_path / "root")
    (root / "run/infragen").mkdir(parents=True)
    (root / "run/infragen/auth-header").write_text("Authorization: Bearer wrong\n")
    result = run(root, "infragen-ready", tmp_path / "bin")
    assert result.returncode != 0 and "no one-token completion" in result.stderr
    assert not (root / "run/infragen/ready").exists()


def _disk_fakes(bin_dir: Path, calls: Path, table: str, *, mounted: str = "", size_gib: int = 3576) -> None:
    """Block-device tools answering from `table` (lsblk -dbno NAME,TYPE,SIZE,MODEL) and recording changes."""
    record = f'echo "$(basename "$0") $*" >> {calls}\n'
    fake(bin_dir, "findmnt", "echo /dev/nvme0n1p1\n")
    fake(bin_dir, "lsblk", f"""
case "$*" in
  "-no PKNAME /dev/nvme0n1p1") echo nvme0n1 ;;
  "-dbno NAME,TYPE,SIZE,MODEL") cat <<'TABLE'
{table}TABLE
  ;;
  "-nro MOUNTPOINT /dev/nvme1n1") echo "{mounted}" ;;
  -nro*) echo ;;
  *) echo "unexpected lsblk $*" >&2; exit 1 ;;
esac
""")
    fake(bin_dir, "mountpoint", "exit 1\n")
    fake(bin_dir, "blkid", "exit 2\n")
    fake(bin_dir, "udevadm", "exit 0\n")
    fake(bin_dir, "df", f"echo Size; echo ' {size_gib}'\n")
    for name in ("mdadm", "mkfs.xfs", "mount"):
        fake(bin_dir, name, record)


INSTANCE_STORE = (
    "nvme0n1 disk 107374182400 Amazon Elastic Block Store\n"
    "nvme1n1 disk 1900000000000 Amazon EC2 NVMe Instance Storage\n"
    "nvme2n1 disk 1900000000000 Amazon EC2 NVMe Instance Storage\n"
)


def test_storage_stripes_every_instance_store_disk(tmp_path: Path) -> None:
    root = sandbox(make_plan("packed"), "replica", tmp_path / "root")
    calls = tmp_path / "calls"
    _disk_fakes(tmp_path / "bin", calls, INSTANCE_STORE)
    result = run(root, "infragen-storage", tmp_path / "bin")
    assert result.returncode == 0, result.stderr
    assert calls.read_text().splitlines() == [
        "mdadm --create /dev/md/infragen --level=0 --raid-devices=2 --run --force /dev/nvme1n1 /dev/nvme2n1",
        "mkfs.xfs -f -L infragen-models /dev/md/infragen",
        f"mount -o noatime /dev/md/infragen {root}/opt/models",
    ]
    assert "found 2 instance-store disks; the plan expects 1" in result.stderr


def test_storage_reuses_a_mounted_instance_store(tmp_path: Path) -> None:
    root = sandbox(make_plan("packed"), "replica", tmp_path / "root")
    calls = tmp_path / "calls"
    _disk_fakes(tmp_path / "bin", calls, INSTANCE_STORE, mounted="/opt/dlami/nvme")
    assert (result := run(root, "infragen-storage", tmp_path / "bin")).returncode == 0, result.stderr
    assert calls.read_text().splitlines() == [f"mount --bind /opt/dlami/nvme {root}/opt/models"]


def test_storage_fails_loudly_without_enough_space(tmp_path: Path) -> None:
    root = sandbox(make_plan("packed"), "replica", tmp_path / "root")
    _disk_fakes(tmp_path / "bin", tmp_path / "calls", INSTANCE_STORE, size_gib=50)
    result = run(root, "infragen-storage", tmp_path / "bin")
    assert result.returncode != 0 and "has 50 GiB; the plan needs 200 GiB" in result.stderr


def test_storage_mounts_the_data_volume_of_the_planned_size(tmp_path: Path) -> None:
    root = sandbox(make_plan("single"), "replica", tmp_path / "root")  # 60 GiB gp3 volume
    calls = tmp_path / "calls"
    table = ("nvme0n1 disk 107374182400 Amazon Elastic Block Store\n"
             f"nvme1n1 disk {60 * 2**30} Amazon Elastic Block Store\n")
    _disk_fakes(tmp_path / "bin", calls, table, size_gib=60)
    assert (result := run(root, "infragen-storage", tmp_path / "bin")).returncode == 0, result.stderr
    assert calls.read_text().splitlines() == [
        "mkfs.xfs -f -L infragen-models /dev/nvme1n1", f"mount -o noatime /dev/nvme1n1 {root}/opt/models"]


def test_gpu_check_fails_loudly_on_a_missing_driver_or_gpus(tmp_path: Path) -> None:
    plan = make_plan("multinode")  # 8 GPUs per node, EFA
    root = sandbox(plan, "worker", tmp_path / "root")
    bin_dir = tmp_path / "bin"
    fake(bin_dir, "nvidia-smi", "exit 9\n")
    result = run(root, "infragen-gpu-check", bin_dir)
    assert result.returncode != 0 and "FATAL: nvidia-smi failed" in result.stderr
    gpus = "".join(f"echo 'GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})'\n" for i in range(7))
    fake(bin_dir, "nvidia-smi", f'if [ "${{1:-}}" = -L ]; then\n{gpus}fi\n')
    result = run(root, "infragen-gpu-check", bin_dir)
    assert result.returncode != 0 and "lists 7 GPUs; the plan (p5.48xlarge) expects 8" in result.stderr
    gpus += "echo 'GPU 7: NVIDIA H100 80GB HBM3 (UUID: GPU-7)'\n"
    fake(bin_dir, "nvidia-smi", f'if [ "${{1:-}}" = -L ]; then\n{gpus}else echo "NVIDIA H100 80GB HBM3, 550.90"; fi\n')
    fake(bin_dir, "fi_info", "exit 61\n")
    result = run(root, "infragen-gpu-check", bin_dir)
    assert result.returncode != 0 and "no EFA device" in result.stderr
    fake(bin_dir, "fi_info", "echo 'provider: efa'; echo '    domain: rdmap0s0-rdm'\n")
    result = run(root, "infragen-gpu-check", bin_dir)
    assert result.returncode == 0, result.stderr
    assert "8 GPUs" in result.stderr and "EFA devices: 1" in result.stderr


def test_install_pins_the_engine_version_once(tmp_path: Path) -> None:
    plan = make_plan("multinode")
    root = sandbox(plan, "head", tmp_path / "root")
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    # python3 -m venv DIR makes DIR/bin/pip (records its arguments) and DIR/bin/vllm.
    fake(bin_dir, "python3", f"""
dir=$3; mkdir -p "$dir/bin"
printf '#!/bin/bash\\necho "%s/pip $*" >> {calls}\\n' "$dir" > "$dir/bin/pip"
printf '#!/bin/bash\\nexit 0\\n' > "$dir/bin/vllm"
chmod +x "$dir/bin/pip" "$dir/bin/vllm"
""")
    fake(bin_dir, "aws", "exit 0\n")  # the image has an AWS CLI: none is installed
    assert (result := run(root, "infragen-install", bin_dir)).returncode == 0, result.stderr
    lines = [line.replace(str(root), "") for line in calls.read_text().splitlines()]
    assert "/opt/infragen/venv/pip install -q vllm==0.34.0 ray" in lines
    assert "/opt/infragen/tools/pip install -q huggingface_hub==0.36.2" in lines
    assert not any("awscli" in line for line in lines)
    assert run(root, "infragen-install", bin_dir).returncode == 0
    assert len(calls.read_text().splitlines()) == len(lines)  # second boot: marker, nothing reinstalled


def test_ray_worker_joins_the_head_from_its_own_address(tmp_path: Path) -> None:
    root = sandbox(make_plan("multinode", "alicloud"), "worker", tmp_path / "root")
    bin_dir = tmp_path / "bin"
    fake(bin_dir, "ip", 'echo "10.0.0.10 via 10.0.1.1 dev eth0 src 10.0.1.23 uid 0"\n')
    ray = root / "opt/infragen/venv/bin/ray"
    ray.parent.mkdir(parents=True)
    ray.write_text('#!/bin/bash\necho "ray $* VLLM_HOST_IP=$VLLM_HOST_IP"\n')
    ray.chmod(0o755)
    result = run(root, "infragen-ray", bin_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ("ray start --block --address=10.0.0.10:6379 --node-ip-address=10.0.1.23 "
                                     "--num-gpus=8 VLLM_HOST_IP=10.0.1.23")


def test_ray_head_waits_until_every_gpu_has_joined(tmp_path: Path) -> None:
    # Alibaba's plan: an AWS (EFA) head first checks fi_info and memlock (tests/provision/test_aws_efa.py).
    root = sandbox(make_plan("multinode", "alicloud"), "head", tmp_path / "root")
    venv = root / "opt/infragen/venv/bin"
    venv.mkdir(parents=True)
    counts = tmp_path / "counts"
    counts.write_text("0\n8\n16\n")
    # ray.cluster_resources()["GPU"] as the cluster grows: the head alone, then each worker.
    (venv / "python").write_text(f'#!/bin/bash\nhead -n 1 {counts}\nsed -i 1d {counts}\n')
    (venv / "ray").write_text('#!/bin/bash\necho "ray $*"\n')
    for exe in ("python", "ray"):
        (venv / exe).chmod(0o755)
    result = run(root, "infragen-ray", tmp_path / "bin", "wait")
    assert result.returncode == 0, result.stderr
    assert "Ray cluster has 8 of 16 GPUs" in result.stderr and "all 16 GPUs joined" in result.stderr
    assert result.stdout.strip() == "ray status"
    head = run(root, "infragen-ray", tmp_path / "bin")
    assert head.stdout.strip() == "ray start --block --head --port=6379 --node-ip-address=10.0.0.10 --num-gpus=8"


def test_storage_accepts_a_disk_sized_to_the_required_space(tmp_path: Path) -> None:
    """Alibaba sizes the data disk max(volume_gib, required_gib): that disk is the volume too."""
    plan = make_plan("single", "alicloud")
    plan = plan.model_copy(update={"storage": plan.storage.model_copy(update={"volume_gib": 40, "required_gib": 60})})
    root = sandbox(plan, "replica", tmp_path / "root")
    calls = tmp_path / "calls"
    table = f"vda disk {60 * 2**30} \nvdb disk {60 * 2**30} \n"  # the root disk has the same size: skipped
    _disk_fakes(tmp_path / "bin", calls, table, size_gib=60)
    fake(tmp_path / "bin", "findmnt", "echo /dev/vda1\n")
    lsblk = (tmp_path / "bin" / "lsblk").read_text().replace('/dev/nvme0n1p1") echo nvme0n1', '/dev/vda1") echo vda')
    assert '"-no PKNAME /dev/vda1") echo vda' in lsblk
    (tmp_path / "bin" / "lsblk").write_text(lsblk)
    assert (result := run(root, "infragen-storage", tmp_path / "bin")).returncode == 0, result.stderr
    assert calls.read_text().splitlines() == [
        "mkfs.xfs -f -L infragen-models /dev/vdb", f"mount -o noatime /dev/vdb {root}/opt/models"]


AWS_TARGETS = """
echo "$*" >> "$CALLS"
case "$*" in
  *describe-auto-scaling-instances*) echo grp ;;
  *describe-auto-scaling-groups*) echo arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/tg/1 ;;
  *register-targets*|*complete-lifecycle-action*) ;;
  *) exit 9 ;;
esac
"""


def _lb_ports_sandbox(tmp_path: Path) -> tuple[Path, Path]:
    plan = make_plan("packed")
    root = sandbox(plan, "replica", tmp_path / "root")
    script = root / "usr/local/sbin/infragen-lb-ports"
    script.write_text(script.read_text().replace('sleep "$DRAIN_S"', "sleep 0").replace("while sleep 5", "while :"))
    (root / "run/infragen").mkdir(parents=True)
    calls = tmp_path / "calls"
    fake(tmp_path / "bin", "aws", f'CALLS={calls}\n' + AWS_TARGETS)
    return root, calls


def test_packed_node_registers_and_drains_its_other_engine_ports(tmp_path: Path) -> None:
    """The group registers port 8000; the node adds 8001-8003 to the group's one target group by id and port, and
    takes them out (once) before its engines stop."""
    root, calls = _lb_ports_sandbox(tmp_path)
    with metadata_service({"instance-id": "i-0abc"}) as imds:
        assert run(root, "infragen-lb-ports", tmp_path / "bin", "register", imds=imds.url).returncode == 0
        for _ in range(2):
            result = run(root, "infragen-lb-ports", tmp_path / "bin", "deregister", imds=imds.url)
            assert result.returncode == 0, result.stderr
    lines = calls.read_text().splitlines()
    targets = "--targets Id=i-0abc,Port=8001 Id=i-0abc,Port=8002 Id=i-0abc,Port=8003"
    tg = "--target-group-arn arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/tg/1"
    assert f"elbv2 register-targets --region us-east-1 {tg} {targets}" in lines
    assert [line for line in lines if "deregister-targets" in line] == [
        f"elbv2 deregister-targets --region us-east-1 {tg} {targets}"]
    assert not any("Port=8000" in line for line in lines)  # the Auto Scaling group's own registration


def test_packed_node_deregisters_then_completes_the_termination_hook(tmp_path: Path) -> None:
    root, calls = _lb_ports_sandbox(tmp_path)
    state = {"instance-id": "i-0abc", "autoscaling/target-lifecycle-state": "Terminated"}
    with metadata_service(state) as imds:
        result = run(root, "infragen-lb-ports", tmp_path / "bin", "watch", imds=imds.url)
    assert result.returncode == 0, result.stderr
    lines = calls.read_text().splitlines()
    dereg = next(i for i, line in enumerate(lines) if "deregister-targets" in line)
    complete = next(i for i, line in enumerate(lines) if "complete-lifecycle-action" in line)
    assert dereg < complete
    assert "--lifecycle-hook-name infragen-drain --instance-id i-0abc --lifecycle-action-result CONTINUE" in lines[
        complete]


def test_lb_ports_are_rendered_only_for_packed_aws_replicas() -> None:
    from infragen.render.cloud_init import node_registered_ports

    assert node_registered_ports(make_plan("packed")) == [8001, 8002, 8003]
    for kind, cloud in (("single", "aws"), ("tp", "aws"), ("multinode", "aws"), ("packed", "alicloud")):
        plan = make_plan(kind, cloud)  # type: ignore[arg-type]
        assert node_registered_ports(plan) == []
        roles = ["head", "worker"] if kind == "multinode" else ["replica"]
        for role in roles:
            text = render_user_data(plan, role, head_address="10.0.0.10" if role != "replica" else None)
            assert "infragen-lb-ports" not in text
    text = render_user_data(make_plan("packed"), "replica")
    files = {f["path"]: f["content"] for f in yaml.safe_load(text)["write_files"]}
    unit = files["/etc/systemd/system/infragen-lb-ports.service"]
    assert "After=infragen-ready.service" in unit and "ExecStop=/usr/local/sbin/infragen-lb-ports deregister" in unit
    assert "infragen-lb-ports.service" in files["/etc/systemd/system/infragen.target"]
