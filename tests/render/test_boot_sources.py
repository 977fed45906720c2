"""Where a node fetches what it installs and serves: the llama.cpp clone URL (a render-time setting) and
`s3://` GGUF objects. Found by the end-to-end boot (tests/e2e); each runs the rendered script for real."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from infragen.errors import InputError
from infragen.render import LLAMA_CPP_REPO, render_user_data
from tests.plan_factory import make_plan
from tests.render.test_scripts import fake, run, sandbox

# python3 -m venv DIR makes a DIR/bin/pip that does nothing.
_VENV = """
dir=$3; mkdir -p "$dir/bin"; printf '#!/bin/bash\\nexit 0\\n' > "$dir/bin/pip"; chmod +x "$dir/bin/pip"
"""


def _llama_cpp_install(tmp_path: Path, **render: str) -> str:
    """Run infragen-install of the CPU plan with fake git/cmake; returns the git command line it ran."""
    root = sandbox(make_plan("cpu"), "replica", tmp_path / "root", **render)
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    fake(bin_dir, "python3", _VENV)
    fake(bin_dir, "aws", "exit 0\n")
    fake(bin_dir, "git", f'echo "git $*" >> {calls}; mkdir -p "${{!#}}"\n')
    # cmake --build leaves the binary where a real build does; the installed one answers --version.
    fake(bin_dir, "cmake", 'if [ "$1" = --build ]; then mkdir -p "$2/bin"; '
         'printf "#!/bin/bash\\necho version: 1\\n" > "$2/bin/llama-server"; chmod +x "$2/bin/llama-server"; fi\n')
    result = run(root, "infragen-install", bin_dir)
    assert result.returncode == 0, result.stderr
    return calls.read_text().strip()


def test_llama_cpp_is_cloned_from_the_rendered_repository(tmp_path: Path) -> None:
    assert _llama_cpp_install(tmp_path / "default").startswith(
        f"git clone --depth 1 --branch b11312 {LLAMA_CPP_REPO} ")
    mirror = "file:///srv/mirrors/llama.cpp"
    assert _llama_cpp_install(tmp_path / "mirror", llama_cpp_repo=mirror).startswith(
        f"git clone --depth 1 --branch b11312 {mirror} ")


def fake_sdist(path: Path, tree: str) -> Path:
    """A gzip tarball holding `tree`/CMakeLists.txt: what an engine_source sdist gives the build."""
    with tarfile.open(path, "w:gz") as tar:
        data = b"project(fake)\n"
        info = tarfile.TarInfo(f"{tree}/CMakeLists.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def _recording_install(tmp_path: Path, cloud: str = "aws") -> tuple[Path, Path, Path]:
    """The CPU plan's infragen-install with fakes that record each call: (root, fakes, calls file). A plan with an
    engine_source gets its sdist from the fake python3's `python3 - INDEX PACKAGE FILE SHA256 DEST` (the fetch)."""
    plan = make_plan("cpu", cloud)
    root = sandbox(plan, "replica", tmp_path / "root")
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    fetch = ""
    if plan.bootstrap and plan.bootstrap.engine_source:
        sdist = fake_sdist(tmp_path / "fake.tar.gz", plan.bootstrap.engine_source.tree)
        fetch = f'if [ "$1" = - ]; then echo "sdist $2 $3 $4 $5" >> {calls}; cp {sdist} "$6"; exit 0; fi\n'
    fake(bin_dir, "python3", fetch + f'echo "venv $3" >> {calls}\n'
         + _VENV.replace("exit 0", f'echo pip "$@" >> {calls}'))
    fake(bin_dir, "aws", "exit 0\n")
    fake(bin_dir, "git", f'echo "git $*" >> {calls}; mkdir -p "${{!#}}"\n')
    fake(bin_dir, "cmake", f'echo "cmake $*" >> {calls}; if [ "$1" = --build ]; then mkdir -p "$2/bin"; '
         'printf "#!/bin/bash\\necho version: 1\\n" > "$2/bin/llama-server"; chmod +x "$2/bin/llama-server"; fi\n')
    return root, bin_dir, calls


def test_llama_cpp_is_built_with_static_libraries(tmp_path: Path) -> None:
    # A shared build's llama-server loads libllama/libggml from the source tree through its RUNPATH (seen in the
    # end-to-end boot: ldd named $SRC/build/bin), so deleting or re-cloning the source broke the installed server.
    root, bin_dir, calls = _recording_install(tmp_path)
    assert run(root, "infragen-install", bin_dir).returncode == 0
    configure = next(line for line in calls.read_text().splitlines() if line.startswith("cmake -S"))
    assert "-DBUILD_SHARED_LIBS=OFF" in configure.split()


@pytest.mark.parametrize("cloud", ["aws", "alicloud"])
def test_llama_cpp_is_built_without_the_pinned_trees_amx_kernels(tmp_path: Path, cloud: str) -> None:
    # The pinned tree's AMX kernels stop with SIGILL (engines.yaml build_cflags_source; seen in the end-to-end boot
    # on an Emerald Rapids VM): both the git and the sdist build take the plan's flags, as one word each.
    from infragen.catalog.engines import pinned_release

    flags = pinned_release("llama.cpp").build_cflags
    assert set(flags) == {"-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16"}
    assert make_plan("cpu", cloud).engine.build_flags == list(flags)
    assert make_plan("single", cloud).engine.build_flags == []  # vLLM comes from wheels
    root, bin_dir, calls = _recording_install(tmp_path, cloud)
    assert run(root, "infragen-install", bin_dir).returncode == 0
    configure = next(line for line in calls.read_text().splitlines() if line.startswith("cmake -S"))
    joined = " ".join(flags)
    assert f"-DCMAKE_C_FLAGS={joined} -DCMAKE_CXX_FLAGS={joined}" in configure


def test_build_flags_in_the_data_are_machine_options_with_a_reason() -> None:
    from infragen.catalog.engines import _build_cflags
    from infragen.errors import DataError

    assert _build_cflags("x", {"build_cflags": ["-mno-avx512f"], "build_cflags_source": "why"}) == ("-mno-avx512f",)
    with pytest.raises(DataError, match="build_cflags_source"):
        _build_cflags("x", {"build_cflags": ["-mno-avx512f"]})
    with pytest.raises(DataError, match="machine options"):
        _build_cflags("x", {"build_cflags": ["-O0"], "build_cflags_source": "why"})


@pytest.mark.parametrize("cloud", ["aws", "alicloud"])
def test_the_boot_tools_and_the_engine_are_installed_by_their_own_markers(tmp_path: Path, cloud: str) -> None:
    # One marker for both made a node whose engine survived (or was seeded) reinstall nothing, tools included;
    # now each step is skipped only by its own marker.
    root, bin_dir, calls = _recording_install(tmp_path, cloud)
    assert (result := run(root, "infragen-install", bin_dir)).returncode == 0, result.stderr
    first = calls.read_text().splitlines()
    assert any(line.startswith("venv ") for line in first) and any(line.startswith("cmake --build") for line in first)
    assert (cloud == "alicloud") == any("alibabacloud_kms20160120==3.3.1" in line for line in first)
    markers = root / "opt/infragen"
    calls.write_text("")
    (markers / ".installed-llamacpp-b11312").unlink()
    assert (result := run(root, "infragen-install", bin_dir)).returncode == 0, result.stderr
    assert "boot tools already installed" in result.stderr
    assert not any(line.startswith(("venv", "pip")) for line in calls.read_text().splitlines())
    assert any(line.startswith("cmake --build") for line in calls.read_text().splitlines())
    calls.write_text("")
    (markers / ".installed-tools").unlink()
    assert (result := run(root, "infragen-install", bin_dir)).returncode == 0, result.stderr
    assert "llama.cpp b11312 already installed" in result.stderr
    assert any(line.startswith("venv") for line in calls.read_text().splitlines())
    assert not any(line.startswith(("git", "cmake", "sdist")) for line in calls.read_text().splitlines())


@pytest.mark.parametrize("url", ["", "llama.cpp", "https://example.test/a b", "file:///x\n- runcmd"])
def test_a_llama_cpp_repo_that_is_not_a_git_url_is_refused(url: str) -> None:
    with pytest.raises(InputError, match="llama_cpp_repo"):
        render_user_data(make_plan("cpu"), "replica", llama_cpp_repo=url)


def _s3_fetch(tmp_path: Path, uri: str) -> list[str]:
    """Run infragen-fetch-model of the CPU plan with GGUF weights at `uri`; the aws commands it ran."""
    plan = make_plan("cpu")
    model = plan.model.model_copy(update={"weights_source": "s3", "weights_uri": uri, "weights_file": "tiny-q8_0.gguf"})
    argv = [a.replace("tinyllama-1.1b-chat-v1.0.Q4_K_M", "tiny-q8_0") for a in plan.engine.argv]
    plan = plan.model_copy(update={"model": model, "engine": plan.engine.model_copy(update={"argv": argv})})
    root = sandbox(plan, "replica", tmp_path / "root")
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    fake(bin_dir, "aws", f'echo "aws $*" >> {calls}\n')
    result = run(root, "infragen-fetch-model", bin_dir)
    assert result.returncode == 0, result.stderr
    return [line.replace(str(root), "") for line in calls.read_text().splitlines()]


def test_an_s3_gguf_object_is_copied_from_its_own_key(tmp_path: Path) -> None:
    # The planner keeps the whole object URI for s3:// GGUF weights (weights_file is its base name).
    assert _s3_fetch(tmp_path / "object", "s3://bucket/models/tiny-q8_0.gguf") == [
        "aws s3 cp --only-show-errors --region us-east-1 s3://bucket/models/tiny-q8_0.gguf "
        "/opt/models/tiny-q8_0.gguf"]
    # A prefix URI still gets the file appended.
    assert _s3_fetch(tmp_path / "prefix", "s3://bucket/models/") == [
        "aws s3 cp --only-show-errors --region us-east-1 s3://bucket/models/tiny-q8_0.gguf "
        "/opt/models/tiny-q8_0.gguf"]


_FAKE_OSS2 = """
import json, os
CALLS = os.environ["FAKE_OSS2_CALLS"]
class ProviderAuthV4:
    def __init__(self, provider): pass
class Bucket:
    def __init__(self, auth, endpoint, name, region=None): self.name = name
def ObjectIterator(bucket, prefix=""):
    raise AssertionError("a single file is fetched by key, not listed")
def resumable_download(bucket, key, target, num_threads=1):
    with open(CALLS, "a") as f: f.write(json.dumps([bucket.name, key, target]) + "\\n")
"""


@pytest.mark.parametrize("uri", ["oss://bucket/models/tiny-q8_0.gguf", "oss://bucket/models/"])
def test_an_oss_gguf_object_is_fetched_from_its_own_key(tmp_path: Path, uri: str) -> None:
    pytest.importorskip("alibabacloud_credentials", reason="the node's Alibaba SDK is not installed here")
    plan = make_plan("cpu", "alicloud")
    model = plan.model.model_copy(update={"weights_source": "oss", "weights_uri": uri,
                                          "weights_file": "tiny-q8_0.gguf"})
    argv = [a.replace("tinyllama-1.1b-chat-v1.0.Q4_K_M", "tiny-q8_0") for a in plan.engine.argv]
    plan = plan.model_copy(update={"model": model, "engine": plan.engine.model_copy(update={"argv": argv})})
    text = render_user_data(plan, "replica")
    helper = next(f["content"] for f in yaml.safe_load(text)["write_files"] if f["path"].endswith("alicloud.py"))
    (tmp_path / "alicloud.py").write_text(helper)
    fake = tmp_path / "fake" / "oss2"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(_FAKE_OSS2)
    (fake / "credentials.py").write_text("class Credentials: pass\nclass CredentialsProvider: pass\n")
    calls = tmp_path / "calls"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "fake"), "FAKE_OSS2_CALLS": str(calls)}
    result = subprocess.run([sys.executable, str(tmp_path / "alicloud.py"), "oss-get", uri, "/opt/models",
                             "cn-hangzhou", "tiny-q8_0.gguf"], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [
        ["bucket", "models/tiny-q8_0.gguf", "/opt/models/tiny-q8_0.gguf"]]


# Stand-ins for every Alibaba SDK module alicloud.py imports; each records where the helper pointed it.
_FAKE_SDK = {
    "alibabacloud_credentials/client.py": "class Client:\n    def __init__(self, config): pass\n",
    "alibabacloud_credentials/models.py": "class Config:\n    def __init__(self, **kw): pass\n",
    "alibabacloud_tea_openapi/models.py":
        "class Config:\n    def __init__(self, credential=None, region_id=None, endpoint=None, protocol=None):\n"
        "        self.endpoint, self.protocol = endpoint, protocol\n",
    "alibabacloud_kms20160120/models.py": "class GetSecretValueRequest:\n    def __init__(self, **kw): pass\n",
    "alibabacloud_kms20160120/client.py":
        "import json, os, types\nclass Client:\n    def __init__(self, config):\n"
        "        line = json.dumps(['kms', config.protocol, config.endpoint])\n"
        "        open(os.environ['FAKE_CALLS'], 'a').write(line + '\\n')\n"
        "    def get_secret_value(self, request):\n"
        "        return types.SimpleNamespace(body=types.SimpleNamespace(secret_data='v'))\n",
    "oss2/__init__.py":
        "import json, os\nclass ProviderAuthV4:\n    def __init__(self, provider): pass\nclass Bucket:\n"
        "    def __init__(self, auth, endpoint, name, region=None):\n"
        "        open(os.environ['FAKE_CALLS'], 'a').write(json.dumps(['oss', endpoint, name, region]) + '\\n')\n"
        "def resumable_download(bucket, key, target, num_threads=1): pass\n",
    "oss2/credentials.py": "class Credentials: pass\nclass CredentialsProvider: pass\n",
}


@pytest.mark.parametrize("endpoint", ["", "http://127.0.0.1:9"])
def test_alibaba_calls_go_to_the_vpc_endpoints_unless_redirected(tmp_path: Path, endpoint: str) -> None:
    # INFRAGEN_ALICLOUD_ENDPOINT_URL is how the end-to-end test reaches its local KMS/OSS stand-in (as
    # AWS_ENDPOINT_URL for the AWS CLI); unset, as on every node, the calls go to Alibaba's VPC endpoints over HTTPS.
    plan = make_plan("cpu", "alicloud")
    gguf = "tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf"  # the CPU plan's --model file
    model = plan.model.model_copy(update={"weights_source": "oss", "weights_uri": f"oss://bucket/m/{gguf}"})
    helper = next(f["content"] for f in yaml.safe_load(render_user_data(plan.model_copy(update={"model": model}),
                                                                        "replica"))["write_files"]
                  if f["path"].endswith("alicloud.py"))
    (tmp_path / "alicloud.py").write_text(helper)
    for path, text in _FAKE_SDK.items():  # regular packages: they shadow any SDK installed here
        (tmp_path / "fake" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "fake" / path).parent.joinpath("__init__.py").touch()
        (tmp_path / "fake" / path).write_text(text)
    calls = tmp_path / "calls"
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path / "fake"), "FAKE_CALLS": str(calls),
           **({"INFRAGEN_ALICLOUD_ENDPOINT_URL": endpoint} if endpoint else {})}
    for args in (["secret", "infragen/x/api-key", "cn-hangzhou"],
                 ["oss-get", f"oss://bucket/m/{gguf}", str(tmp_path), "cn-hangzhou", gguf]):
        result = subprocess.run([sys.executable, str(tmp_path / "alicloud.py"), *args], capture_output=True,
                                text=True, env=env, timeout=60)
        assert result.returncode == 0, result.stderr
    recorded = [json.loads(line) for line in calls.read_text().splitlines()]
    if endpoint:
        assert recorded == [["kms", "http", "127.0.0.1:9"], ["oss", endpoint, "bucket", "cn-hangzhou"]]
    else:
        assert recorded == [["kms", None, "kms-vpc.cn-hangzhou.aliyuncs.com"],
                            ["oss", "https://oss-cn-hangzhou-internal.aliyuncs.com", "bucket", "cn-hangzhou"]]
