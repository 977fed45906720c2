"""Fixtures of the end-to-end boot: the llama.cpp source repository (from the cached llama-cpp-python sdist) and
the build the flavours share."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.boot import EngineBuild
from tests.e2e.llama_source import local_repository, pinned_tag, sdist_name, vendored_for

REPO = Path(__file__).resolve().parents[2]
#: Where .ci/run downloads the sdist and the harness keeps the local llama.cpp repository between runs.
CACHE = Path(os.environ.get("INFRAGEN_E2E_CACHE", REPO / ".ci" / "cache"))


def need(condition: bool, message: str) -> None:
    """Missing prerequisites skip locally and fail when CI is set (like tests/render/support.tool)."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI is set, so this is a failure, not a skip")
    pytest.skip(message)


@dataclass(frozen=True)
class LlamaRepo:
    url: str
    tag: str
    commit: str
    exact: bool
    note: str
    sdist: Path
    """The llama-cpp-python sdist the repository was made from (Alibaba nodes fetch it from their PyPI mirror)."""


@pytest.fixture(scope="session")
def llama_repo() -> LlamaRepo:
    tag = pinned_tag()
    vendored = vendored_for(tag)
    sdist = CACHE / "sdist" / sdist_name(vendored.sdist_version)
    need(sdist.is_file(), f"{sdist} is missing: pip download --no-deps --no-binary :all: "
                          f"llama-cpp-python=={vendored.sdist_version} -d {sdist.parent} (.ci/run does)")
    url, commit = local_repository(sdist, tag, CACHE / f"llama.cpp-{tag}")
    return LlamaRepo(url, tag, commit, vendored.exact, vendored.note, sdist)


@pytest.fixture(scope="session")
def engine_build(tmp_path_factory: pytest.TempPathFactory) -> EngineBuild:
    """The llama.cpp build the AWS boot makes, which the Alibaba boot is seeded with (one build per session)."""
    return EngineBuild(tmp_path_factory.mktemp("llama-build"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The AWS boot builds llama.cpp and keeps it (engine_build); the Alibaba boot, seeded with it, runs after.
    items.sort(key=lambda item: item.nodeid.startswith("tests/e2e/test_boot_alicloud"))
