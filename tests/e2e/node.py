"""Boot rendered user-data on this machine as a node would, under a temporary root (no change to the host).

What cloud-init does is reproduced faithfully where it matters and stated where it is not: `write_files` is
extracted from the rendered YAML byte for byte (mode as cloud-init sets it) with every node path moved under the
root; `packages` are checked to be installed (the harness does not apt-get); `runcmd`'s `systemctl start
infragen.target` is replaced by a small runner that reads the rendered unit files and starts what the target
wants in the order their After= lines define: oneshot units run their ExecStart lines one by one and stop the
boot on the first failure, simple units (the engine) run in the background, with the units' EnvironmentFile=,
Environment=, WorkingDirectory= and ${VAR} expansion. What it changes, each recorded in `Node.adjustments`:
node paths (under the root), the engine's --host (127.0.0.1: servers in tests listen there only) and
--threads (at most this machine's cores).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

#: Directories and file prefixes a node writes (docs/bootstrap.md "Files on the node"); the model store is added.
NODE_PATHS = ("/usr/local/lib/infragen", "/usr/local/sbin/infragen", "/run/infragen", "/opt/infragen",
              "/etc/infragen", "/etc/systemd/system/infragen")
#: systemd's default PATH for services, without /usr/local (the node's /usr/local/sbin scripts are moved).
SERVICE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
#: Commands that stand for each cloud-init package on the path the harness exercises (volume already mounted:
#: mdadm and xfsprogs are not called).
PACKAGE_COMMANDS = {"curl": ["curl"], "python3-venv": ["python3"], "build-essential": ["cc", "c++", "make"],
                    "cmake": ["cmake"], "git": ["git"], "mdadm": [], "xfsprogs": []}


class BootFailure(AssertionError):
    """A unit of the boot chain failed: which one, which command, its exit status and the end of its log."""


@dataclass
class Unit:
    name: str
    """As the target wants it (`infragen-engine@0.service`)."""
    sections: dict[str, dict[str, list[str]]]
    instance: str = ""

    def values(self, section: str, key: str) -> list[str]:
        return self.sections.get(section, {}).get(key, [])

    def words(self, section: str, key: str) -> list[str]:
        return [w for v in self.values(section, key) for w in v.split()]


@dataclass
class Node:
    """One node's files under `root`, booted by `boot()` (call again for a reboot)."""

    root: Path
    env: dict[str, str]
    """Environment of every unit: systemd's minimal one plus the harness's redirects (emulator endpoints)."""
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    adjustments: list[str] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)
    """Output of every command run, keyed `<boot>/<unit>/<n>` (the journal)."""
    engines: list[subprocess.Popen[bytes]] = field(default_factory=list)
    boots: int = 0
    boot_seconds: list[float] = field(default_factory=list)
    """Wall time of each boot() up to the last unit started (ready passed)."""
    packages: list[str] = field(default_factory=list)

    # --- cloud-init ------------------------------------------------------------------------------------------

    def write_user_data(self, user_data: str, mount_path: str) -> None:
        """cloud-init's write_files (paths under the root) and a check that its packages are installed."""
        data = yaml.safe_load(user_data)
        self.packages = list(data.get("packages", []))
        missing = [c for p in self.packages for c in PACKAGE_COMMANDS[p] if not _which(c)]
        if missing:
            raise BootFailure(f"cloud-init packages {self.packages} need {missing}: missing (.ci/run installs them)")
        prefixes = sorted((*NODE_PATHS, mount_path), key=len, reverse=True)
        self._moved = re.compile(r"(?<![\w/.-])(" + "|".join(re.escape(p) for p in prefixes) + r")")
        for f in data["write_files"]:
            path = self.path(f["path"])
            if path == Path(f["path"]):
                raise BootFailure(f"user-data writes {f['path']}, outside the paths the harness moves")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self.move(f["content"]))
            path.chmod(int(str(f.get("permissions", "0644")), 8))  # cloud-init's default mode is 0644
        self.adjustments.append(f"node paths {', '.join(prefixes)} moved under {self.root}")

    def move(self, text: str) -> str:
        return self._moved.sub(lambda m: f"{self.root}{m.group(1)}", text)

    def path(self, node_path: str) -> Path:
        moved = self.move(node_path)
        return Path(moved) if moved != node_path else Path(node_path)

    # --- systemd -----------------------------------------------------------------------------------------------

    def unit(self, name: str) -> Unit:
        base, at, rest = name.partition("@")
        instance = rest.rsplit(".", 1)[0] if at else ""
        file = f"{base}@.{name.rsplit('.', 1)[1]}" if at else name
        path = self.path(f"/etc/systemd/system/{file}")
        if not path.is_file():
            raise BootFailure(f"unit {name} is wanted but {path.name} was not written")
        return Unit(name, _parse_unit(path.read_text()), instance)

    def boot_order(self) -> list[Unit]:
        """The units infragen.target wants, ordered by their After= lines (a topological order)."""
        target = self.unit("infragen.target")
        wanted = [self.unit(n) for n in target.words("Unit", "Wants")]
        by_name = {u.name: u for u in wanted}
        order: list[Unit] = []
        visiting: set[str] = set()

        def visit(u: Unit) -> None:
            if u in order:
                return
            if u.name in visiting:
                raise BootFailure(f"ordering cycle through {u.name}")
            visiting.add(u.name)
            for after in u.words("Unit", "After"):
                if after in by_name:
                    visit(by_name[after])
            order.append(u)

        for u in wanted:
            visit(u)
        return order

    def boot(self, *, timeout_s: float = 3600) -> None:
        """Start infragen.target: every wanted unit in order; raises BootFailure on the first failure."""
        self.boots += 1
        started = time.monotonic()
        self._start(timeout_s)
        self.boot_seconds.append(time.monotonic() - started)

    def _start(self, timeout_s: float) -> None:
        for u in self.boot_order():
            service = u.sections.get("Service", {})
            kind = (service.get("Type") or ["simple"])[-1]
            env = {**self.env, **self._environment(u)}
            cwd = self.path(service["WorkingDirectory"][-1]) if "WorkingDirectory" in service else self.root
            for n, line in enumerate(service.get("ExecStartPre", [])):
                self._run(u, f"pre{n}", self._argv(u, line, env), env, cwd, timeout_s)
            starts = service.get("ExecStart", [])
            if kind == "oneshot":
                for n, line in enumerate(starts):
                    self._run(u, str(n), self._argv(u, line, env), env, cwd, timeout_s)
            elif kind == "simple" and len(starts) == 1:
                argv = self._engine_argv(self._argv(u, starts[0], env))
                log = self.root / "journal" / f"{self.boots}-{u.name}.log"
                log.parent.mkdir(exist_ok=True)
                with log.open("wb") as out:
                    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
                self.engines.append(proc)
                time.sleep(1)
                if proc.poll() is not None:
                    raise BootFailure(f"{u.name}: {shlex.join(argv)} exited {proc.returncode} at once:\n"
                                      f"{log.read_text(errors='replace')[-3000:]}")
            else:
                raise BootFailure(f"{u.name}: Type={kind} with {len(starts)} ExecStart lines is not supported here")

    def shutdown(self) -> None:
        """Stop the engines this harness started (their process groups), then forget /run (it is a tmpfs)."""
        for proc in self.engines:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=30)
        self.engines = []
        subprocess.run(["rm", "-rf", str(self.path("/run/infragen"))], check=True)

    def journal(self) -> str:
        return "\n".join(self.logs.values())

    # --- helpers -------------------------------------------------------------------------------------------------

    def _run(self, u: Unit, step: str, argv: list[str], env: dict[str, str], cwd: Path, timeout_s: float) -> None:
        try:
            result = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise BootFailure(f"{u.name}: {shlex.join(argv)} still running after {timeout_s:.0f} s") from exc
        output = result.stdout + result.stderr
        self.logs[f"{self.boots}/{u.name}/{step}"] = output
        if result.returncode != 0:
            raise BootFailure(f"{u.name}: {shlex.join(argv)} exited {result.returncode}:\n{output[-3000:]}")

    def _environment(self, u: Unit) -> dict[str, str]:
        env: dict[str, str] = {}
        service = u.sections.get("Service", {})
        for line in service.get("Environment", []):
            for word in shlex.split(line.replace("%i", u.instance)):
                name, _, value = word.partition("=")
                env[name] = value
        for line in service.get("EnvironmentFile", []):
            optional = line.startswith("-")
            path = self.path(line.lstrip("-").replace("%i", u.instance))
            if not path.is_file():
                if optional:
                    continue
                raise BootFailure(f"{u.name}: EnvironmentFile {path} is missing (systemd would not start it)")
            for raw in path.read_text().splitlines():
                raw = raw.strip()
                if raw and not raw.startswith("#"):
                    name, _, value = raw.partition("=")
                    env[name.strip()] = shlex.split(value)[0] if value.strip() else ""
        return env

    def _argv(self, u: Unit, line: str, env: dict[str, str]) -> list[str]:
        """An Exec line as systemd splits it: specifiers, quoting, `${VAR}` (one word) and `$VAR` (split)."""
        if line[:1] in "-@+!:":
            raise BootFailure(f"{u.name}: Exec prefix {line[0]!r} is not supported by the harness")
        text = line.replace("%i", u.instance).replace("%%", "%")
        words: list[str] = []
        for word in shlex.split(text):
            whole = re.fullmatch(r"\$\{(\w+)\}", word)
            split = re.fullmatch(r"\$(\w+)", word)
            if whole:
                words.append(env[whole.group(1)])
            elif split:
                words.extend(env.get(split.group(1), "").split())
            else:
                words.append(word.replace("$$", "$"))
        return words

    def _engine_argv(self, argv: list[str]) -> list[str]:
        """The engine's argv with the two changes this machine needs (recorded)."""
        argv = list(argv)
        for flag, change in (("--host", lambda v: "127.0.0.1"), ("--threads", lambda v: str(min(int(v), self.cores)))):
            if flag in argv:
                i = argv.index(flag) + 1
                new = change(argv[i])
                if new != argv[i]:
                    note = f"engine {flag} {argv[i]} -> {new}"
                    if note not in self.adjustments:
                        self.adjustments.append(note)
                    argv[i] = new
        return argv


def _parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def _which(command: str) -> bool:
    return any(os.access(Path(d) / command, os.X_OK) for d in SERVICE_PATH.split(":"))


def written_files(root: Path, *, exclude: Path) -> Iterator[Path]:
    """Every regular file under `root` except those under `exclude` (the secrets tmpfs)."""
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and exclude not in path.parents:
            yield path


def secret_leaks(node: Node, secrets: tuple[str, ...]) -> list[str]:
    """Files outside /run/infragen, process command lines, and the boot journal that contain a secret value."""
    found = [str(p) for p in written_files(node.root, exclude=node.path("/run/infragen"))
             if any(s.encode() in p.read_bytes() for s in secrets)]
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
        except OSError:
            continue
        if any(s.encode() in cmdline for s in secrets):
            args = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"process {proc.name}: {args[:200]}")
    if any(s in node.journal() for s in secrets):
        found.append("the boot journal")
    return found
