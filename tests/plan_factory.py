"""Hand-built Plans for tests of the layers after the planner (render, provision, diff).

They are valid Plan objects shaped like what the planner emits, so those layers can be tested
without the sizing engine; tests of the real examples use `infragen plan` output instead.
"""

from __future__ import annotations

from typing import Literal

from infragen.catalog.engines import pinned_release, pinned_version
from infragen.plan import (
    Alternative,
    BootstrapPlan,
    CostPlan,
    DeploymentPlan,
    EnginePlan,
    EstimatePlan,
    GpuDriverPlan,
    HardwarePlan,
    MemoryPlan,
    ModelPlan,
    NetworkPlan,
    Plan,
    SecretsPlan,
    StoragePlan,
)
from infragen.sizing.bootstrap import select_engine_source

Kind = Literal["single", "packed", "tp", "multinode", "cpu"]

SENTINEL_SECRET = "sk-SENTINEL-0000-never-in-output"


def make_plan(kind: Kind = "single", cloud: Literal["aws", "alicloud"] = "aws", *, spot: bool = False) -> Plan:
    """A representative plan of one shape on one cloud."""
    aws = cloud == "aws"
    region = "us-east-1" if aws else "cn-hangzhou"
    if kind == "cpu":
        itype = "c7i.4xlarge" if aws else "ecs.c7.4xlarge"
        deployment = DeploymentPlan(
            cloud=cloud, region=region, instance_type=itype, gpu=None, gpus_per_node=0, gpus_per_replica=0,
            replicas_per_node=1, nodes_per_replica=1, replicas=2, nodes=2, tp=1, pp=1, engine="llama.cpp",
            precision="q4_k_m", kv_cache_dtype="auto", pricing="spot" if spot else "on-demand", cpu_arch="x86_64",
        )
        model = ModelPlan(
            id="tinyllama-1.1b", display_name="TinyLlama-1.1B", served_model_name="tinyllama-1.1b",
            weights_source="huggingface", weights_uri="TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF",
            weights_file="tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf", weights_gib=0.62, params_b=1.1, active_params_b=1.1,
        )
        engine = EnginePlan(
            name="llama.cpp", version=pinned_version("llama.cpp"),
            argv=["llama-server", "--model", "/opt/models/tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf", "--host", "0.0.0.0",
                  "--port", "8000", "--ctx-size", "8192", "--parallel", "4", "--threads", "8", "--alias",
                  "tinyllama-1.1b", "--api-key-file", "/run/infragen/api-key"],
            port=8000, max_model_len=2048, max_num_seqs=4, threads=8,
            build_flags=list(pinned_release("llama.cpp").build_cflags),
        )
        memory = MemoryPlan(device_memory_gib=32, weights_gib_per_gpu=0.62, kv_cache_gib_per_gpu=0.18,
                            overhead_gib_per_gpu=0.3, kv_cache_bytes_per_token=22528, kv_cache_capacity_tokens=8192)
        hardware = HardwarePlan(vcpus=16, memory_gib=32, required_memory_gib=1.6, gpu_memory_gib=0, network_gbps=6.25)
        storage = StoragePlan(kind="volume", required_gib=20, volume_gib=20,
                              volume_type="gp3" if aws else "cloud_essd", volume_iops=3000 if aws else None,
                              volume_throughput_mb_per_s=125 if aws else None,
                              performance_level=None if aws else "PL0")
        network = NetworkPlan(rdma="none", placement="none", health_check_grace_s=600, required_gbps=0.1)
        gpu_mem = 0.0
    else:
        multinode = kind == "multinode"
        tp = {"single": 1, "packed": 1, "tp": 4, "multinode": 8}[kind]
        pp = 2 if multinode else 1
        gpus_per_node = {"single": 1, "packed": 4, "tp": 4, "multinode": 8}[kind]
        replicas_per_node = 4 if kind == "packed" else 1
        nodes_per_replica = 2 if multinode else 1
        replicas = {"single": 2, "packed": 4, "tp": 1, "multinode": 1}[kind]
        nodes = replicas * nodes_per_replica // replicas_per_node
        if aws:
            itype = {"single": "g6e.xlarge", "packed": "g6e.12xlarge", "tp": "g6e.12xlarge",
                     "multinode": "p5.48xlarge"}[kind]
        else:
            itype = {"single": "ecs.gn7i-c8g1.2xlarge", "packed": "ecs.gn7i-4x.8xlarge", "tp": "ecs.gn7i-4x.8xlarge",
                     "multinode": "ecs.ebmgn8v.48xlarge"}[kind]
        gpu = ("h100-sxm-80gb" if multinode else "l40s-48gb") if aws else ("h20-96gb" if multinode else "a10-24gb")
        gpu_mem = 80.0 if multinode else (44.7 if aws else 24.0)
        model_id = "llama-3.1-405b" if multinode else ("llama-3.1-70b" if kind == "tp" else "qwen2-7b")
        hf = {"llama-3.1-405b": "meta-llama/Llama-3.1-405B-Instruct",
              "llama-3.1-70b": "meta-llama/Llama-3.1-70B-Instruct",
              "qwen2-7b": "Qwen/Qwen2-7B-Instruct"}[model_id]
        argv = ["vllm", "serve", hf, "--served-model-name", model_id, "--host", "0.0.0.0", "--port", "8000",
                "--tensor-parallel-size", str(tp), "--pipeline-parallel-size", str(pp), "--max-model-len", "16384",
                "--max-num-seqs", "64", "--gpu-memory-utilization", "0.9", "--enable-prefix-caching",
                "--download-dir", "/opt/models"]
        if multinode:
            argv += ["--distributed-executor-backend", "ray"]
        deployment = DeploymentPlan(
            cloud=cloud, region=region, instance_type=itype, gpu=gpu, gpus_per_node=gpus_per_node,
            gpus_per_replica=tp * pp, replicas_per_node=replicas_per_node, nodes_per_replica=nodes_per_replica,
            replicas=replicas, nodes=max(nodes, 1), tp=tp, pp=pp, engine="vllm", precision="bf16",
            kv_cache_dtype="auto", pricing="spot" if spot else "on-demand", cpu_arch="x86_64",
        )
        model = ModelPlan(id=model_id, display_name=model_id, served_model_name=model_id,
                          weights_source="huggingface", weights_uri=hf,
                          weights_gib={"llama-3.1-405b": 756.0, "llama-3.1-70b": 131.4, "qwen2-7b": 14.2}[model_id],
                          params_b={"llama-3.1-405b": 405.9, "llama-3.1-70b": 70.6, "qwen2-7b": 7.6}[model_id],
                          active_params_b={"llama-3.1-405b": 405.9, "llama-3.1-70b": 70.6, "qwen2-7b": 7.6}[model_id])
        env = {"NCCL_DEBUG": "WARN"}
        if multinode:
            env |= ({"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_SOCKET_IFNAME": "ens"} if aws
                    else {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": "0"})
        engine = EnginePlan(
            name="vllm", version=pinned_version("vllm"), argv=argv, port=8000, max_model_len=16384, max_num_seqs=64,
            gpu_memory_utilization=0.9,
            visible_devices=[[i] for i in range(4)] if kind == "packed" else [list(range(gpus_per_node))],
            env=env, distributed_executor_backend="ray" if multinode else None,
        )
        weights_per_gpu = 14.2 if kind in {"single", "packed"} else 47.3
        memory = MemoryPlan(device_memory_gib=gpu_mem, weights_gib_per_gpu=weights_per_gpu,
                            kv_cache_gib_per_gpu=20.0, overhead_gib_per_gpu=4.0, kv_cache_bytes_per_token=57344,
                            kv_cache_capacity_tokens=370000)
        vcpus = 4 if kind == "single" else (192 if multinode else 48)
        mem_gib = 32 if kind == "single" else (2048 if multinode else 384)
        hardware = HardwarePlan(vcpus=vcpus, memory_gib=mem_gib, required_memory_gib=21.3, gpu_memory_gib=gpu_mem,
                                network_gbps=3200 if multinode else 25)
        if aws and kind != "single":
            storage = StoragePlan(kind="instance-store", required_gib=900 if multinode else 200,
                                  nvme_devices=8 if multinode else 1, nvme_total_gib=28610 if multinode else 3576)
        else:
            storage = StoragePlan(kind="volume", required_gib=900 if multinode else 60,
                                  volume_gib=900 if multinode else 60, volume_type="gp3" if aws else "cloud_essd",
                                  volume_iops=16000 if aws else None, volume_throughput_mb_per_s=1000 if aws else None,
                                  performance_level=None if aws else "PL1")
        network = NetworkPlan(
            rdma=("efa" if aws else "erdma") if multinode else "none", efa_interfaces=32 if (multinode and aws) else 0,
            placement="cluster" if multinode else "none", health_check_grace_s=1800 if multinode else 900,
            required_gbps=100.0 if multinode else 0.5,
        )
    hourly = {"cpu": 0.714, "single": 1.861, "packed": 10.493, "tp": 10.493, "multinode": 55.04}[kind]
    cost = CostPlan(pricing="spot" if spot else "on-demand", usd_per_hour=hourly * deployment.nodes,
                    usd_per_month=hourly * deployment.nodes * 730,
                    on_demand_usd_per_month=hourly * deployment.nodes * 730,
                    spot_usd_per_month=None, price_source="test fixture")
    name = f"test-{kind}-{cloud}"
    # Alibaba plans carry what the planner adds there: the driver to install, the in-VPC PyPI mirror.
    bootstrap = None if aws else BootstrapPlan(
        gpu_driver=None if kind == "cpu" else GpuDriverPlan(
            driver_version="550.127.08", cuda_version="12.4.1", cudnn_version="9.2.0.82",
            installer="auto_install_v4.0.sh", installer_path="/opsx/ecs/linux/binary/script/",
            erdma=kind == "multinode"),
        pip_index_url="http://mirrors.cloud.aliyuncs.com/pypi/simple/", pip_trusted_host="mirrors.cloud.aliyuncs.com",
        download_mbit_s=round(200 / deployment.nodes, 1), erdma_mtus=[1400, 8500] if kind == "multinode" else [],
        engine_source=select_engine_source(pinned_release("llama.cpp"), engine.version,
                                           "http://mirrors.cloud.aliyuncs.com/pypi/simple/") if kind == "cpu" else None)
    return Plan(
        infragen_version="0.1.0", workload=name, deployment=deployment, model=model, engine=engine, memory=memory,
        hardware=hardware, storage=storage, network=network,
        estimate=EstimatePlan(ttft_ms=250, tpot_ms=30, e2e_ms=8000, concurrency_per_replica=16,
                              capacity_requests_per_s=4.0, output_tokens_per_s=2000.0, utilisation=0.6,
                              relative_uncertainty=0.2, queueing_method="test fixture"),
        cost=cost,
        secrets=SecretsPlan(hf_token_name=f"infragen/{name}/hf-token", api_key_name=f"infragen/{name}/api-key"),
        explanation=["test fixture"], warnings=[],
        alternatives=[Alternative(cloud=cloud, region=region, instance_type="x.large", engine="vllm", precision="bf16",
                                  tp=1, pp=1, replicas=None, usd_per_month=None, rejected_because="test fixture")],
        bootstrap=bootstrap,
    )
