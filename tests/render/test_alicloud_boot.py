"""Alibaba-only boot steps, run for real with bash in a sandbox: the GPU driver auto-install (hardened-metadata
token, installer arguments, one reboot, resume), the in-VPC PyPI mirror and ModelScope downloads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from infragen.plan import Plan
from infragen.render import render_user_data
from tests.plan_factory import make_plan
from tests.render.test_scripts import fake, run, sandbox

MIRROR = "http://mirrors.cloud.aliyuncs.com/pypi/simple/"


def _with(plan: Plan, **sections: dict[str, Any]) -> Plan:
    data = plan.model_dump(mode="json", exclude={"digest"})
    for section, fields in sections.items():
        data[section] = {**(data.get(section) or {}), **fields}
    return Plan.model_validate(data)


def _driver_sandbox(tmp_path: Path, plan: Plan) -> tuple[Path, Path, Path]:
    root = sandbox(plan, "head" if plan.deployment.nodes_per_replica > 1 else "replica", tmp_path / "root")
    script = root / "usr/local/sbin/infragen-gpu-driver"
    text = script.read_text()
    for node_path in ("/var/lib/infragen", "/root/auto_install"):
        text = text.replace(node_path, f"{root}{node_path}")
    script.write_text(text)
    return root, tmp_path / "bin", tmp_path / "calls"


def test_driver_step_installs_with_a_metadata_token_then_reboots_once(tmp_path: Path) -> None:
    plan = make_plan("multinode", "alicloud")
    root, bin_dir, calls = _driver_sandbox(tmp_path, plan)
    fake(bin_dir, "nvidia-smi", "exit 9\n")
    # curl: the token PUT, then metadata GETs that demand the token, then the installer download.
    fake(bin_dir, "curl", f"""
echo "curl $*" >> {calls}
case "$*" in
  *"-X PUT"*"api/token"*) echo tok-123 ;;
  *meta-data/source-address*)
    case "$*" in
      *"X-aliyun-ecs-metadata-token: tok-123"*) echo http://mirrors.cloud.aliyuncs.com ;;
      *) exit 22 ;;
    esac ;;
  *auto_install_v4.0.sh*)
    out=$(echo "$*" | sed -n 's/.*-o \\([^ ]*\\).*/\\1/p'); printf 'echo "installer $*" >> {calls}\\n' > "$out" ;;
  *) exit 7 ;;
esac
""")
    fake(bin_dir, "systemctl", f'echo "systemctl $*" >> {calls}\n')
    fake(bin_dir, "sleep", "exit 1\n")  # the step waits for the reboot; here the wait ends at once
    result = run(root, "infragen-gpu-driver", bin_dir)
    lines = calls.read_text().splitlines()
    assert "X-aliyun-ecs-metadata-token-ttl-seconds: 300" in lines[0] and "-X PUT" in lines[0]
    download = next(line for line in lines if "auto_install_v4.0.sh" in line)
    assert "http://mirrors.cloud.aliyuncs.com/opsx/ecs/linux/binary/script/auto_install_v4.0.sh" in download
    # Driver, CUDA, cuDNN, RDMA no, eRDMA yes (multi-node over eRDMA).
    assert "installer 550.127.08 12.4.1 9.2.0.82 FALSE TRUE" in lines
    assert lines[-1] == "systemctl reboot"
    assert result.returncode != 0 and "rebooting" in result.stderr  # never falls through to the next step
    assert (root / "var/lib/infragen/driver").exists()
    # After the reboot the driver loads: the step is a no-op and the chain goes on.
    fake(bin_dir, "nvidia-smi", "echo 550.127.08\n")
    assert (again := run(root, "infragen-gpu-driver", bin_dir)).returncode == 0, again.stderr
    # A driver that still fails after the install-and-reboot is an error, not a reboot loop.
    fake(bin_dir, "nvidia-smi", "exit 9\n")
    stuck = run(root, "infragen-gpu-driver", bin_dir)
    assert stuck.returncode != 0 and "nvidia-smi fails" in stuck.stderr
    assert calls.read_text().count("systemctl reboot") == 1


UBUNTU_DRIVER = {"driver_version": "580.159.03", "method": "ubuntu-archive", "ubuntu_drivers_id": "nvidia:580-server",
                 "packages": ["nvidia-utils-580-server"], "fabric_manager_package": "nvidia-fabricmanager-580",
                 "erdma": True, "erdma_installer_url": "http://mirrors.cloud.aliyuncs.com/erdma/env_setup.sh",
                 "cuda_version": None, "cudnn_version": None, "installer": None, "installer_path": None}


def test_cuda_13_driver_comes_from_ubuntu_with_fabric_manager_on_nvswitch_and_erdma(tmp_path: Path) -> None:
    plan = _with(make_plan("multinode", "alicloud"), bootstrap={"gpu_driver": UBUNTU_DRIVER})
    root, bin_dir, calls = _driver_sandbox(tmp_path, plan)
    fake(bin_dir, "nvidia-smi", "exit 9\n")
    fake(bin_dir, "lspci", 'echo "0000:05:00.0 0680: 10de:22a3 (rev a1)"\n')  # an NVSwitch bridge
    for tool in ("apt-get", "ubuntu-drivers", "systemctl"):
        fake(bin_dir, tool, f'echo "{tool} $*" >> {calls}\n')
    fake(bin_dir, "curl", f"""echo "curl $*" >> {calls}
out=$(echo "$*" | sed -n 's/.*-o \\([^ ]*\\).*/\\1/p'); printf 'echo "erdma-installer $*" >> {calls}\\n' > "$out"
""")
    fake(bin_dir, "sleep", "exit 1\n")
    result = run(root, "infragen-gpu-driver", bin_dir)
    lines = calls.read_text().splitlines()
    assert lines[0] == "apt-get -qy update"
    assert "apt-get -qy install --no-install-recommends ubuntu-drivers-common pciutils nvidia-utils-580-server" in lines
    assert "ubuntu-drivers install --gpgpu nvidia:580-server" in lines
    assert "apt-get -qy install nvidia-fabricmanager-580" in lines and "systemctl enable nvidia-fabricmanager" in lines
    assert any("http://mirrors.cloud.aliyuncs.com/erdma/env_setup.sh" in line for line in lines)
    assert "erdma-installer --egs" in lines
    assert not any("metadata" in line or "auto_install_v4.0.sh" in line for line in lines)  # not Alibaba's script
    assert lines[-1] == "systemctl reboot" and result.returncode != 0
    # After the reboot: the driver answers, but an NVSwitch node also needs Fabric Manager running.
    fake(bin_dir, "nvidia-smi", "echo 580.159.03\n")
    fake(bin_dir, "systemctl", 'case "$*" in "is-active -q nvidia-fabricmanager") exit 3 ;; esac\n')
    stopped = run(root, "infragen-gpu-driver", bin_dir)
    assert stopped.returncode != 0 and "nvidia-fabricmanager not running" in stopped.stderr
    fake(bin_dir, "systemctl", "exit 0\n")
    assert (ok := run(root, "infragen-gpu-driver", bin_dir)).returncode == 0, ok.stderr
    # A node without NVSwitch installs no Fabric Manager.
    (root / "var/lib/infragen/driver").unlink()
    calls.unlink()
    fake(bin_dir, "nvidia-smi", "exit 9\n")
    fake(bin_dir, "lspci", "exit 0\n")
    fake(bin_dir, "systemctl", f'echo "systemctl $*" >> {calls}\n')
    run(root, "infragen-gpu-driver", bin_dir)
    assert "fabricmanager" not in calls.read_text() and "systemctl reboot" in calls.read_text()


def test_driver_step_runs_first_and_only_when_the_plan_names_a_driver() -> None:
    text = render_user_data(make_plan("single", "alicloud"), "replica")
    boot = next(f["content"] for f in yaml.safe_load(text)["write_files"] if f["path"].endswith("boot.service"))
    steps = [line.split("/")[-1] for line in boot.splitlines() if line.startswith("ExecStart=")]
    assert steps[:2] == ["infragen-gpu-driver", "infragen-gpu-check"]
    for plan in (make_plan("single", "aws"), make_plan("cpu", "alicloud"),
                 _with(make_plan("single", "alicloud"), bootstrap={"gpu_driver": None})):
        assert "infragen-gpu-driver" not in render_user_data(plan, "replica")


def test_gpu_check_says_who_provided_the_driver() -> None:
    """On Alibaba the driver step installs the driver (and eRDMA): the check says so, and the image otherwise."""
    def check(plan: Plan, role: str = "replica") -> str:
        text = render_user_data(plan, role, head_address=None if role == "replica" else "10.0.0.10")
        return next(f["content"] for f in yaml.safe_load(text)["write_files"] if f["path"].endswith("gpu-check"))

    multi = make_plan("multinode", "alicloud")
    installed = check(multi, "head")
    driver = multi.bootstrap.gpu_driver if multi.bootstrap else None
    assert driver is not None and driver.erdma
    assert f"infragen-gpu-driver installed the plan's NVIDIA driver ({driver.driver_version}) and the eRDMA stack" \
        in installed and "image provides" not in installed and "the image" not in installed
    assert "the driver infragen-gpu-driver installed does not work" in installed
    for plan in (make_plan("single", "aws"), _with(make_plan("single", "alicloud"), bootstrap={"gpu_driver": None})):
        text = check(plan)
        assert "# The image provides the NVIDIA driver" in text and "infragen-gpu-driver" not in text


def _fake_venv_python(bin_dir: Path, calls: Path) -> None:
    """A `python3` whose `-m venv DIR` makes a pip that records its mirror settings and arguments."""
    fake(bin_dir, "python3", f"""
dir=$3; mkdir -p "$dir/bin"
printf '#!/bin/bash\\necho "pip $PIP_INDEX_URL $PIP_TRUSTED_HOST $*" >> {calls}\\n' > "$dir/bin/pip"
printf '#!/bin/bash\\nexit 0\\n' > "$dir/bin/vllm"
chmod +x "$dir/bin/pip" "$dir/bin/vllm"
""")


def test_pip_installs_go_to_the_in_vpc_mirror(tmp_path: Path) -> None:
    root = sandbox(make_plan("single", "alicloud"), "replica", tmp_path / "root")
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    _fake_venv_python(bin_dir, calls)
    assert (result := run(root, "infragen-install", bin_dir)).returncode == 0, result.stderr
    lines = calls.read_text().splitlines()
    assert lines and all(line.startswith(f"pip {MIRROR} mirrors.cloud.aliyuncs.com ") for line in lines)
    # AWS nodes keep PyPI.
    assert "PIP_INDEX_URL" not in render_user_data(make_plan("single", "aws"), "replica")


def test_modelscope_weights_download_with_the_modelscope_cli(tmp_path: Path) -> None:
    plan = make_plan("single", "alicloud")
    argv = list(plan.engine.argv)
    argv[2] = "/opt/models/qwen2-7b"
    plan = _with(plan, model={"weights_source": "modelscope", "weights_uri": "Qwen/Qwen2-7B-Instruct"},
                 engine={"argv": argv}, bootstrap={"hf_endpoint": "https://hf-mirror.example"})
    text = render_user_data(plan, "replica")
    assert '"modelscope==' in text and "huggingface_hub" not in text
    assert "HF_ENDPOINT=https://hf-mirror.example" in text
    root = sandbox(plan, "replica", tmp_path / "root")
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    tools = root / "opt/infragen/tools/bin"
    tools.parent.mkdir(parents=True)
    fake(tools, "modelscope", f'echo "modelscope $*" >> {calls}\n')
    assert (result := run(root, "infragen-fetch-model", bin_dir)).returncode == 0, result.stderr
    (line,) = calls.read_text().splitlines()
    assert line.startswith(f"modelscope download --model Qwen/Qwen2-7B-Instruct --local_dir {root}/opt/models/qwen2-7b")
    # The HF token is neither fetched nor needed for ModelScope.
    secrets = next(f["content"] for f in yaml.safe_load(text)["write_files"] if f["path"].endswith("secrets"))
    assert "hf-token" not in secrets


def test_the_cn_beijing_example_downloads_from_modelscope_through_the_in_vpc_mirrors(tmp_path: Path) -> None:
    """Issue 17's done-when, on the real mainland example (examples/ali-chat-7b.yaml, cn-beijing): every pip
    install (the engine and the ModelScope CLI) goes to Alibaba's in-VPC PyPI mirror, and the weights come from
    ModelScope, with no Hugging Face token read."""
    from infragen.sizing import plan_file

    plan = plan_file(Path(__file__).resolve().parents[2] / "examples" / "ali-chat-7b.yaml")
    assert plan.deployment.region == "cn-beijing" and plan.model.weights_source == "modelscope"
    root = sandbox(plan, "replica", tmp_path / "root")
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    _fake_venv_python(bin_dir, calls)
    assert (result := run(root, "infragen-install", bin_dir)).returncode == 0, result.stderr
    pips = calls.read_text().splitlines()
    assert pips and all(line.startswith(f"pip {MIRROR} mirrors.cloud.aliyuncs.com ") for line in pips)
    assert any("modelscope==" in line for line in pips), "the ModelScope CLI comes through the mirror too"
    calls.unlink()
    tools = root / "opt/infragen/tools/bin"
    tools.mkdir(parents=True, exist_ok=True)
    fake(tools, "modelscope", f'echo "modelscope $*" >> {calls}\n')
    assert (result := run(root, "infragen-fetch-model", bin_dir)).returncode == 0, result.stderr
    (line,) = calls.read_text().splitlines()
    assert line.startswith(f"modelscope download --model {plan.model.weights_uri} --local_dir {root}/")
    text = render_user_data(plan, "replica")
    secrets = next(f["content"] for f in yaml.safe_load(text)["write_files"] if f["path"].endswith("secrets"))
    assert "hf-token" not in secrets
