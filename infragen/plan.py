"""The resolved deployment: one frozen, versioned, serialisable Plan.

Everything after the planner (cloud-init rendering, Pulumi components, PR diffs) reads only this.
Nothing here makes a sizing decision. A digest of the canonical JSON identifies a plan.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    computed_field,
    model_serializer,
    model_validator,
)

from infragen.errors import InputError
from infragen.identifiers import (
    ArgvWord,
    CatalogId,
    CompilerFlag,
    EngineVersion,
    EnvName,
    EnvValue,
    FileName,
    HostName,
    HttpUrl,
    InstanceType,
    ModelId,
    NodePath,
    RegionId,
    ReleaseNumber,
    SecretName,
    Text,
    TimeZoneName,
    UrlPath,
    Version,
    WeightsUri,
    WorkloadName,
    shown,
)
from infragen.spec import Cloud, Engine, KvCacheDtype, Precision, Pricing

PLAN_SCHEMA_VERSION = 1


#: Largest number a plan may hold anywhere (counts, GiB, ms, USD): far above any real deployment, so an edited
#: plan cannot make arithmetic downstream overflow.
MAX_PLAN_NUMBER = 10**12
#: Largest list in a plan (argv words, alternatives, explanation lines).
MAX_PLAN_LIST = 500


class _Frozen(BaseModel):
    # Plans are data from artifacts: typed strictly, finite and bounded numbers, no coercion of "5" to 5.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True,
                              allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, value in data.items():
                _check_bounded(value, str(key))
        return data


class DeploymentPlan(_Frozen):
    """Where and on what the model runs."""

    cloud: Cloud
    """Cloud provider."""
    region: RegionId
    """Region id (`us-east-1`, `cn-hangzhou`)."""
    instance_type: InstanceType
    """Instance type id (`g6e.xlarge`, `ecs.gn7i-c8g1.2xlarge`)."""
    gpu: CatalogId | None
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
    expert_parallel: bool = False
    """vLLM serves the MoE layers expert-parallel (--enable-expert-parallel): each of the tp GPUs holds whole
    routed experts instead of a slice of every expert; False for dense models, tp 1 and llama.cpp."""
    engine: Engine
    """Serving engine."""
    precision: Precision
    """Weight format (`bf16`, `int4-awq`, `q4_k_m`...)."""
    kv_cache_dtype: KvCacheDtype
    """KV-cache element type."""
    pricing: Pricing
    """Capacity type the cost was computed for."""
    cpu_arch: Literal["x86_64", "arm64"]
    """Node CPU architecture (picks the machine image)."""


class ModelPlan(_Frozen):
    """What is served and where its files come from."""

    id: ModelId
    """Registry id (or `custom`)."""
    display_name: Text
    """Name for humans."""
    served_model_name: ModelId
    """Name clients put in the OpenAI `model` field."""
    weights_source: Literal["huggingface", "modelscope", "s3", "oss"]
    """Where the node downloads the checkpoint from (ModelScope: the mainland-China model hub)."""
    weights_uri: WeightsUri
    """HF or ModelScope repo id (`org/name`), or `s3://bucket/prefix`, or `oss://bucket/prefix`."""
    weights_file: FileName | None = None
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
    version: EngineVersion
    """Pinned engine version (vLLM PyPI version, llama.cpp release tag `b1234`)."""
    argv: list[ArgvWord] = Field(min_length=1, max_length=MAX_PLAN_LIST)
    """The exact command one engine instance runs (`vllm serve ...`, `llama-server ...`)."""
    port: int = Field(ge=1024, le=65535)
    """Port of the first engine instance; packed replicas use port, port+1, ..."""
    host: Literal["0.0.0.0"] = "0.0.0.0"
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
    env: dict[EnvName, EnvValue] = Field(default_factory=dict, max_length=64)
    """Environment for the engine process (NCCL/EFA settings...); never secrets."""
    health_path: UrlPath = "/health"
    """Liveness path the load balancer checks."""
    distributed_executor_backend: Literal["mp", "ray"] | None = None
    """vLLM executor: `ray` for multi-node replicas, None for llama.cpp."""
    build_flags: list[CompilerFlag] = Field(default_factory=list, max_length=16)
    """llama.cpp: compiler flags the node builds it with beside the CPU's own instructions (engines.yaml
    `build_cflags`: the pinned tree's AMX kernels stop with an illegal instruction, so they are compiled out);
    empty for vLLM (installed from wheels)."""


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
    mount_path: NodePath = "/opt/models"
    """Mount point of the model store."""
    required_gib: int
    """Space the model files plus cache need."""
    nvme_devices: int = 0
    """Instance-store NVMe disks to stripe (kind instance-store)."""
    nvme_total_gib: float = 0
    """Their total size, GiB."""
    volume_gib: int = 0
    """Data volume size (kind volume), GiB."""
    volume_type: CatalogId | None = None
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
    queueing_method: Text
    """How replicas were sized for the load (method and utilisation cap)."""
    in_flight_requests: float | None = None
    """Mean requests in flight over the whole deployment at peak (closed loop: users x E2E / (think + E2E); open
    loop: rate x E2E, Little's law). None in plans written before it was reported."""
    arrival_requests_per_s: float | None = None
    """Requests/s arriving over the whole deployment at peak (open loop: peak_requests_per_s; closed loop: users /
    (think + E2E)). None in plans written before it was reported."""
    slo_confidence: Literal["p50", "p90"] | None = None
    """The workload's slo_confidence the SLOs were checked at. None in plans written before it was recorded."""
    latency_factor: float | None = None
    """What predicted latencies (open loop vLLM: every engine step) were multiplied by for the SLO check at that
    confidence (performance.yaml slo_confidence; 1 at p50). None in plans written before it was recorded."""
    ttft_p50_ms: float | None = None
    """Open loop, vLLM (load model): median TTFT at the peak's per-replica arrival rate, ms; None otherwise."""
    ttft_p99_ms: float | None = None
    """Open loop, vLLM: 99th-percentile TTFT at peak (queueing included; the model's estimate, not inflated), ms."""
    e2e_p99_ms: float | None = None
    """Open loop, vLLM: TTFT p99 plus the output's decode time at peak, ms."""
    running_batch: float | None = None
    """Open loop, vLLM: mean requests holding a batch slot on one replica at peak (Little's law)."""


class CostPlan(_Frozen):
    """What it costs (730-hour month)."""

    pricing: Pricing
    """Capacity type used for `usd_per_hour`."""
    usd_per_hour: float
    """Whole deployment, per hour, at `pricing` (spot: the on-demand base on demand, the rest on spot)."""
    usd_per_month: float
    """Whole deployment, per month, at `pricing` (spot: as `usd_per_hour`)."""
    on_demand_usd_per_month: float | None
    """Same deployment on demand (None when the catalog has no on-demand price)."""
    spot_usd_per_month: float | None
    """Same deployment on spot (None when the catalog has no spot price)."""
    price_source: Text
    """Where the price came from, with its date."""
    usd_per_million_output_tokens_at_capacity: float | None = None
    """Instances only: $ per 1M output tokens with every replica serving its SLO-meeting capacity (hourly cost /
    output tokens per hour at capacity; `plan --sort token-cost` ranks by it); None without a price."""
    usd_per_million_output_tokens_at_peak: float | None = None
    """Instances only: $ per 1M output tokens at the workload's peak (the bill's figure adds its other lines)."""


class Alternative(_Frozen):
    """A candidate that lost, and why."""

    cloud: Cloud
    """Cloud."""
    region: RegionId
    """Region."""
    instance_type: InstanceType
    """Instance type."""
    engine: Engine
    """Engine."""
    precision: Precision
    """Weight format."""
    tp: int
    """Tensor-parallel degree."""
    pp: int
    """Pipeline-parallel degree."""
    expert_parallel: bool = False
    """Served expert-parallel (vLLM --enable-expert-parallel, MoE models)."""
    replicas_per_node: int = 1
    """Engines packed on each node (data parallel, one per group of tp GPUs)."""
    nodes_per_replica: int = 1
    """Nodes one replica spans (pipeline parallel over RDMA)."""
    replicas: int | None
    """Replicas it would need (None when it cannot serve at all)."""
    nodes: int | None = None
    """Nodes it would need (None when it cannot serve at all)."""
    usd_per_month: float | None
    """Its monthly cost (None when it cannot serve at all or has no price)."""
    ttft_ms: float | None = None
    """Its expected TTFT at peak, when it fits."""
    tpot_ms: float | None = None
    """Its expected TPOT at peak, when it fits."""
    usd_per_million_output_tokens_at_capacity: float | None = None
    """Instances only: $ per 1M output tokens with its replicas serving their SLO-meeting capacity (None when it
    cannot serve or has no price)."""
    usd_per_million_output_tokens_at_peak: float | None = None
    """Instances only: $ per 1M output tokens at the workload's peak (None when it cannot serve or has no price)."""
    feasible: bool = False
    """True when it meets every constraint and lost on cost or latency only."""
    miss: float | None = None
    """How far its binding constraint is missed (needed / allowed, e.g. 1.2 = 20% over an SLO, the budget, RAM
    or memory); None when feasible or when no measure applies (support rules, a missing price)."""
    rejected_because: Text
    """Why it lost: the binding constraint or rule (memory, SLO, price, budget, limits), or 'costs more'."""


class GpuDriverPlan(_Frozen):
    """NVIDIA driver the first boot installs (Alibaba system images carry none), and how."""

    driver_version: ReleaseNumber
    """NVIDIA driver version, e.g. `550.127.08` (matches the CUDA runtime of the pinned engine's wheels;
    ubuntu-archive: the build recorded from the archive, apt installs the branch's current one)."""
    method: Literal["alibaba-auto-install", "ubuntu-archive"] = "alibaba-auto-install"
    """`alibaba-auto-install`: Alibaba's script with driver/CUDA/cuDNN versions; `ubuntu-archive`: Ubuntu's packages
    of NVIDIA's server branch from the image's apt mirror (CUDA 13 drivers, which the script is not known to offer)."""
    cuda_version: ReleaseNumber | None = None
    """alibaba-auto-install: CUDA toolkit the script installs with it."""
    cudnn_version: ReleaseNumber | None = None
    """alibaba-auto-install: cuDNN the script installs with it."""
    installer: FileName | None = None
    """alibaba-auto-install: script name under the region's `source-address` metadata item (`auto_install_v4.0.sh`)."""
    installer_path: UrlPath | None = None
    """alibaba-auto-install: path of the script under that address (`/opsx/ecs/linux/binary/script/`)."""
    ubuntu_drivers_id: Annotated[str, Field(pattern=r"^nvidia:[0-9]{3}(-server)?$")] | None = None
    """ubuntu-archive: what `ubuntu-drivers install --gpgpu` installs (`nvidia:580-server`)."""
    packages: list[CatalogId] = Field(default_factory=list, max_length=8)
    """ubuntu-archive: packages installed after the driver (`nvidia-utils-580-server`: nvidia-smi)."""
    fabric_manager_package: CatalogId | None = None
    """ubuntu-archive: Fabric Manager package, installed (and required to run) on nodes with NVSwitch."""
    erdma: bool = False
    """Also install the eRDMA software stack (multi-node replicas over eRDMA)."""
    erdma_installer_url: HttpUrl | None = None
    """ubuntu-archive with eRDMA: Alibaba's eRDMA installer (`env_setup.sh`), run with `--egs`."""

    @model_validator(mode="after")
    def _complete(self) -> GpuDriverPlan:
        # The boot script runs what the method needs: an edited plan cannot leave a blank in the command line.
        needs = {"alibaba-auto-install": ("cuda_version", "cudnn_version", "installer", "installer_path"),
                 "ubuntu-archive": ("ubuntu_drivers_id",)}[self.method]
        missing = [key for key in needs if getattr(self, key) is None]
        if self.method == "ubuntu-archive" and self.erdma and self.erdma_installer_url is None:
            missing.append("erdma_installer_url")
        if missing:
            raise ValueError(f"gpu_driver with method {self.method} needs {', '.join(missing)}")
        return self


class SourceArchivePlan(_Frozen):
    """The engine source a node builds, as a PyPI source distribution fetched from an index and checked by sha256
    before anything in it is unpacked or run (llama.cpp: the tree llama-cpp-python vendors)."""

    index_url: HttpUrl
    """PEP 503 simple index the archive is fetched from (Alibaba: the in-VPC PyPI mirror)."""
    package: CatalogId
    """Project on that index (`llama-cpp-python`)."""
    version: ReleaseNumber
    """Its pinned version (`0.3.36`)."""
    file: FileName
    """The archive's file name on the index page (`llama_cpp_python-0.3.36.tar.gz`)."""
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    """Its pinned SHA-256 (engines.yaml); any other content is refused."""
    tree: Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}(?:/[A-Za-z0-9_][A-Za-z0-9._-]{0,63}){0,7}$")]
    """Directory in the archive holding the engine's CMakeLists.txt (`llama_cpp_python-0.3.36/vendor/llama.cpp`)."""
    commit: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]
    """Engine commit the tree is (engines.yaml); recorded in the build's version string."""
    build_number: int = Field(ge=0)
    """llama.cpp build number of the release tag (`b11312` -> 11312), recorded in the version string too (the
    archive's shallow git metadata would give 1)."""


class BootstrapPlan(_Frozen):
    """Node setup beyond the engine: the GPU driver and where packages and weights come from.

    Absent from a plan (and its JSON) when nothing here applies, e.g. on AWS without `hf_endpoint`.
    """

    gpu_driver: GpuDriverPlan | None = None
    """Driver to install at first boot when the image has none; None = the image must provide it."""
    pip_index_url: HttpUrl | None = None
    """PyPI mirror every pip install on the node uses (Alibaba: the in-VPC mirror); None = PyPI."""
    pip_trusted_host: HostName | None = None
    """Host pip trusts for that mirror (plain-HTTP in-VPC mirrors); None = none."""
    hf_endpoint: HttpUrl | None = None
    """HF_ENDPOINT for Hugging Face downloads (a mirror of the Hub); None = huggingface.co."""
    download_mbit_s: float | None = None
    """Bandwidth each node gets for downloading weights from the internet when it is the bottleneck (all nodes
    share one NAT EIP on Alibaba); None = the instance's own network."""
    erdma_mtus: list[Annotated[int, Field(ge=576, le=9000)]] = Field(default_factory=list, max_length=2)
    """eRDMA nodes: [MTU without jumbo frames, MTU with them] that NCCL's LL128 protocol needs (1400, 8500); the
    boot sets the one that matches the interface (>= the jumbo figure: jumbo frames are on). Empty = no eRDMA."""
    engine_source: SourceArchivePlan | None = None
    """Where a llama.cpp node gets the source it builds: this PyPI sdist through `index_url` (Alibaba, whose
    nodes cannot count on reaching llama.cpp's git host); None = a git clone of the release tag (AWS)."""


class BootPlan(_Frozen):
    """How long a new node takes before it serves (what autoscaling has to plan ahead for)."""

    install_s: int = Field(ge=0)
    """Boot and engine install before the download starts (policy allowance)."""
    download_s: int = Field(ge=0)
    """Downloading the weights at `download_gbps`."""
    load_s: int = Field(ge=0)
    """Loading them into the engine (allowance: half the download time)."""
    download_gbps: float = Field(gt=0)
    """Bandwidth the download is assumed to get, Gbit/s."""
    total_s: int = Field(ge=0)
    """Install + download + load, floored at 15 minutes (the load balancer's health-check grace period)."""


class ScalingPlan(_Frozen):
    """Traffic over a day: replicas per hour, autoscaling bounds and the cost at the profile.

    Present only when the workload gives `traffic.hourly_profile` or `traffic.average_requests_per_s`.
    """

    time_zone: TimeZoneName
    """IANA time zone of the hours."""
    hourly_profile: list[float] | None = Field(default=None, min_length=24, max_length=24)
    """The workload's load per hour as a fraction of the peak (hour 0 first); None with only an average."""
    average_load_fraction: float = Field(ge=0, le=1)
    """Average load over the day as a fraction of the peak."""
    replicas_by_hour: list[int] | None = Field(default=None, min_length=24, max_length=24)
    """Replicas each hour needs, sized like the peak with the same SLOs (hour 0 first)."""
    boot: BootPlan
    """Time a new replica needs before it serves."""
    steepest_ramp_per_hour: float = Field(ge=0)
    """Largest hour-to-hour rise of the load, as a fraction of the peak (hour 23 -> 0 included)."""
    min_replicas: int = Field(ge=1)
    """Autoscaling floor: the quietest hour's load plus what the steepest ramp adds during one boot time."""
    max_replicas: int = Field(ge=1)
    """Autoscaling ceiling: the peak at the target below."""
    target_requests_per_s_per_replica: float = Field(ge=0)
    """Requests/s per replica target tracking holds: the capacity at the utilisation cap, less the headroom the
    steepest ramp needs while new replicas boot."""
    strategy: Literal["scheduled", "target-tracking"]
    """How the fleet follows the load at the lower cost: scheduled actions from the profile (each scale-up one
    boot time ahead) or target tracking alone."""
    average_replicas: float = Field(ge=0)
    """Replicas running on average over the day with `strategy`."""
    usd_per_month_at_profile: float | None
    """Monthly cost (730 h) when the fleet follows the profile with `strategy` (None without a price)."""
    usd_per_month_at_peak: float | None
    """Monthly cost of the peak fleet running all day (the plan's `cost.usd_per_month`; a spot plan's on-demand
    base billed on demand, as `spot.usd_per_month_expected`)."""
    method: Text
    """How these figures were derived."""


class SpotPlan(_Frozen):
    """A spot plan's on-demand floor, the same-GPU types its spot pools may use, and the expected cost of the mix."""

    on_demand_base_replicas: int = Field(ge=0)
    """Replicas on on-demand capacity (whole replicas: a multi-node replica is all on demand or all spot)."""
    on_demand_base_nodes: int = Field(ge=0)
    """Nodes on on-demand capacity (AWS: the replica group's on-demand base capacity)."""
    spot_nodes: int = Field(ge=0)
    """Nodes on spot capacity at the peak fleet."""
    base_basis: Text
    """Where the base comes from (the workload's field, or the median load)."""
    alternative_instance_types: list[InstanceType] = Field(default_factory=list, max_length=40)
    """Other types with the same GPUs (model and count) the spot part may launch: more spot pools, fewer
    simultaneous interruptions. Single-node replicas only; the deploy keeps those offered in its zones."""
    usd_per_month_expected: float | None
    """The peak fleet with the base on demand and the rest on spot, 730 h; None without both prices."""
    interruption_band: Text | None = None
    """The cloud's published interruption-frequency band for the type and region; None when no source has it."""
    interruption_note: Text
    """Where the band comes from, or why there is none."""
    risk: Text
    """What an interruption does to the service."""


BillItem = Literal["instances", "load-balancer", "nat-gateway", "model-download", "block-storage", "cross-zone",
                   "egress"]


class BillLine(_Frozen):
    """One line of the monthly bill."""

    item: BillItem
    """What is billed."""
    usd_per_month_at_peak: float | None
    """Monthly cost with the peak fleet all day; None when a price is missing (see `unpriced`)."""
    usd_per_month_at_profile: float | None
    """Monthly cost when the fleet follows the daily profile; None without a profile or a price."""
    quantity: Text
    """What is counted (units, hours, GB)."""
    price_source: Text
    """The unit prices used, each with its source and date."""
    unpriced: Text = ""
    """Why (part of) the line has no price; empty when fully priced."""


class BillPlan(_Frozen):
    """The whole monthly bill (730 h) and what a million tokens cost."""

    lines: list[BillLine] = Field(max_length=16)
    """Instances, load balancer, NAT gateway, model downloads, block storage, cross-zone traffic, egress."""
    usd_per_month_at_peak: float | None
    """Sum of the priced lines at the peak; None when the instances have no price."""
    usd_per_month_at_profile: float | None
    """Sum of the priced lines at the daily profile; None without one."""
    unpriced: list[BillItem] = Field(default_factory=list, max_length=16)
    """Lines left out of the sums (wholly or partly) for want of a cited price."""
    request_bytes: int = Field(ge=0)
    """Bytes one request sends (prompt)."""
    response_bytes: int = Field(ge=0)
    """Bytes one response sends back (streamed)."""
    usd_per_million_output_tokens_at_peak: float | None
    """The bill at the peak per million output tokens served at the peak."""
    usd_per_million_tokens_at_peak: float | None
    """The same per million prompt + output tokens."""
    usd_per_million_output_tokens_at_average: float | None
    """The bill at the profile per million output tokens served at the profile's average; None without one."""
    usd_per_million_tokens_at_average: float | None
    """The same per million prompt + output tokens."""
    method: Text
    """What is assumed."""


class SecretsPlan(_Frozen):
    """Names (never values) of the secrets the nodes read at boot."""

    hf_token_name: SecretName
    """Secret holding the Hugging Face token."""
    api_key_name: SecretName
    """Secret holding the API key clients must send."""

    def for_stack(self, stack: str) -> SecretsPlan:
        """The names one deployment (a Pulumi stack) uses: the stack after the leading `infragen/`
        (`infragen/<stack>/<workload>/api-key`), so two stacks of one workload in one account never share or
        overwrite each other's secrets. The plan keeps the stack-free names (its digest does not depend on where
        it is deployed)."""
        def scoped(name: str) -> str:
            head, sep, rest = name.partition("/")
            return f"{head}/{stack}/{rest}" if sep and head == "infragen" else f"infragen/{stack}/{name}"

        try:
            return SecretsPlan(hf_token_name=scoped(self.hf_token_name), api_key_name=scoped(self.api_key_name))
        except ValueError as exc:
            raise InputError(f"stack {stack!r}: its secret names are not valid secret names ({exc})",
                             fix="use a shorter stack name of letters, digits, '-', '_' and '.'") from None


class CalibrationPlan(_Frozen):
    """The calibration profile the plan was made with (`--calibration FILE` or the workload's `calibration:`)."""

    file: Text
    """The profile's path as given."""
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    """Digest of the profile's bytes (so the plan's digest changes with the profile)."""
    engine: Engine
    """Engine the profile's results were measured with."""
    hardware: Text
    """Hardware it was measured on (`N x GPU` for vLLM: any machine with those GPUs)."""
    decode_factor: Annotated[float, Field(gt=0, le=20)]
    """Generation speed factor applied."""
    prefill_factor: Annotated[float, Field(gt=0, le=20)]
    """Prompt-processing speed factor applied."""
    serving_overhead_ms: Annotated[float, Field(ge=0, le=10_000)] | None = None
    """vLLM: the serving path (ms of every TTFT outside the engine's steps) the profile measured and the estimates
    used in place of the engine's default; None: the default."""
    applied_to: list[InstanceType] = Field(default_factory=list, max_length=MAX_PLAN_LIST)
    """Instance types whose estimates it changed (on its hardware and engine), sorted."""
    not_applied: Annotated[int, Field(ge=0)] = 0
    """How many other instance types were considered and estimated without it (other hardware or engine)."""


class Plan(_Frozen):
    """One resolved deployment."""

    schema_version: Literal[1] = PLAN_SCHEMA_VERSION
    """Version of the plan format."""
    infragen_version: Version
    """infragen version that produced it."""
    workload: WorkloadName
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
    explanation: list[Text] = Field(default_factory=list, max_length=MAX_PLAN_LIST)
    """Why this deployment: one sentence a line."""
    warnings: list[Text] = Field(default_factory=list, max_length=MAX_PLAN_LIST)
    """Deliberate fallbacks and things a reviewer should know."""
    alternatives: list[Alternative] = Field(default_factory=list, max_length=MAX_PLAN_LIST)
    """Top candidates that lost, cheapest first."""
    bootstrap: BootstrapPlan | None = None
    """Driver install and download mirrors; None (and absent from the JSON) when the defaults serve."""
    scaling: ScalingPlan | None = None
    """Traffic over a day and autoscaling; None (and absent from the JSON) when the workload gives no daily shape."""
    bill: BillPlan | None = None
    """The whole monthly bill and the cost per million tokens; None (and absent) for plans made without it."""
    spot: SpotPlan | None = None
    """The on-demand floor and expected cost of a spot plan; None (and absent) for on-demand plans."""
    calibration: CalibrationPlan | None = None
    """The calibration profile applied; None (and absent) for plans made without one."""

    @model_serializer(mode="wrap")
    def _drop_absent_parts(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # An optional part that does not apply is left out, so plans without it keep their digests.
        data: dict[str, Any] = handler(self)
        for part in ("bootstrap", "scaling", "bill", "spot", "calibration"):
            if data.get(part, "") is None:
                del data[part]
        return data

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


def _check_bounded(value: Any, where: str) -> None:
    """Refuse numbers beyond MAX_PLAN_NUMBER (and non-finite floats) before any field sees them."""
    if isinstance(value, bool):
        return
    if isinstance(value, int | float) and not -MAX_PLAN_NUMBER <= value <= MAX_PLAN_NUMBER:
        raise ValueError(f"{where}: {shown(value)} is out of range (at most {MAX_PLAN_NUMBER:.0e} in a plan)")


def load_plan(path: Path | str) -> Plan:
    """Read a plan JSON file (as written by `infragen plan --out`), as strictly as a workload is read.

    The digest is required: it catches accidental edits and truncation. It is not a signature (anyone who edits
    the plan can recompute it); the character sets and ranges above are what keep an edited plan harmless.
    """
    from infragen.validation import load_json_file, validate_file_data

    path = Path(path)
    # A JSON parser, not YAML's: YAML 1.1 reads `1e-05` (json.dumps' spelling) as a string.
    data = load_json_file(path, what="plan file")
    if isinstance(data, dict) and "digest" not in data:
        raise InputError(f"{path}: digest: required field missing (a plan written by `infragen plan --out` "
                         "carries one; without it an edited plan cannot be told from the reviewed one)",
                         fix="re-run `infragen plan WORKLOAD --out PLAN.json` and review the new plan")
    return validate_file_data(path, data, Plan, what="plan")
