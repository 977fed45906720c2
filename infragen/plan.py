"""The resolved deployment: one frozen, versioned, serialisable Plan.

Everything after the planner (cloud-init rendering, Pulumi components, PR diffs) reads only this.
Nothing here makes a sizing decision. A digest of the canonical JSON identifies a plan.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from infragen.spec import Cloud, Engine, KvCacheDtype, Pricing

PLAN_SCHEMA_VERSION = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class DeploymentPlan(_Frozen):
    """Where and on what the model runs."""

    cloud: Cloud
    """Cloud provider."""
    region: str
    """Region id (`us-east-1`, `cn-hangzhou`)."""
    instance_type: str
    """Instance type id (`g6e.xlarge`, `ecs.gn7i-c8g1.2xlarge`)."""
    gpu: str | None
    """Accelerator id from the catalog (`l40s-48gb`), None for CPU nodes."""
    gpus_per_node: int = Field(ge=0)
    """Accelerators on one node."""
    gpus_per_replica: int = Field(ge=0)
    """Accelerators one engine instance uses (tp x pp); 0 on CPU."""
    replicas_per_node: int = Field(ge=1)
    """Engine instances packed on one node (one per GPU group); 1 for multi-node replicas."""
    nodes_per_replica: int = Field(ge=1)
    """Nodes one replica spans (pipeline parallel across nodes when > 1)."""
    replicas: int = Field(ge=1)
    """Engine instances serving traffic in total."""
    nodes: int = Field(ge=1)
    """Instances to launch in total."""
    tp: int = Field(ge=1)
    """Tensor-parallel degree (inside one node)."""
    pp: int = Field(ge=1)
    """Pipeline-parallel degree (= nodes_per_replica for multi-node replicas)."""
    engine: Engine
    """Serving engine."""
    precision: str
    """Weight format (`bf16`, `int4-awq`, `q4_k_m`...)."""
    kv_cache_dtype: KvCacheDtype
    """KV-cache element type."""
    pricing: Pricing
    """Capacity type the cost was computed for."""
    cpu_arch: Literal["x86_64", "arm64"]
    """Node CPU architecture (picks the machine image)."""


class ModelPlan(_Frozen):
    """What is served and where its files come from."""

    id: str
    """Registry id (or `custom`)."""
    display_name: str
    """Name for humans."""
    served_model_name: str
    """Name clients put in the OpenAI `model` field."""
    weights_source: Literal["huggingface", "s3", "oss"]
    """Where the node downloads the checkpoint from."""
    weights_uri: str
    """HF repo id (`org/name`), or `s3://bucket/prefix`, or `oss://bucket/prefix`."""
    weights_file: str | None = None
    """Single file inside the repo/prefix to fetch (GGUF), None = the whole repo."""
    weights_gib: float = Field(gt=0)
    """Size of the weight files to download and load, GiB."""
    params_b: float = Field(gt=0)
    """Total parameters, billions (computed from the architecture)."""
    active_params_b: float = Field(gt=0)
    """Parameters active per token, billions (MoE < total)."""


class EnginePlan(_Frozen):
    """How the engine is installed and started."""

    name: Engine
    """Engine."""
    version: str
    """Pinned engine version (vLLM PyPI version, llama.cpp release tag `b1234`)."""
    argv: list[str]
    """The exact command one engine instance runs (`vllm serve ...`, `llama-server ...`)."""
    port: int
    """Port of the first engine instance; packed replicas use port, port+1, ..."""
    host: str = "0.0.0.0"
    """Listen address (the security group keeps it private)."""
    max_model_len: int = Field(gt=0)
    """Longest prompt + output per request (vLLM --max-model-len, llama.cpp per-slot context)."""
    max_num_seqs: int = Field(gt=0)
    """Largest batch (vLLM --max-num-seqs, llama.cpp --parallel)."""
    gpu_memory_utilization: float | None = None
    """vLLM's share of each GPU's memory; None for llama.cpp."""
    threads: int | None = None
    """llama.cpp threads; None for vLLM."""
    visible_devices: list[list[int]] = Field(default_factory=list)
    """GPU indices per packed engine instance on one node (CUDA_VISIBLE_DEVICES), e.g. [[0],[1]]."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment for the engine process (NCCL/EFA settings...); never secrets."""
    health_path: str = "/health"
    """Liveness path the load balancer checks."""
    distributed_executor_backend: Literal["mp", "ray"] | None = None
    """vLLM executor: `ray` for multi-node replicas, None for llama.cpp."""


class MemoryPlan(_Frozen):
    """Per-GPU (or per-node on CPU) memory breakdown behind the fit, GiB."""

    device_memory_gib: float
    """Usable memory of one GPU (or node RAM on CPU)."""
    weights_gib_per_gpu: float
    """Weights resident on one GPU."""
    kv_cache_gib_per_gpu: float
    """KV cache budget on one GPU."""
    overhead_gib_per_gpu: float
    """Activations, CUDA graphs, NCCL buffers and the unused utilisation margin on one GPU."""
    kv_cache_bytes_per_token: int
    """KV bytes per token for the whole model (all layers), before any split."""
    kv_cache_capacity_tokens: int
    """Tokens of KV cache one replica holds."""


class HardwarePlan(_Frozen):
    """The node's resources, and what the plan needs of them."""

    vcpus: int
    """vCPUs of one node."""
    memory_gib: float
    """System RAM of one node."""
    required_memory_gib: float
    """System RAM the plan needs on one node (1.5 x what the model loads, for loading/page cache)."""
    gpu_memory_gib: float
    """Memory of one GPU (0 on CPU)."""
    network_gbps: float
    """Baseline network bandwidth of one node."""


class StoragePlan(_Frozen):
    """Where model files live on the node."""

    kind: Literal["instance-store", "volume"]
    """Local NVMe instance store (RAID 0 at boot) or an attached cloud volume."""
    mount_path: str = "/opt/models"
    """Mount point of the model store."""
    required_gib: int
    """Space the model files plus cache need."""
    nvme_devices: int = 0
    """Instance-store NVMe disks to stripe (kind instance-store)."""
    nvme_total_gib: float = 0
    """Their total size, GiB."""
    volume_gib: int = 0
    """Data volume size (kind volume), GiB."""
    volume_type: str | None = None
    """gp3 / io2 (AWS) or cloud_essd (Alibaba); None for instance store."""
    volume_iops: int | None = None
    """Provisioned IOPS for the data volume."""
    volume_throughput_mb_per_s: int | None = None
    """Provisioned throughput (gp3) for the data volume, MB/s."""
    performance_level: Literal["PL0", "PL1", "PL2", "PL3"] | None = None
    """Alibaba ESSD performance level."""
    root_volume_gib: int = 100
    """Root/system disk size (engine install, container images, logs)."""


class NetworkPlan(_Frozen):
    """How nodes and clients reach each other."""

    rdma: Literal["none", "efa", "erdma"]
    """RDMA fabric between the nodes of one replica."""
    efa_interfaces: int = 0
    """EFA interfaces per node (AWS; one per network card)."""
    placement: Literal["none", "cluster"]
    """Cluster placement group / low-latency deployment set for multi-node replicas."""
    load_balancer: Literal["alb", "nlb"] = "alb"
    """Load balancer kind in front of the replicas."""
    idle_timeout_s: int = 600
    """LB idle timeout, long enough for streamed generations."""
    health_check_grace_s: int
    """Time a new node gets to download and load the model before health checks count."""
    required_gbps: float
    """Client traffic plus, for multi-node, the pipeline activations between nodes."""


class EstimatePlan(_Frozen):
    """Expected behaviour at peak load, per replica unless stated."""

    ttft_ms: float
    """Time to first token at peak (queueing included)."""
    tpot_ms: float
    """Time per output token at peak."""
    e2e_ms: float
    """End-to-end latency of an average request at peak."""
    concurrency_per_replica: int
    """Requests in flight on one replica at peak."""
    capacity_requests_per_s: float
    """Requests/s one replica sustains within the SLOs."""
    output_tokens_per_s: float
    """Output tokens/s of the whole deployment at peak."""
    utilisation: float
    """Peak load divided by total capacity."""
    relative_uncertainty: float
    """Relative error band of these figures (from calibration residuals)."""
    queueing_method: str
    """How replicas were sized for the load (method and utilisation cap)."""


class CostPlan(_Frozen):
    """What it costs (730-hour month)."""

    pricing: Pricing
    """Capacity type used for `usd_per_hour`."""
    usd_per_hour: float
    """Whole deployment, per hour, at `pricing`."""
    usd_per_month: float
    """Whole deployment, per month, at `pricing`."""
    on_demand_usd_per_month: float | None
    """Same deployment on demand (None when the catalog has no on-demand price)."""
    spot_usd_per_month: float | None
    """Same deployment on spot (None when the catalog has no spot price)."""
    price_source: str
    """Where the price came from, with its date."""


class Alternative(_Frozen):
    """A candidate that lost, and why."""

    cloud: str
    """Cloud."""
    region: str
    """Region."""
    instance_type: str
    """Instance type."""
    engine: str
    """Engine."""
    precision: str
    """Weight format."""
    tp: int
    """Tensor-parallel degree."""
    pp: int
    """Pipeline-parallel degree."""
    replicas: int | None
    """Replicas it would need (None when it cannot serve at all)."""
    usd_per_month: float | None
    """Its monthly cost (None when it cannot serve at all or has no price)."""
    ttft_ms: float | None = None
    """Its expected TTFT at peak, when it fits."""
    tpot_ms: float | None = None
    """Its expected TPOT at peak, when it fits."""
    rejected_because: str
    """Why it lost (memory, SLO, price, budget, or 'costs more than the chosen plan')."""


class SecretsPlan(_Frozen):
    """Names (never values) of the secrets the nodes read at boot."""

    hf_token_name: str
    """Secret holding the Hugging Face token."""
    api_key_name: str
    """Secret holding the API key clients must send."""


class Plan(_Frozen):
    """One resolved deployment."""

    schema_version: Literal[1] = PLAN_SCHEMA_VERSION
    """Version of the plan format."""
    infragen_version: str
    """infragen version that produced it."""
    workload: str
    """Workload name (resource and secret names derive from it)."""
    deployment: DeploymentPlan
    """Where and on what."""
    model: ModelPlan
    """What is served."""
    engine: EnginePlan
    """How it is started."""
    memory: MemoryPlan
    """Why it fits."""
    hardware: HardwarePlan
    """Node resources."""
    storage: StoragePlan
    """Model storage."""
    network: NetworkPlan
    """Networking."""
    estimate: EstimatePlan
    """Expected behaviour at peak."""
    cost: CostPlan
    """Cost."""
    secrets: SecretsPlan
    """Secret names."""
    explanation: list[str] = Field(default_factory=list)
    """Why this deployment: one sentence a line."""
    warnings: list[str] = Field(default_factory=list)
    """Deliberate fallbacks and things a reviewer should know."""
    alternatives: list[Alternative] = Field(default_factory=list)
    """Top candidates that lost, cheapest first."""

    @model_validator(mode="before")
    @classmethod
    def _check_digest(cls, data: Any) -> Any:
        # A stored plan carries its digest; accept it only if the content still matches.
        if isinstance(data, dict) and "digest" in data:
            data = dict(data)
            claimed = data.pop("digest")
            actual = _digest_of({k: v for k, v in data.items()})
            if claimed != actual:
                raise ValueError(f"digest {claimed!r} does not match the plan's content ({actual!r}); "
                                 "the file was edited by hand or is corrupt")
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def digest(self) -> str:
        """sha256 (first 16 hex digits) of the canonical JSON of everything else."""
        return _digest_of(self.model_dump(mode="json", exclude={"digest"}))

    def canonical_json(self) -> str:
        return canonical_json(self.model_dump(mode="json"))

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=indent) + "\n"


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _digest_of(data: dict[str, Any]) -> str:
    # Normalise through the model's JSON form so floats/ints print the same way every time.
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:16]


def load_plan(path: Path | str) -> Plan:
    """Read a plan JSON file (as written by `infragen plan --out`)."""
    from infragen.validation import load_yaml_file, validate_file_data

    path = Path(path)
    return validate_file_data(path, load_yaml_file(path), Plan, what="plan")
