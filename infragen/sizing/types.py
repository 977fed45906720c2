"""In-memory results of the sizing model: the hardware one replica runs on, its memory split and its estimate.

Frozen dataclasses only (cheap to build in the planner's hot loop); no I/O, no pydantic, no printing.
"""

from __future__ import annotations

from dataclasses import dataclass

from infragen.catalog.records import Accelerator, CpuModel


@dataclass(frozen=True)
class Hardware:
    """One node (a cloud instance or an on-prem machine) as the model sees it."""

    name: str
    """Instance type or a description (`2 x h100-sxm-80gb`)."""
    accelerator: Accelerator | None
    """GPU model; None = CPU only (llama.cpp)."""
    gpu_count: int
    """GPUs in the node (0 for CPU-only)."""
    gpu_memory_gib: float | None
    """Usable memory per GPU (driver total where sourced, else AWS API MiB / 1024); None -> accelerator's."""
    cpu: CpuModel | None
    """CPU model (needed for CPU inference), None when not sourced."""
    vcpus: int | None
    """vCPUs of the node (None = unknown)."""
    memory_gib: float | None
    """System RAM, GiB (None = unknown)."""
    network_gbps: float | None
    """Baseline node network bandwidth, Gbit/s (None = unknown)."""
    rdma: str = "none"
    """RDMA fabric between nodes: none | efa | erdma."""
    physical_cores: int | None = None
    """Physical CPU cores (llama.cpp threads); None = vcpus / threads per core of the CPU, or vcpus."""
    cpu_sockets: int = 1
    """CPU sockets whose memory bandwidth the node gets (a VM slice counts as part of one)."""
    measured_memory_bandwidth_gb_per_s: float | None = None
    """DRAM read bandwidth measured on the machine (all cores), GB/s; None = use the CPU's datasheet peak."""

    @property
    def memory_per_gpu_gib(self) -> float:
        """Usable memory of one GPU, GiB (exposed figure, else the driver's total, else the vendor label)."""
        if self.gpu_memory_gib is not None:
            return self.gpu_memory_gib
        if self.accelerator is None:
            return 0.0
        return self.accelerator.usable_memory_gib


@dataclass(frozen=True)
class MemoryEstimate:
    """How one replica's memory splits per GPU (vLLM) or in host RAM (llama.cpp), before any speed figure."""

    fits: bool
    """True when weights + overheads + at least one max_model_len sequence of KV fit."""
    reason: str | None
    """Why it does not fit, with numbers; None when it fits."""
    engine: str
    """vllm | llama.cpp."""
    precision: str
    """Weight precision (bf16, fp16, fp8, awq-int4, gptq-int4, int8, gguf-q4_k_m...)."""
    kv_cache_dtype: str
    """KV cache element type after resolving `auto` (bf16, fp16, fp8)."""
    tp: int
    """Tensor-parallel degree."""
    pp: int
    """Pipeline-parallel degree."""
    nodes: int
    """Nodes the replica spans (pp across nodes)."""
    weights_gib_per_gpu: float
    """Weights on the most loaded GPU, GiB (llama.cpp CPU: the whole model in RAM)."""
    kv_cache_bytes_per_token: int
    """KV cache of one token for the whole model (all layers), bytes."""
    kv_cache_gib_per_gpu: float
    """KV cache budget per GPU after weights and overheads, GiB."""
    kv_cache_capacity_tokens: int
    """Tokens of KV the replica can hold (block-rounded, all GPUs together)."""
    overhead_gib_per_gpu: float
    """Activation peak + CUDA graphs + NCCL buffers + non-torch memory per GPU, GiB."""
    max_model_len: int
    """Largest max_model_len that fits (capped by the model's context), as vLLM would print it; 0 if none."""
    budget_gib_per_gpu: float
    """gpu_memory_utilization x total memory per GPU (vLLM) or usable host RAM (llama.cpp), GiB."""
    notes: tuple[str, ...] = ()
    """Assumptions worth showing to the user."""


@dataclass(frozen=True)
class Estimate:
    """Predicted behaviour of one replica under one load; `fits=False` is an answer, not an error."""

    fits: bool
    """True when the engine would start and serve at least one request of the given lengths."""
    reason: str | None
    """Why not, with numbers ("weights need 131 GiB, 2 x L4 give 44 GiB"); None when it fits."""
    engine: str
    """vllm | llama.cpp."""
    precision: str
    """Weight precision."""
    kv_cache_dtype: str
    """KV cache dtype after resolving `auto`."""
    tp: int
    """Tensor-parallel degree."""
    pp: int
    """Pipeline-parallel degree."""
    nodes: int
    """Nodes spanned by the replica."""
    concurrency: int
    """Batch actually modelled (after `max` or capping to max_concurrency)."""
    weights_gib_per_gpu: float
    """Weights per GPU, GiB."""
    kv_cache_bytes_per_token: int
    """KV cache per token, whole model, bytes."""
    kv_cache_gib_per_gpu: float
    """KV cache budget per GPU, GiB."""
    kv_cache_capacity_tokens: int
    """KV tokens per replica."""
    overhead_gib_per_gpu: float
    """Non-weight, non-KV memory per GPU, GiB."""
    max_concurrency: int
    """Largest batch at input+output length (KV and max-num-seqs / slots limited)."""
    max_model_len: int
    """Largest max_model_len that fits, as vLLM would print it."""
    ttft_ms: float
    """Time to first token at the modelled concurrency, ms."""
    tpot_ms: float
    """Time per output token after the first, ms."""
    e2e_ms: float
    """End-to-end request latency, ms."""
    output_tokens_per_s: float
    """Output tokens per second, total over all GPUs of the replica."""
    requests_per_s: float
    """Completed requests per second at the modelled concurrency."""
    relative_uncertainty: float
    """Relative error band (fraction) from the calibration residuals of this regime."""
    regime: str
    """Which physics dominates, e.g. `gpu-decode-memory-bound`, `cpu-generation`."""
    notes: tuple[str, ...] = ()
    """Assumptions and caveats."""
    ttft_p50_ms: float | None = None
    """Open loop (load model): median TTFT at the arrival rate, ms; None at a fixed concurrency."""
    ttft_p99_ms: float | None = None
    """Open loop: 99th-percentile TTFT at the arrival rate (queueing included), ms."""
    e2e_p99_ms: float | None = None
    """Open loop: TTFT p99 plus the output's decode time, ms."""
    running_batch: float | None = None
    """Open loop: mean requests holding a batch slot at the arrival rate."""
    utilisation: float | None = None
    """Open loop: share of the replica's saturation (slots or prompt steps) the arrival rate uses."""
    latency_factor: float = 1.0
    """What predicted latencies were multiplied by for the SLO check (slo_confidence)."""
    expert_parallel: bool = False
    """vLLM --enable-expert-parallel was modelled: the tp group's GPUs hold whole routed experts (False at tp 1,
    where vLLM does not turn it on, and for the other engines)."""
