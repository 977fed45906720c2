"""End to end, Alibaba-flavoured: plan a llama.cpp workload whose weights are an oss:// object and whose API key
is in KMS, render its user-data with the real templates and boot it on this machine (tests/e2e/node.py) against
the local stand-in for the ECS metadata service, KMS and OSS (tests/e2e/alibaba.py: documented response shapes;
every request's signature, STS token, action, secret name, bucket and key verified). The node installs Alibaba's
SDKs for real (pip) and its alicloud.py calls go through them. llama.cpp is NOT built here: the root disk is
seeded with the AWS boot's build (one build per CI run); run alone, this test builds it itself, as an Alibaba node
does: from the llama-cpp-python sdist (sha256-checked) fetched from a local index standing in for the in-VPC mirror.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from pathlib import Path

import pytest

from infragen.plan import Plan
from infragen.render import render_user_data
from tests.e2e.alibaba import METADATA_HOST, ROLE, alibaba_cloud
from tests.e2e.boot import API_KEY, HOST_PATHS, EngineBuild, chat_checks, make_node, plan_workload
from tests.e2e.conftest import LlamaRepo, need
from tests.e2e.node import SERVICE_PATH
from tests.e2e.tiny_gguf import write_tiny_gguf
from tests.pypi_index import LocalIndex, local_index

pytestmark = pytest.mark.e2e

WORKLOAD = "e2e-tiny-alicloud.yaml"


def _without_mirror(plan: Plan, sdist_index: str) -> tuple[Plan, str]:
    """The plan with its in-VPC PyPI mirror removed (unreachable here; pip uses this machine's index) and its
    llama.cpp sdist fetched from `sdist_index` (a local index serving the cached sdist) instead."""
    boot = plan.bootstrap
    mirror = str(boot.pip_index_url) if boot and boot.pip_index_url else ""
    if boot is None or not mirror:
        return plan, ""
    source = boot.engine_source.model_copy(update={"index_url": sdist_index}) if boot.engine_source else None
    bootstrap = boot.model_copy(update={"pip_index_url": None, "pip_trusted_host": None, "engine_source": source})
    return plan.model_copy(update={"bootstrap": bootstrap}), mirror


def test_an_alibaba_node_reads_kms_and_oss_with_its_ram_role_and_answers(
        tmp_path: Path, llama_repo: LlamaRepo, engine_build: EngineBuild) -> None:
    for tool in ("git", "cmake", "c++", "curl", "python3"):
        need(shutil.which(tool, path=SERVICE_PATH) is not None, f"{tool} is not installed (.ci/run installs it)")
    need(importlib.util.find_spec("gguf") is not None, "gguf is not installed (pip install -e '.[e2e]'; .ci/run does)")
    host_before = {p: os.path.lexists(p) for p in HOST_PATHS}
    with local_index("llama-cpp-python", [llama_repo.sdist]) as sdist_index:
        _boot_alibaba_node(tmp_path, llama_repo, engine_build, sdist_index)
    assert {p: os.path.lexists(p) for p in HOST_PATHS} == host_before


def _boot_alibaba_node(tmp_path: Path, llama_repo: LlamaRepo, engine_build: EngineBuild,
                       sdist_index: LocalIndex) -> None:
    plan, mirror = _without_mirror(plan_workload(tmp_path, WORKLOAD), sdist_index.url)
    assert plan.engine.name == "llama.cpp" and plan.deployment.cloud == "alicloud"
    assert plan.bootstrap and plan.bootstrap.engine_source, "Alibaba nodes build llama.cpp from the sdist"
    assert plan.deployment.gpus_per_node == 0 and plan.engine.version == llama_repo.tag
    assert plan.model.weights_source == "oss" and plan.model.weights_file
    gguf = write_tiny_gguf(tmp_path / plan.model.weights_file).read_bytes()
    bucket, _, key = plan.model.weights_uri.removeprefix("oss://").partition("/")
    user_data = render_user_data(plan, "replica", llama_cpp_repo=llama_repo.url)
    with alibaba_cloud(plan.deployment.region) as cloud:
        cloud.secrets[plan.secrets.api_key_name] = API_KEY  # no hf-token: the weights are not on Hugging Face
        cloud.put_object(bucket, key, gguf)
        # The redirects: KMS and OSS calls to the stand-in (alicloud.py's INFRAGEN_ALICLOUD_ENDPOINT_URL), the
        # metadata host through it as an HTTP proxy (Alibaba's SDK honours HTTP_PROXY; the request still names
        # 100.100.100.200).
        node = make_node(tmp_path, {"INFRAGEN_ALICLOUD_ENDPOINT_URL": cloud.url, "HTTP_PROXY": cloud.url})
        if mirror:
            node.adjustments.append(f"the plan's PyPI mirror {mirror} removed (pip uses this machine's index; the "
                                    f"llama.cpp sdist comes from a local index serving {llama_repo.sdist.name})")
        node.write_user_data(user_data, plan.storage.mount_path)
        seeded = engine_build.seed(node)
        try:
            # First boot: storage, install (tools venv with Alibaba's SDKs; the engine step skipped when seeded),
            # secrets from KMS, weights from OSS, engine, ready.
            node.boot()
            journal = node.journal()
            assert cloud.refused == [], cloud.refused
            assert "READY: e2e-tiny" in journal and "weights complete" in journal
            assert "boot tools already installed" not in journal
            built = f"installed llama.cpp {plan.engine.version}" in journal
            assert built is not seeded, journal[-3000:]
            # Built here only when not seeded: then from the sdist (index page, then the archive), never git.
            assert sdist_index.requests == ([] if seeded else ["/simple/llama-cpp-python/",
                                                               f"/packages/{llama_repo.sdist.name}"])
            stored = node.path(plan.storage.mount_path) / plan.model.weights_file
            assert hashlib.sha256(stored.read_bytes()).digest() == hashlib.sha256(gguf).digest()
            # The role's STS credentials came from the metadata service in hardened mode (token before every
            # read; the stand-in refuses reads without it), then signed the KMS and OSS calls.
            metadata = [r for r in cloud.requests if r.startswith("metadata")]
            assert metadata[0] == "metadata PUT /latest/api/token"
            assert f"metadata GET /latest/meta-data/ram/security-credentials/{ROLE}" in metadata
            assert f"kms GetSecretValue {plan.secrets.api_key_name}" in cloud.requests
            assert [r for r in cloud.requests if r.startswith("oss")] == [f"oss HEAD {bucket}/{key}",
                                                                          f"oss GET {bucket}/{key}"]
            assert METADATA_HOST == "100.100.100.200"
            chat_checks(plan, node, (API_KEY,))

            # Reboot: secrets are read again (/run is a tmpfs); tools, engine and weights are not fetched again.
            first = len(cloud.requests)
            node.shutdown()
            node.boot()
            journal = "\n".join(v for k, v in node.logs.items() if k.startswith("2/"))
            assert "boot tools already installed" in journal
            assert f"llama.cpp {plan.engine.version} already installed" in journal
            assert "weights already on" in journal and "downloading" not in journal
            assert "READY: e2e-tiny" in journal
            again = cloud.requests[first:]
            assert f"kms GetSecretValue {plan.secrets.api_key_name}" in again
            assert not [r for r in again if r.startswith("oss")], again
            assert cloud.refused == [], cloud.refused
            chat_checks(plan, node, (API_KEY,))
        finally:
            node.shutdown()
            print("\ne2e alicloud: harness adjustments: " + "; ".join(node.adjustments))
            print(f"e2e alicloud: boots took {', '.join(f'{s:.0f} s' for s in node.boot_seconds)}"
                  f" ({'seeded with the AWS boot' if seeded else 'the first with the build'})")
            print(f"e2e alicloud: {len(cloud.requests)} requests to the stand-in, {len(cloud.refused)} refused")
    assert node.boot_seconds[1] < 120, "the second boot reinstalled or re-downloaded something"
