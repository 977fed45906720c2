"""llama.cpp source for the end-to-end boot, with no access to llama.cpp's own repository: the source that the
`llama-cpp-python` sdist vendors (vendor/llama.cpp), committed to a local git repository and tagged with the
plan's pinned release tag, so the rendered `git clone --branch <tag> <repo>` runs unchanged against it.

`python -m tests.e2e.llama_source` prints the sdist version for the pinned tag (.ci/run downloads it).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
WORKLOAD = FIXTURES / "e2e-tiny.yaml"


@dataclass(frozen=True)
class Vendored:
    """Which llama-cpp-python sdist stands in for a llama.cpp release tag."""

    sdist_version: str
    """llama-cpp-python version whose sdist vendors the source."""
    exact: bool
    """True when the vendored commit is the tag's own commit; False when it is only of the same period."""
    note: str
    """Where the correspondence comes from."""


#: llama.cpp release tag (engines.yaml's pin) -> the sdist that vendors it. The vendored commit itself is read
#: from the sdist's CHANGELOG.md ("## [<version>] ... llama.cpp@<commit>") and recorded in the local repository.
#: Moving the pin to a tag not listed here makes the end-to-end test fail and name this table.
VENDORED: dict[str, Vendored] = {
    "b11312": Vendored(
        "0.3.36", exact=True,
        note="llama-cpp-python 0.3.36's CHANGELOG: llama.cpp@0c1e57098, the commit engines.yaml pins for b11312"),
    "b4600": Vendored(
        "0.3.7", exact=False,
        note="llama-cpp-python 0.3.7's CHANGELOG: llama.cpp@794fe23f29fb (ggml-ci ran it 2025-01-28); b4600 is of "
             "the same week, but that this commit is exactly b4600 was not verified (no access to the tag)"),
}


def pinned_tag() -> str:
    """The llama.cpp tag the planner pins today: planned from the e2e workload, as the test plans it."""
    from infragen.sizing import plan_file

    return str(plan_file(WORKLOAD).engine.version)


def vendored_for(tag: str) -> Vendored:
    if tag not in VENDORED:
        raise LookupError(f"llama.cpp {tag} has no llama-cpp-python sdist in tests/e2e/llama_source.py VENDORED; add "
                          "the version whose CHANGELOG names the tag's commit")
    return VENDORED[tag]


def vendored_commit(sdist: Path, version: str) -> str:
    """The llama.cpp commit the sdist's CHANGELOG.md says this version vendors."""
    with tarfile.open(sdist) as tar:
        member = tar.extractfile(f"llama_cpp_python-{version}/CHANGELOG.md")
        if member is None:
            raise LookupError(f"{sdist} has no CHANGELOG.md")
        text = member.read().decode()
    section = text.split(f"## [{version}]", 1)[-1].split("\n## [", 1)[0]
    found = re.search(r"llama\.cpp@([0-9a-f]{7,40})", section)
    if not found:
        raise LookupError(f"{sdist}: CHANGELOG section {version} names no llama.cpp commit")
    return found.group(1)


def local_repository(sdist: Path, tag: str, dest: Path) -> tuple[str, str]:
    """A git repository at `dest` holding the sdist's vendored llama.cpp, tagged `tag`; (file:// URL, commit).

    Reused when `dest` already has the tag (one extraction per cache directory)."""
    version = vendored_for(tag).sdist_version
    commit = vendored_commit(sdist, version)
    git = ["git", "-C", str(dest), "-c", "user.name=infragen-e2e", "-c", "user.email=e2e@infragen.invalid"]
    if (dest / ".git").is_dir() and subprocess.run([*git, "rev-parse", "-q", "--verify", f"refs/tags/{tag}"],
                                                   capture_output=True).returncode == 0:
        return f"file://{dest}", commit
    subprocess.run(["rm", "-rf", str(dest)], check=True)
    dest.mkdir(parents=True)
    prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
    with tarfile.open(sdist) as tar:
        members = []
        for m in tar.getmembers():
            # vendor/llama.cpp/.git is the submodule's gitlink into the parent's .git: not source.
            if m.name.startswith(prefix) and len(m.name) > len(prefix) and \
                    m.name[len(prefix):].split("/")[0] != ".git":
                m.name = m.name[len(prefix):]
                members.append(m)
        if not members:
            raise LookupError(f"{sdist} vendors no llama.cpp source under {prefix}")
        tar.extractall(dest, members=members, filter="tar")
    for args in (["init", "-q"], ["add", "-A", "-f"],
                 ["commit", "-q", "-m", f"llama.cpp {commit} as vendored by llama-cpp-python {version}"],
                 ["tag", tag]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return f"file://{dest}", commit


def sdist_name(version: str) -> str:
    return f"llama_cpp_python-{version}.tar.gz"


if __name__ == "__main__":
    tag = pinned_tag()
    print(vendored_for(tag).sdist_version)
    sys.exit(0)


__all__ = ["VENDORED", "Vendored", "local_repository", "pinned_tag", "vendored_commit", "vendored_for"]
