"""Rendered user-data: roles, the plan's argv in ExecStart, packed replicas, secrets by reference, size, errors."""

from __future__ import annotations

import os
import shlex

import jinja2
import pytest
import yaml

from infragen.errors import InputError
from infragen.plan import Plan
from infragen.render import USER_DATA_MAX_BYTES, node_roles, render_all, render_user_data
from infragen.render.cloud_init import ENGINE_BINARY, _environment, _self_check, env_file_quote, systemd_quote
from tests.plan_factory import SENTINEL_SECRET, make_plan
from tests.render.support import CLOUDS, SHAPES, delivered_bytes


def files_of(text: str) -> dict[str, str]:
    data = yaml.safe_load(text)
    return {f["path"]: f["content"] for f in data["write_files"]}


def unit_lines(content: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in content.splitlines() if line.startswith(f"{key}=")]


def test_roles_follow_nodes_per_replica() -> None:
    assert node_roles(make_plan("single")) == ["replica"]
    assert node_roles(make_plan("packed", "alicloud")) == ["replica"]
    assert node_roles(make_plan("multinode")) == ["head", "worker"]
    assert set(render_all(make_plan("multinode"))) == {"head.yaml", "worker.yaml"}
    assert set(render_all(make_plan("cpu"))) == {"replica.yaml"}


def test_head_address_rules() -> None:
    multi, single = make_plan("multinode"), make_plan("single")
    with pytest.raises(InputError, match="head_address"):
        render_user_data(multi, "worker")
    with pytest.raises(InputError, match="only meaningful"):
        render_user_data(single, "replica", head_address="10.0.0.10")
    with pytest.raises(InputError, match="not an IPv4 address"):
        render_user_data(multi, "head", head_address="10.0.0.10; rm -rf /")
    with pytest.raises(InputError, match="no role 'head'"):
        render_user_data(single, "head", head_address="10.0.0.10")
    worker = files_of(render_user_data(multi, "worker", head_address="10.1.2.3"))
    assert "HEAD=10.1.2.3" in worker["/usr/local/sbin/infragen-ray"]
    assert "ExecStart=/usr/local/sbin/infragen-ray" in worker["/etc/systemd/system/infragen-ray.service"]
    # Workers run Ray only: no engine, no readiness probe.
    assert not any("infragen-engine" in p or "ready" in p for p in worker)


def test_every_shape_is_valid_yaml_under_the_size_limit(plan: Plan) -> None:
    """Both clouds limit user-data to 16 KB after base64 decoding; their provisioners gzip a larger text."""
    for name, text in render_all(plan).items():
        size = delivered_bytes(text, plan.deployment.cloud)
        assert size <= USER_DATA_MAX_BYTES == 16384, f"{plan.workload}/{name} is {size} bytes as sent"
        assert len(text.encode()) <= 4 * USER_DATA_MAX_BYTES, f"{plan.workload}/{name}: the text itself grew"
        assert text.startswith("#cloud-config\n")
        data = yaml.safe_load(text)
        assert [c[-1] for c in data["runcmd"]] == ["daemon-reload", "infragen.target", "infragen.target"]


def test_exec_start_is_the_plans_argv(plan: Plan) -> None:
    """ExecStart runs exactly plan.engine.argv: argv[0] resolved to the installed binary, --port from the
    instance's env file (port + index), every other word unchanged."""
    role = node_roles(plan)[0]
    files = files_of(render_user_data(plan, role, head_address="10.0.0.10" if role == "head" else None))
    unit = files["/etc/systemd/system/infragen-engine@.service"]
    [exec_start] = unit_lines(unit, "ExecStart")
    words = shlex.split(exec_start)
    expected = [ENGINE_BINARY[plan.engine.name], *plan.engine.argv[1:]]
    port_at = expected.index("--port") + 1
    expected[port_at] = "${PORT}"
    assert words == expected
    for i in range(plan.deployment.replicas_per_node):
        env = files[f"/etc/infragen/engine-{i}.env"].splitlines()
        assert f"PORT={plan.engine.port + i}" in env
        if plan.deployment.gpus_per_node:
            devices = ",".join(map(str, plan.engine.visible_devices[i]))
            assert f"CUDA_VISIBLE_DEVICES={devices}" in env
    assert f"infragen-engine@{plan.deployment.replicas_per_node - 1}.service" in files[
        "/etc/systemd/system/infragen.target"]
    assert unit_lines(unit, "Restart") == ["on-failure"]
    if plan.engine.env:
        assert "/etc/infragen/engine-common.env" in unit_lines(unit, "EnvironmentFile")
        common = files["/etc/infragen/engine-common.env"].splitlines()
        assert common == [f"{name}={value}" for name, value in plan.engine.env.items()]


def test_packed_replicas_get_their_own_port_and_gpu() -> None:
    plan = make_plan("packed")
    files = files_of(render_user_data(plan, "replica"))
    envs = [files[f"/etc/infragen/engine-{i}.env"] for i in range(4)]
    assert envs == [f"PORT={8000 + i}\nCUDA_VISIBLE_DEVICES={i}\n" for i in range(4)]
    assert "PORTS=(8000 8001 8002 8003)" in files["/usr/local/sbin/infragen-ready"]


def test_vllm_api_key_comes_from_a_runtime_env_file() -> None:
    files = files_of(render_user_data(make_plan("single"), "replica"))
    unit = files["/etc/systemd/system/infragen-engine@.service"]
    assert "/run/infragen/engine.env" in unit_lines(unit, "EnvironmentFile")
    secrets = files["/usr/local/sbin/infragen-secrets"]
    assert "umask 077" in secrets and "VLLM_API_KEY=" in secrets
    assert "aws_cli secretsmanager get-secret-value --secret-id \"$1\" --region \"$REGION\"" in files[
        "/usr/local/lib/infragen/common.sh"]
    assert "fetch infragen/test-single-aws/api-key" in secrets


def test_alicloud_reads_kms_with_the_ram_role_in_hardened_mode() -> None:
    files = files_of(render_user_data(make_plan("single", "alicloud"), "replica"))
    helper = files["/usr/local/lib/infragen/alicloud.py"]
    assert 'type="ecs_ram_role", disable_imds_v1=True' in helper
    assert "GetSecretValueRequest(secret_name=name)" in helper
    assert "alicloud.py secret \"$1\" \"$REGION\"" in files["/usr/local/lib/infragen/common.sh"]
    assert "oss_get" not in helper  # only plans with oss:// weights carry the OSS downloader


def test_llama_cpp_node() -> None:
    plan = make_plan("cpu")
    files = files_of(render_user_data(plan, "replica"))
    install = files["/usr/local/sbin/infragen-install"]
    assert 'git clone --depth 1 --branch "$ENGINE_VERSION"' in install and "retry 5 clone" in install
    assert "ENGINE_VERSION=b11312" in files["/usr/local/lib/infragen/common.sh"]
    assert "cmake --build" in install
    fetch = files["/usr/local/sbin/infragen-fetch-model"]
    assert "FILE=tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf" in fetch and "MODEL_DIR=/opt/models" in fetch
    assert "/usr/local/sbin/infragen-gpu-check" not in files  # CPU node: no driver check
    assert "printf '%s' \"$value\" > \"$2\"" in files["/usr/local/sbin/infragen-secrets"]  # --api-key-file


def test_multinode_head_waits_for_every_gpu_then_serves_with_ray() -> None:
    plan = make_plan("multinode")
    files = files_of(render_user_data(plan, "head", head_address="10.0.0.10"))
    ray = files["/usr/local/sbin/infragen-ray"]
    assert "CLUSTER_GPUS=16" in ray and "ray.cluster_resources()" in ray
    unit = files["/etc/systemd/system/infragen-engine@.service"]
    assert unit_lines(unit, "ExecStartPre") == ["/usr/local/sbin/infragen-ray wait"]
    assert "--distributed-executor-backend ray" in unit_lines(unit, "ExecStart")[0]
    assert "FI_PROVIDER=efa" in files["/etc/infragen/engine-common.env"].splitlines()
    ray_unit = files["/etc/systemd/system/infragen-ray.service"]
    assert unit_lines(ray_unit, "EnvironmentFile") == ["/etc/infragen/engine-common.env"]
    assert "HF_HUB_OFFLINE=1" in unit_lines(ray_unit, "Environment")[0]
    assert "--head" in ray and "wait" in ray
    worker = files_of(render_user_data(plan, "worker", head_address="10.0.0.10"))["/usr/local/sbin/infragen-ray"]
    assert '--address="$HEAD:$PORT"' in worker and "cluster_resources" not in worker
    assert "fi_info -p efa" in files["/usr/local/sbin/infragen-gpu-check"]


def test_storage_follows_the_plan() -> None:
    nvme = files_of(render_user_data(make_plan("packed"), "replica"))["/usr/local/sbin/infragen-storage"]
    assert "mdadm --create" in nvme and "Amazon EC2 NVMe Instance Storage" in nvme and "EXPECTED=1" in nvme
    volume = files_of(render_user_data(make_plan("single"), "replica"))["/usr/local/sbin/infragen-storage"]
    assert "mdadm" not in volume and "SIZES=\" $(( 60 * 1073741824 )) \"" in volume


def test_no_secret_in_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets are read at boot by name: a sentinel value in the environment never reaches the text."""
    for var in ("HF_TOKEN", "VLLM_API_KEY", "INFRAGEN_API_KEY", "INFRAGEN_HF_TOKEN"):
        monkeypatch.setenv(var, SENTINEL_SECRET)
    for kind in SHAPES:
        for cloud in CLOUDS:
            plan = make_plan(kind, cloud)
            for text in render_all(plan).values():
                assert SENTINEL_SECRET not in text
                assert plan.secrets.api_key_name in text  # referenced by name
    assert os.environ["HF_TOKEN"] == SENTINEL_SECRET


def _with_engine(plan: Plan, **changes: object) -> Plan:
    return plan.model_copy(update={"engine": plan.engine.model_copy(update=changes)})


def test_inconsistent_plans_are_input_errors() -> None:
    single = make_plan("single")
    no_port = [a for a in single.engine.argv if a not in ("--port", "8000")]
    with pytest.raises(InputError, match="--port 8000"):
        render_user_data(_with_engine(single, argv=no_port), "replica")
    multi = make_plan("multinode")
    no_ray = multi.engine.argv[:-2]
    with pytest.raises(InputError, match="distributed-executor-backend ray"):
        render_user_data(_with_engine(multi, argv=no_ray), "head", head_address="10.0.0.10")
    s3 = single.model_copy(update={"model": single.model.model_copy(
        update={"weights_source": "s3", "weights_uri": "s3://bucket/qwen"})})
    with pytest.raises(InputError, match="names no local directory"):
        render_user_data(s3, "replica")


def test_s3_weights_sync_into_the_argv_directory() -> None:
    single = make_plan("single")
    argv = ["vllm", "serve", "/opt/models/qwen2-7b", *single.engine.argv[3:]]
    plan = single.model_copy(update={
        "model": single.model.model_copy(update={"weights_source": "s3", "weights_uri": "s3://bucket/qwen"}),
        "engine": single.engine.model_copy(update={"argv": argv})})
    files = files_of(render_user_data(plan, "replica"))
    fetch = files["/usr/local/sbin/infragen-fetch-model"]
    assert "MODEL_DIR=/opt/models/qwen2-7b" in fetch and 'aws_cli s3 sync' in fetch
    assert "HF_HUB_OFFLINE" not in files["/etc/systemd/system/infragen-engine@.service"]
    assert "/usr/local/sbin/infragen-secrets" in files and "hf-token" not in files["/usr/local/sbin/infragen-secrets"]


def test_templates_are_strict() -> None:
    with pytest.raises(jinja2.UndefinedError):
        _environment().from_string("{{ not_in_the_plan }}").render()


def test_systemd_quoting() -> None:
    assert systemd_quote("--max-model-len") == "--max-model-len"
    assert systemd_quote("50%") == '"50%%"'
    assert systemd_quote('a "b" $HOME') == '"a \\"b\\" $$HOME"'


def test_environment_file_quoting() -> None:
    assert env_file_quote("eth0") == "eth0"
    assert env_file_quote("a b$c%") == '"a b$c%"'  # EnvironmentFile expands neither $ nor %
    assert env_file_quote('x"y\\z') == '"x\\"y\\\\z"'


def test_control_characters_in_plan_strings_are_refused() -> None:
    """A newline in a rendered string could inject YAML keys, unit directives or shell commands."""
    plan = make_plan("single")
    evil = plan.model_copy(update={"model": plan.model.model_copy(update={"served_model_name": "m\nruncmd: [x]"})})
    with pytest.raises(InputError, match=r"model.served_model_name contains a control character"):
        render_user_data(evil, "replica")
    evil_env = _with_engine(plan, env={"NCCL_DEBUG": "WARN\nExecStartPre=/bin/evil"})
    with pytest.raises(InputError, match=r"engine.env.NCCL_DEBUG"):
        render_user_data(evil_env, "replica")


def test_self_check_catches_a_mangled_file() -> None:
    with pytest.raises(RuntimeError, match="mangles /x"):
        _self_check("#cloud-config\nwrite_files: []\n", [{"path": "/x", "content": "y\n"}])
