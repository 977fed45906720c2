"""The llama-cpp-python sdist that Alibaba nodes build llama.cpp from is the one engines.yaml pins: the cached copy
(.ci/run downloads it from the package registry on a fresh clone) has the pinned sha256, its vendored tree is the
pinned commit (the archive carries the submodule's git metadata) and holds what the build needs."""

from __future__ import annotations

import hashlib
import tarfile

import pytest

from infragen.catalog.engines import pinned_release
from tests.e2e.conftest import LlamaRepo

pytestmark = pytest.mark.e2e


def test_the_cached_sdist_is_the_pinned_llama_cpp_source_for_alibaba_nodes(llama_repo: LlamaRepo) -> None:
    release = pinned_release("llama.cpp")
    archive = release.sdist
    assert archive is not None and llama_repo.sdist.name == archive.file
    digest = hashlib.sha256()
    with llama_repo.sdist.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    assert digest.hexdigest() == archive.sha256, "the registry's sdist is not the one engines.yaml pins"
    top = archive.tree.split("/")[0]
    with tarfile.open(llama_repo.sdist) as tar:
        names = set(tar.getnames())
        head = tar.extractfile(f"{top}/.git/modules/vendor/llama.cpp/HEAD")
        assert head is not None
        assert head.read().decode().strip() == release.commit
    for needed in ("CMakeLists.txt", "tools/server/CMakeLists.txt", "tools/server/server.cpp", "common/arg.cpp",
                   "ggml/CMakeLists.txt", "cmake/build-info.cmake"):
        assert f"{archive.tree}/{needed}" in names, needed
