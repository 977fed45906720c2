"""Alibaba-only boot steps, run for real with bash in a sandbox: the GPU driver auto-install (hardened-metadata
token, installer arguments, one reboot, resume), the in-VPC PyPI mirror and ModelScope downloads."""

from __future__ import annotations

import hashlib
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


def _sdist_install(tmp_path: Path, content: bytes | None = None) -> tuple[Path, Path, list[str], Any]:
    """infragen-install's engine step of the Alibaba CPU plan (tools already installed) against a local index that
    serves a small stand-in sdist; `content` replaces the archive served (a tampered mirror). Returns (root,
    calls file, the index's requests, the result)."""
    from tests.pypi_index import local_index
    from tests.render.test_boot_sources import fake_sdist

    plan = make_plan("cpu", "alicloud")
    source = plan.bootstrap.engine_source if plan.bootstrap else None
    assert source is not None and source.index_url == MIRROR, "Alibaba llama.cpp plans build from the sdist"
    served = tmp_path / "served" / source.file
    served.parent.mkdir()
    fake_sdist(served, source.tree)
    sha256 = hashlib.sha256(served.read_bytes()).hexdigest()
    if content is not None:
        served.write_bytes(content)
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    fake(bin_dir, "git", f'echo "git $*" >> {calls}; exit 1\n')
    fake(bin_dir, "cmake", f'echo "cmake $*" >> {calls}; if [ "$1" = --build ]; then mkdir -p "$2/bin"; '
         'printf "#!/bin/bash\\necho version: 1\\n" > "$2/bin/llama-server"; chmod +x "$2/bin/llama-server"; fi\n')
    with local_index(source.package, [served]) as index:
        plan = _with(plan, bootstrap={"engine_source": {**source.model_dump(mode="json"), "index_url": index.url,
                                                        "sha256": sha256}})
        root = sandbox(plan, "replica", tmp_path / "root")
        (root / "opt/infragen").mkdir(parents=True, exist_ok=True)
        (root / "opt/infragen/.installed-tools").touch()
        result = run(root, "infragen-install", bin_dir)
    return root, calls, index.requests, result


def test_llama_cpp_is_built_from_the_pinned_sdist_fetched_through_the_mirror(tmp_path: Path) -> None:
    """Issue 17: llama.cpp on Alibaba without its git host. The source is the sdist on the plan's index (the
    in-VPC mirror), checked by sha256, unpacked, and built with the same cmake flags plus the pinned build id."""
    root, calls, requests, result = _sdist_install(tmp_path)
    assert result.returncode == 0, result.stderr
    source = make_plan("cpu", "alicloud").bootstrap.engine_source  # type: ignore[union-attr]
    assert requests == [f"/simple/{source.package}/", f"/packages/{source.file}"]
    lines = calls.read_text().splitlines()
    assert not [line for line in lines if line.startswith("git")], "no git clone on Alibaba"
    configure = next(line for line in lines if line.startswith("cmake -S")).split()
    assert configure[2] == f"{root}/opt/infragen/src/{source.tree}"
    for flag in ("-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DGGML_NATIVE=ON", "-DBUILD_SHARED_LIBS=OFF",
                 f"-DLLAMA_BUILD_NUMBER={source.build_number}", f"-DLLAMA_BUILD_COMMIT={source.commit[:9]}"):
        assert flag in configure
    assert (root / "opt/infragen/llama.cpp/bin/llama-server").is_file()
    assert (root / "opt/infragen/.installed-llamacpp-b11312").exists()
    text = render_user_data(make_plan("cpu", "alicloud"), "replica")
    assert "git clone" not in text and "- git\n" not in text
    # AWS keeps the git clone of the release tag (its nodes reach the git host).
    assert "git clone --depth 1 --branch" in render_user_data(make_plan("cpu", "aws"), "replica")


def test_an_sdist_that_does_not_match_the_pinned_sha256_is_never_unpacked(tmp_path: Path) -> None:
    root, calls, _, result = _sdist_install(tmp_path, content=b"not the pinned archive")
    assert result.returncode != 0
    assert "not the pinned" in result.stderr and "giving up after 5 attempts: fetch_sdist" in result.stderr
    assert not calls.exists() or not [line for line in calls.read_text().splitlines() if line.startswith("cmake")]
    assert not list((root / "opt/infragen/src").iterdir()), "nothing of the tampered archive stays on disk"
    assert not (root / "opt/infragen/.installed-llamacpp-b11312").exists()


def test_the_cn_beijing_llama_cpp_example_reaches_only_modelscope_and_the_in_vpc_mirror(tmp_path: Path) -> None:
    """Issue 17's done-when on the CPU example (examples/ali-cpu-edge.yaml, cn-beijing, planned for real): the
    GGUF comes from ModelScope (Qwen's GGUF repository there, one file), every pip install and the llama.cpp
    source go to Alibaba's in-VPC PyPI mirror, and nothing is cloned with git or read from Hugging Face."""
    from infragen.sizing import plan_file
    from tests.render.test_boot_sources import fake_sdist

    plan = plan_file(Path(__file__).resolve().parents[2] / "examples" / "ali-cpu-edge.yaml")
    assert plan.deployment.region == "cn-beijing" and plan.engine.name == "llama.cpp"
    assert plan.model.weights_source == "modelscope"
    assert (plan.model.weights_uri, plan.model.weights_file) == ("qwen/Qwen2.5-1.5B-Instruct-GGUF",
                                                                 "qwen2.5-1.5b-instruct-q4_k_m.gguf")
    source = plan.bootstrap.engine_source if plan.bootstrap else None
    assert source is not None and source.index_url == MIRROR
    root = sandbox(plan, "replica", tmp_path / "root")
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    sdist = fake_sdist(tmp_path / "fake.tar.gz", source.tree)
    # python3: `-m venv DIR` makes the recording pip; `- INDEX PACKAGE FILE SHA256 DEST` (the sdist fetch) records
    # where it fetches from and leaves a stand-in archive at DEST.
    _fake_venv_python(bin_dir, calls)
    venv = (bin_dir / "python3").read_text().removeprefix("#!/bin/bash\n")
    fake(bin_dir, "python3", f'if [ "$1" = - ]; then echo "sdist $2 $3 $4" >> {calls}; cp {sdist} "$6"; exit 0; fi\n'
         + venv)
    fake(bin_dir, "git", f'echo "git $*" >> {calls}; exit 1\n')
    fake(bin_dir, "cmake", 'if [ "$1" = --build ]; then mkdir -p "$2/bin"; '
         'printf "#!/bin/bash\\necho version: 1\\n" > "$2/bin/llama-server"; chmod +x "$2/bin/llama-server"; fi\n')
    assert (result := run(root, "infragen-install", bin_dir)).returncode == 0, result.stderr
    lines = calls.read_text().splitlines()
    pips = [line for line in lines if line.startswith("pip ")]
    assert pips and all(line.startswith(f"pip {MIRROR} mirrors.cloud.aliyuncs.com ") for line in pips)
    assert any("modelscope==" in line for line in pips) and not any("huggingface" in line for line in pips)
    assert [line for line in lines if line.startswith("sdist ")] == [
        f"sdist {MIRROR} llama-cpp-python {source.file}"]
    assert not [line for line in lines if line.startswith("git")]
    calls.unlink()
    tools = root / "opt/infragen/tools/bin"
    tools.mkdir(parents=True, exist_ok=True)
    fake(tools, "modelscope", f'echo "modelscope $*" >> {calls}\n')
    assert (result := run(root, "infragen-fetch-model", bin_dir)).returncode == 0, result.stderr
    (line,) = calls.read_text().splitlines()
    assert line.startswith("modelscope download --model qwen/Qwen2.5-1.5B-Instruct-GGUF "
                           f"qwen2.5-1.5b-instruct-q4_k_m.gguf --local_dir {root}/")
    text = render_user_data(plan, "replica")
    secrets = next(f["content"] for f in yaml.safe_load(text)["write_files"] if f["path"].endswith("secrets"))
    assert "hf-token" not in secrets and "HF_ENDPOINT" not in text
