"""Render a Plan into cloud-init user-data: jinja2 templates (StrictUndefined) fed only from the plan.

Makes no sizing decision: every count, port, flag and name comes from the plan; this module only lays
them out as files, systemd units and shell. It never sees a secret value (secrets are read at boot by name).
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import yaml

from infragen.errors import InputError
from infragen.plan import Plan, SecretsPlan

#: The one place that knows where the templates live: `templates/` at the repository root (editable install).
TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"
#: The smaller of the two clouds' user-data limits (AWS EC2: 16 KB raw; Alibaba ECS: 32 KB); tests keep every
#: rendered file under it.
USER_DATA_MAX_BYTES = 16 * 1024
#: Address the renderer assumes for a multi-node head when the caller gives none (`render_all`, CLI inspection).
DEFAULT_HEAD_ADDRESS = "10.0.0.10"
#: Where nodes clone llama.cpp from (the project's own repository; its release tags are the pinned versions).
#: `render_user_data(..., llama_cpp_repo=...)` / `infragen render --llama-cpp-repo` point it at a mirror, or the
#: end-to-end test at a local git repository.
LLAMA_CPP_REPO = "https://github.com/ggml-org/llama.cpp"
_GIT_URL = re.compile(r"^(?:(?:https?|file|ssh|git)://[^\s]+|/[^\s]*)$")
#: Launch lifecycle hook of an AWS serving group: the node's readiness unit completes it, and only then does the
#: Auto Scaling group register the node with the load balancer (the AWS program creates the hook by this name).
AWS_LAUNCH_HOOK = "infragen-ready"
#: Termination lifecycle hook of an AWS group of packed nodes: the node's lb-ports unit completes it once the engine
#: ports it registered itself have been deregistered and drained (the AWS program creates the hook by this name).
AWS_DRAIN_HOOK = "infragen-drain"
#: Target-group deregistration delay bounds, seconds (ELB: 0-3600); streams need at least the idle timeout.
DEREGISTRATION_DELAY_RANGE_S = (30, 3600)
#: Ray's default GCS port (`ray start --head` docs); the head listens here and workers join it.
RAY_PORT = 6379

ROLES_SINGLE = ("replica",)
ROLES_MULTI = ("head", "worker")

# Where things live on the node (fixed layout, documented in docs/bootstrap.md).
LIB_DIR = "/usr/local/lib/infragen"
SBIN_DIR = "/usr/local/sbin"
UNIT_DIR = "/etc/systemd/system"
VENV_DIR = "/opt/infragen/venv"
TOOLS_DIR = "/opt/infragen/tools"
LLAMA_CPP_DIR = "/opt/infragen/llama.cpp"
#: The installed binary that replaces argv[0] (systemd needs an absolute path; the engines live in /opt/infragen).
ENGINE_BINARY = {"vllm": f"{VENV_DIR}/bin/vllm", "llama.cpp": f"{LLAMA_CPP_DIR}/bin/llama-server"}

_SYSTEMD_SAFE = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Instance:
    """One engine process on a node (packed replicas: one per GPU group)."""

    index: int
    """Position on the node (0..replicas_per_node-1); names the unit `infragen-engine@<index>`."""
    port: int
    """Port it listens on (plan port + index)."""
    devices: str
    """CUDA_VISIBLE_DEVICES value ('' on CPU)."""


def node_roles(plan: Plan) -> list[str]:
    """The user-data roles a plan needs: `["replica"]`, or `["head", "worker"]` for multi-node replicas."""
    return list(ROLES_MULTI if plan.deployment.nodes_per_replica > 1 else ROLES_SINGLE)


def deregistration_delay_s(plan: Plan) -> int:
    """Draining time of a leaving target: the LB idle timeout (a stream may be that quiet), within ELB's range.
    The AWS target group uses it, and a packed node waits it out after deregistering its own engine ports."""
    low, high = DEREGISTRATION_DELAY_RANGE_S
    return max(low, min(plan.network.idle_timeout_s, high))


def node_registered_ports(plan: Plan) -> list[int]:
    """Engine ports an AWS node registers with its target group itself: all but the first (which the Auto Scaling
    group registers), on a single-node replica that packs several engines; else none."""
    d = plan.deployment
    if d.cloud != "aws" or d.nodes_per_replica > 1:
        return []
    return [plan.engine.port + i for i in range(1, d.replicas_per_node)]


def render_user_data(plan: Plan, role: str, *, head_address: str | None = None,
                     llama_cpp_repo: str = LLAMA_CPP_REPO, secrets: SecretsPlan | None = None) -> str:
    """The `#cloud-config` user-data for one node of `plan` playing `role`.

    `head_address` (the head's fixed private IP, chosen by the provisioner) is required for the head and
    worker roles of multi-node plans and refused for single-node ones. `llama_cpp_repo` is the git URL a
    llama.cpp node clones the plan's release tag from (a mirror; the end-to-end test's local repository).
    `secrets`: the secret names the node reads, when the deployment scopes them (a stack's
    `plan.secrets.for_stack(stack)`); default the plan's own.
    """
    roles = node_roles(plan)
    if role not in roles:
        raise InputError(f"plan {plan.workload} has node roles {', '.join(roles)}; there is no role {role!r}")
    if role == "replica" and head_address is not None:
        raise InputError("head_address is only meaningful for multi-node plans (roles head and worker)")
    if role != "replica" and not head_address:
        raise InputError(f"role {role} of a multi-node plan needs head_address (the head node's private IP)")
    if head_address is not None:
        try:
            ipaddress.IPv4Address(head_address)
        except ValueError:
            raise InputError(f"head_address {head_address!r} is not an IPv4 address") from None
    if not _GIT_URL.match(llama_cpp_repo):
        raise InputError(f"llama_cpp_repo {llama_cpp_repo!r} is not a git URL (https://, ssh://, git://, file:// "
                         "or an absolute path, without whitespace)")
    _check_printable(plan)
    if secrets is not None and not isinstance(secrets, SecretsPlan):
        raise InputError("secrets must be a SecretsPlan (validated names)")
    context = {**_context(plan, role, head_address), "llama_cpp_repo": llama_cpp_repo,
               "secrets": secrets or plan.secrets, "node_digest": _NODE_DIGEST_SLOT}
    env = _environment()
    files = [
        {"path": path, "mode": mode, "content": env.get_template(template).render(context).rstrip("\n") + "\n"}
        for path, mode, template in _files(plan, role)
    ]
    # cloud-init's write_files entries, laid out by a YAML dumper: no file content can end a block or add a key.
    write_files = [{"path": f["path"], **({"permissions": f["mode"]} if f["mode"] != "0644" else {}),
                    "content": f["content"]} for f in files]
    text = env.get_template("cloud-config.yaml.j2").render({**context, "write_files": write_files})
    # The node digest names what this node runs, not the whole plan: a change that leaves every file the same (a
    # price refresh, another alternative, the bill) leaves the user data the same, so no node is rolled for it.
    digest = node_digest(text)
    text = text.replace(_NODE_DIGEST_SLOT, digest)
    _self_check(text, [{**f, "content": f["content"].replace(_NODE_DIGEST_SLOT, digest)} for f in files])
    return text


#: Stands where the node digest goes while the user data is rendered (letters only: no filter quotes it).
_NODE_DIGEST_SLOT = "NODEDIGESTxSLOTx"


def node_digest(text: str) -> str:
    """16 hex digits of sha256 over the user data with its digest slots blank: what identifies a node's config."""
    import hashlib

    return hashlib.sha256(text.replace(_NODE_DIGEST_SLOT, "").encode()).hexdigest()[:16]


def render_all(plan: Plan, *, head_address: str = DEFAULT_HEAD_ADDRESS,
               llama_cpp_repo: str = LLAMA_CPP_REPO) -> dict[str, str]:
    """Every role's user-data keyed by file name (`replica.yaml`, or `head.yaml` and `worker.yaml`)."""
    out: dict[str, str] = {}
    for role in node_roles(plan):
        address = None if role == "replica" else head_address
        out[f"{role}.yaml"] = render_user_data(plan, role, head_address=address, llama_cpp_repo=llama_cpp_repo)
    return out


# --- context -------------------------------------------------------------------------------------------------


def _context(plan: Plan, role: str, head_address: str | None) -> dict[str, Any]:
    d, e, m, s = plan.deployment, plan.engine, plan.model, plan.storage
    vllm = e.name == "vllm"
    model_dir, hf_cache_dir = _model_location(plan)
    exec_start, instances = _exec_start(plan), _instances(plan)
    if role == "worker":
        instances = []
    return {
        "plan": plan,
        "role": role,
        "multinode": d.nodes_per_replica > 1,
        "vllm": vllm,
        "gpu": d.gpus_per_node > 0,
        "serves": role in ("replica", "head"),
        "head_address": head_address or "",
        "ray_port": RAY_PORT,
        "lifecycle_hook": AWS_LAUNCH_HOOK,
        "drain_hook": AWS_DRAIN_HOOK,
        "drain_s": deregistration_delay_s(plan),
        "lb_ports": node_registered_ports(plan) if role == "replica" else [],
        "cluster_gpus": d.gpus_per_replica,
        "instances": instances,
        "engine_units": " ".join(f"infragen-engine@{i.index}.service" for i in instances),
        "exec_start": exec_start,
        "engine_env": _engine_env(plan),
        "model_dir": model_dir,
        "hf_cache_dir": hf_cache_dir,
        "weights_file": m.weights_file or "",
        "mount_path": s.mount_path,
        "lib_dir": LIB_DIR,
        "sbin_dir": SBIN_DIR,
        "venv_dir": VENV_DIR,
        "tools_dir": TOOLS_DIR,
        "llama_cpp_dir": LLAMA_CPP_DIR,
        "packages": _packages(plan),
        "gpu_driver": plan.bootstrap is not None and plan.bootstrap.gpu_driver is not None,
        "boot": plan.bootstrap,
    }


def _model_location(plan: Plan) -> tuple[str, str]:
    """(local directory the weights land in, HF cache dir or '') as the plan's argv expects them.

    Every path is confined to the model store (storage.mount_path): an edited plan cannot make the fetch script
    write anywhere else (`/etc/cron.d`, `..`)."""
    argv, m, mount = plan.engine.argv, plan.model, plan.storage.mount_path
    if plan.engine.name == "llama.cpp":
        path = _flag_value(argv, "--model") or _flag_value(argv, "-m")
        if not path or not path.startswith("/"):
            raise InputError("llama.cpp argv must pass --model with an absolute path to the GGUF file")
        if not m.weights_file or Path(path).name != Path(m.weights_file).name:
            raise InputError(f"llama.cpp --model {path} does not name the plan's weights_file {m.weights_file!r}")
        return _confined(str(Path(path).parent), mount, "llama.cpp --model"), ""
    if len(argv) < 3 or argv[:2] != ["vllm", "serve"]:
        raise InputError(f"vLLM argv must start with `vllm serve <model>`, got {shlex.join(argv[:3])!r}")
    model = argv[2]
    if model.startswith("/"):
        return _confined(model, mount, "the vLLM model directory", strict=True), ""
    if m.weights_source != "huggingface":
        raise InputError(f"weights come from {m.weights_uri}, but `vllm serve {model}` names no local directory",
                         fix="the planner must pass an absolute path under storage.mount_path as the model")
    if model != m.weights_uri:
        raise InputError(f"`vllm serve {model}` does not serve the plan's weights_uri {m.weights_uri!r}")
    # A HF repo id: vLLM resolves it in the HF cache (its --download-dir, else HF_HUB_CACHE).
    return "", _confined(_flag_value(argv, "--download-dir") or f"{mount}/hub", mount, "--download-dir")


def _confined(path: str, mount: str, what: str, *, strict: bool = False) -> str:
    """`path`, normalised, if it is the model store or inside it (`strict`: inside only); else an InputError."""
    norm = posixpath.normpath(path)
    inside = norm.startswith(mount.rstrip("/") + "/")
    if norm != path or not (inside or (norm == mount and not strict)):
        raise InputError(f"{what} {path!r} is outside the model store {mount} (storage.mount_path); "
                         "refusing to write weights there")
    return norm


def _exec_start(plan: Plan) -> str:
    """The plan's argv as a systemd ExecStart: argv[0] resolved to the installed binary, the port as ${PORT}
    (each instance's EnvironmentFile sets it: plan port + instance index)."""
    e = plan.engine
    argv = list(e.argv)
    port_at = _flag_index(argv, "--port")
    if port_at is None or argv[port_at] != str(e.port):
        raise InputError(f"engine argv must pass --port {e.port} (plan.engine.port); got {shlex.join(argv)!r}")
    if e.name == "vllm" and e.distributed_executor_backend == "ray" and \
            _flag_value(argv, "--distributed-executor-backend") != "ray":
        raise InputError("a multi-node plan's vLLM argv must pass --distributed-executor-backend ray")
    words = [systemd_quote(a) for a in argv]
    words[0] = ENGINE_BINARY[e.name]
    words[port_at] = "${PORT}"
    return " ".join(words)


def _instances(plan: Plan) -> list[Instance]:
    e, d = plan.engine, plan.deployment
    groups = e.visible_devices if d.gpus_per_node > 0 else []
    if groups and len(groups) != d.replicas_per_node:
        raise InputError(f"engine.visible_devices has {len(groups)} GPU groups for {d.replicas_per_node} "
                         "replicas per node")
    return [Instance(index=i, port=e.port + i, devices=",".join(str(g) for g in groups[i]) if groups else "")
            for i in range(d.replicas_per_node)]


def _engine_env(plan: Plan) -> dict[str, str]:
    env = dict(plan.engine.env)
    for name, value in env.items():
        if not _ENV_NAME.match(name) or "\n" in value:
            raise InputError(f"engine.env has an invalid entry {name!r}")
    return env


def _packages(plan: Plan) -> list[str]:
    """Distribution packages the boot scripts call (Ubuntu names; the images are Ubuntu 22.04)."""
    pkgs = ["curl", "python3-venv", "mdadm", "xfsprogs"]
    if plan.engine.name == "llama.cpp":
        # git only to clone the release tag; an sdist source is fetched by python3 (urllib) and unpacked by tar.
        from_sdist = plan.bootstrap is not None and plan.bootstrap.engine_source is not None
        pkgs += ["build-essential", "cmake"] + ([] if from_sdist else ["git"])
    return pkgs


def _files(plan: Plan, role: str) -> list[tuple[str, str, str]]:
    """(path on the node, mode, template) for every file the role writes, in boot order."""
    files = [
        (f"{LIB_DIR}/common.sh", "0644", "scripts/common.sh.j2"),
        (f"{SBIN_DIR}/infragen-storage", "0755", "scripts/storage.sh.j2"),
        (f"{SBIN_DIR}/infragen-install", "0755", "scripts/install.sh.j2"),
        (f"{SBIN_DIR}/infragen-secrets", "0755", "scripts/secrets.sh.j2"),
        (f"{SBIN_DIR}/infragen-fetch-model", "0755", "scripts/fetch-model.sh.j2"),
    ]
    if plan.deployment.cloud == "alicloud":
        files.append((f"{LIB_DIR}/alicloud.py", "0644", "scripts/alicloud.py.j2"))
    if plan.bootstrap is not None and plan.bootstrap.gpu_driver is not None:
        files.append((f"{SBIN_DIR}/infragen-gpu-driver", "0755", "scripts/gpu-driver.sh.j2"))
    if plan.deployment.gpus_per_node > 0:
        files.append((f"{SBIN_DIR}/infragen-gpu-check", "0755", "scripts/gpu-check.sh.j2"))
    if plan.deployment.nodes_per_replica > 1:
        files.append((f"{SBIN_DIR}/infragen-ray", "0755", "scripts/ray.sh.j2"))
    if role in ("replica", "head"):
        files.append((f"{SBIN_DIR}/infragen-ready", "0755", "scripts/ready.sh.j2"))
    if role == "replica" and node_registered_ports(plan):
        files.append((f"{SBIN_DIR}/infragen-lb-ports", "0755", "scripts/lb-ports.sh.j2"))
    if plan.engine.env:
        files.append(("/etc/infragen/engine-common.env", "0644", "units/engine-common.env.j2"))
    files.append((f"{UNIT_DIR}/infragen-boot.service", "0644", "units/boot.service.j2"))
    if plan.deployment.nodes_per_replica > 1:
        files.append((f"{UNIT_DIR}/infragen-ray.service", "0644", "units/ray.service.j2"))
    if role in ("replica", "head"):
        for i in range(plan.deployment.replicas_per_node):
            files.append((f"/etc/infragen/engine-{i}.env", "0644", f"units/engine.env.j2#{i}"))
        files.append((f"{UNIT_DIR}/infragen-engine@.service", "0644", "units/engine@.service.j2"))
        files.append((f"{UNIT_DIR}/infragen-ready.service", "0644", "units/ready.service.j2"))
    if role == "replica" and node_registered_ports(plan):
        files.append((f"{UNIT_DIR}/infragen-lb-ports.service", "0644", "units/lb-ports.service.j2"))
    files.append((f"{UNIT_DIR}/infragen.target", "0644", "units/infragen.target.j2"))
    return files


# --- jinja ---------------------------------------------------------------------------------------------------


class _Loader(jinja2.FileSystemLoader):
    """Templates from TEMPLATES_DIR; `name#i` renders `name` with `instance` set to the i-th engine instance."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Any]:
        base, _, index = template.partition("#")
        source, filename, uptodate = super().get_source(environment, base)
        if index:
            source = f"{{% set instance = instances[{int(index)}] %}}" + source
        return source, filename, uptodate


@cache
def _environment() -> jinja2.Environment:
    if not TEMPLATES_DIR.is_dir():
        raise InputError(f"templates directory {TEMPLATES_DIR} is missing (infragen must be installed from a "
                         "checkout: pip install -e .)")
    env = jinja2.Environment(loader=_Loader(str(TEMPLATES_DIR)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False,
                             # Shell's `${#array[@]}` would open a jinja comment; comments are spelled {%# ... #%}.
                             comment_start_string="{%#", comment_end_string="#%}")
    # The one quoting filter per target language; tests/render/test_template_quoting.py checks every `{{ }}`.
    env.filters["sh"] = shell_quote
    env.filters["py"] = python_literal
    env.filters["systemd"] = systemd_quote
    env.filters["systemd_env"] = systemd_env_quote
    env.filters["env_value"] = env_file_quote
    env.filters["yaml_str"] = lambda v: yaml.safe_dump(str(v), default_style="'").strip().removesuffix("\n...")
    env.filters["to_yaml"] = to_yaml
    return env


class _BlockDumper(yaml.SafeDumper):
    """SafeDumper writing multi-line strings as `|` blocks (readable user-data; PyYAML falls back to quoting
    when a block cannot hold the text exactly)."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)


def to_yaml(value: object) -> str:
    """YAML for `value`, written by a YAML dumper (never by string templating), without a trailing newline."""
    return yaml.dump(value, Dumper=_BlockDumper, sort_keys=False, default_flow_style=False, allow_unicode=False,
                     width=1 << 20).rstrip("\n")


def shell_quote(value: object) -> str:
    """One shell word (POSIX quoting)."""
    return shlex.quote(str(value))


def python_literal(value: object) -> str:
    """A Python string literal (repr of a str is always one; no input can end it early)."""
    return repr(str(value))


def systemd_quote(value: object) -> str:
    """One word of a systemd command line or Environment= assignment (`%` and `$` escaped, quoted if needed)."""
    text = str(value).replace("%", "%%").replace("$", "$$")
    if text and _SYSTEMD_SAFE.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_env_quote(assignment: object) -> str:
    """One `NAME=value` word of an `Environment=` line: systemd expands `%` specifiers there but not `$`
    (systemd.exec(5)), and a quoted word takes C-style backslash escapes (systemd.syntax(7))."""
    text = str(assignment).replace("%", "%%")
    if text and _SYSTEMD_SAFE.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def env_file_quote(value: object) -> str:
    """A value in a systemd EnvironmentFile (no `$`/`%` expansion there; double quotes with backslash escapes)."""
    text = str(value)
    if text and _SYSTEMD_SAFE.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_join(argv: list[str]) -> str:
    return " ".join(systemd_quote(a) for a in argv)


def _flag_index(argv: list[str], flag: str) -> int | None:
    for i, arg in enumerate(argv[:-1]):
        if arg == flag:
            return i + 1
    return None


def _flag_value(argv: list[str], flag: str) -> str | None:
    i = _flag_index(argv, flag)
    return argv[i] if i is not None else None


#: The plan parts whose strings reach the user-data (explanation, warnings and alternatives never do).
_RENDERED_PARTS = ("workload", "infragen_version", "deployment", "model", "engine", "storage", "network", "secrets",
                   "bootstrap")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _check_printable(plan: Plan) -> None:
    """Refuse control characters (newlines...) in any rendered plan string: they could inject YAML keys,
    unit directives or shell commands into the user-data."""

    def walk(value: object, where: str) -> None:
        if isinstance(value, str):
            if _CONTROL.search(value):
                raise InputError(f"plan {where} contains a control character; refusing to render it")
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(key, f"{where} key")
                walk(item, f"{where}.{key}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{where}[{i}]")

    data = plan.model_dump(mode="json", include=set(_RENDERED_PARTS))
    for part in _RENDERED_PARTS:
        walk(data.get(part), part)


def _self_check(text: str, files: list[dict[str, str]]) -> None:
    """The output parses as YAML and carries every file byte for byte (catches indentation bugs).

    Size is not enforced here: the tests keep every shape and example under USER_DATA_MAX_BYTES, and each
    provisioner checks its cloud's own limit (AWS 16 KB raw, gzip above; Alibaba 32 KB)."""
    data = yaml.safe_load(text)
    written = {f["path"]: f["content"] for f in data.get("write_files", [])}
    for f in files:
        if written.get(f["path"]) != f["content"]:
            raise RuntimeError(f"rendered user-data mangles {f['path']} (template indentation bug)")
