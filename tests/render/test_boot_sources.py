"""Where a node fetches what it installs and serves: the llama.cpp clone URL (a render-time setting) and
`s3://` GGUF objects. Found by the end-to-end boot (tests/e2e); each runs the rendered script for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
