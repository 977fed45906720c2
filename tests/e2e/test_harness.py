"""The end-to-end harness itself, on small hand-written units (fast; runs in the default suite): it starts what
the target wants in After= order, stops at the first failing unit, and its leak check finds a planted secret.
So the e2e test cannot pass when a boot script fails, the engine does not answer, or a secret leaks."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.node import SERVICE_PATH, BootFailure, Node, secret_leaks, written_files

SECRET = "sk-harness-SECRET-value"


def _user_data(ready_exit: int = 0, engine: str = "sleep 30; exit 0") -> str:
    """A cloud-config shaped like infragen's: a oneshot chain, an engine@ template, a ready unit, the target."""
    files = {
        "/usr/local/sbin/infragen-a": "#!/bin/bash\necho a >> /run/infragen/order\n",
        "/usr/local/sbin/infragen-b": "#!/bin/bash\necho b >> /run/infragen/order\n",
        "/usr/local/sbin/infragen-ready": f"#!/bin/bash\necho ready >> /run/infragen/order\nexit {ready_exit}\n",
        "/etc/infragen/engine-0.env": "PORT=8123\n",
        "/etc/systemd/system/infragen-boot.service":
            "[Service]\nType=oneshot\nExecStart=/usr/local/sbin/infragen-a\nExecStart=/usr/local/sbin/infragen-b\n",
        "/etc/systemd/system/infragen-engine@.service":
            "[Unit]\nAfter=infragen-boot.service\n[Service]\nEnvironmentFile=/etc/infragen/engine-%i.env\n"
            f"WorkingDirectory=/opt/models\nExecStart=/bin/bash -c \"{engine}\" engine ${{PORT}} --host 0.0.0.0\n",
        "/etc/systemd/system/infragen-ready.service":
            "[Unit]\nAfter=infragen-engine@0.service\n[Service]\nType=oneshot\nExecStart=/usr/local/sbin/infragen-ready\n",
        "/etc/systemd/system/infragen.target":
            "[Unit]\nWants=infragen-ready.service infragen-engine@0.service infragen-boot.service\n",
    }
    import yaml

    entries = [{"path": p, "content": c, **({"permissions": "0755"} if "sbin" in p else {})} for p, c in files.items()]
    return "#cloud-config\n" + yaml.safe_dump({"packages": ["curl"], "write_files": entries})


def _node(tmp_path: Path, **kw: object) -> Node:
    node = Node(root=tmp_path / "node", env={"PATH": SERVICE_PATH})
    node.write_user_data(_user_data(**kw), "/opt/models")  # type: ignore[arg-type]
    node.path("/run/infragen").mkdir(parents=True)
    node.path("/opt/models").mkdir(parents=True)
    return node


def test_units_start_in_after_order_and_files_stay_under_the_root(tmp_path: Path) -> None:
    node = _node(tmp_path)
    try:
        assert [u.name for u in node.boot_order()] == [
            "infragen-boot.service", "infragen-engine@0.service", "infragen-ready.service"]
        node.boot()
        assert node.path("/run/infragen/order").read_text().split() == ["a", "b", "ready"]
        args = (Path("/proc") / str(node.engines[0].pid) / "cmdline").read_bytes().split(b"\0")
        assert args[4:7] == [b"8123", b"--host", b"127.0.0.1"]  # ${PORT} expanded, host moved to loopback
        assert not Path("/usr/local/sbin/infragen-a").exists()
        assert str(node.path("/usr/local/sbin/infragen-a")).startswith(str(tmp_path))
    finally:
        node.shutdown()


def test_a_failing_unit_stops_the_boot(tmp_path: Path) -> None:
    node = _node(tmp_path, ready_exit=3)  # e.g. infragen-ready when the engine never answers
    try:
        with pytest.raises(BootFailure, match=r"infragen-ready\.service: .* exited 3"):
            node.boot()
    finally:
        node.shutdown()


def test_an_engine_that_dies_at_once_fails_the_boot(tmp_path: Path) -> None:
    node = _node(tmp_path, engine="exit 7")
    with pytest.raises(BootFailure, match=r"infragen-engine@0\.service: .* exited 7 at once"):
        node.boot()
    node.shutdown()


def test_the_leak_check_finds_a_planted_secret(tmp_path: Path) -> None:
    node = _node(tmp_path)
    node.path("/run/infragen/api-key").write_text(SECRET)  # where it belongs: not a leak
    assert secret_leaks(node, (SECRET,)) == []
    node.path("/opt/models/debug.log").write_text(f"key={SECRET}\n")
    assert secret_leaks(node, (SECRET,)) == [str(node.path("/opt/models/debug.log"))]
    node.path("/opt/models/debug.log").unlink()
    proc = subprocess.Popen(["bash", "-c", "sleep 30; exit 0", SECRET])
    try:
        for _ in range(50):  # until the child has exec'd bash
            if SECRET.encode() in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                break
            time.sleep(0.1)
        assert any(f"process {proc.pid}:" in leak for leak in secret_leaks(node, (SECRET,)))
    finally:
        proc.kill()
        proc.wait()
    node.logs["1/x/0"] = f"token {SECRET}"
    assert secret_leaks(node, (SECRET,)) == ["the boot journal"]
    assert all(node.path("/run/infragen") not in p.parents for p in written_files(node.root,
                                                                                   exclude=node.path("/run/infragen")))
    assert os.path.exists(node.path("/run/infragen/api-key"))
