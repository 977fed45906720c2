"""Shared helpers of the render tests: the plan shapes, and real-tool lookup (skip locally, fail under CI)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

SHAPES = ("single", "packed", "tp", "multinode", "cpu")
CLOUDS = ("aws", "alicloud")
CASES = [(kind, cloud) for kind in SHAPES for cloud in CLOUDS]


def tool(name: str) -> str:
    """Path of a command-line tool, looked up on PATH and next to the running Python (venv bin).

    A missing tool skips the test locally, but fails it when the CI environment variable is set.
    """
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found:
        return found
    message = f"{name} is not installed (.ci/run installs it)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI is set, so this is a failure, not a skip")
    pytest.skip(message)


REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
GOLDEN_DIR = REPO / "tests" / "golden" / "render"
#: Set to 1 to rewrite the golden files on purpose (then review the diff).
UPDATE_ENV = "INFRAGEN_UPDATE_GOLDEN"


def example_plan(path: Path):  # type: ignore[no-untyped-def]
    """The planner's plan for an example; skips while infragen.sizing.plan_file does not exist yet."""
    import infragen.sizing as sizing

    plan_file = getattr(sizing, "plan_file", None)
    if plan_file is None:
        pytest.skip("infragen.sizing.plan_file is not written yet (planner engineer)")
    return plan_file(path)


def delivered_bytes(text: str, cloud: str) -> int:
    """What the cloud counts against its 16 KB user-data limit: the bytes its provisioner sends after base64
    decoding (both gzip a text over 16 KB; cloud-init decompresses it), not the rendered text's length."""
    import base64

    if cloud == "aws":
        from infragen.provision.aws.layout import encode_user_data
    else:
        from infragen.provision.alicloud.compute import encode_user_data  # type: ignore[assignment]
    return len(base64.b64decode(encode_user_data(text)))

