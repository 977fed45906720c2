"""The workload spec (`workload.yaml`): what the user wants served, never how.

Validation only: model names are resolved later by the catalog; nothing here loads data.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, field_validator, model_validator
from pydantic_core import PydanticCustomError

from infragen.architecture import ModelArchitecture
from infragen.errors import InputError
from infragen.identifiers import (
    HF_REPO_RE,
    HTTP_URL_PATTERN,
    WEIGHTS_RE,
    WORKLOAD_NAME_PATTERN,
    InstanceType,
    RegionId,
    TimeZoneName,
    WorkloadName,
    shown,
)

SPEC_SCHEMA_VERSION = 1
_NAME_RE = re.compile(WORKLOAD_NAME_PATTERN)

Precision = Literal[
    "bf16", "fp16", "fp8", "int8", "int4-awq", "int4-gptq", "q4_k_m", "q5_k_m", "q8_0", "q4_0",
]
"""Weight formats. `int4-*` are vLLM's AWQ/GPTQ checkpoints; `q*` are GGUF quant types for llama.cpp."""
GGUF_PRECISIONS: frozenset[str] = frozenset({"q4_k_m", "q5_k_m", "q8_0", "q4_0"})
#: Weight formats llama.cpp loads: its GGUF quant types plus F16/BF16 GGUF files.
LLAMA_CPP_PRECISIONS: frozenset[str] = GGUF_PRECISIONS | {"fp16", "bf16"}
#: Weight formats vLLM serves from safetensors checkpoints.
VLLM_PRECISIONS: frozenset[str] = frozenset({"bf16", "fp16", "fp8", "int8", "int4-awq", "int4-gptq"})
ALL_PRECISIONS: tuple[str, ...] = Precision.__args__  # type: ignore[attr-defined]
#: Formats that need a pre-quantized checkpoint in `weights` (vLLM quantizes only fp8 online).
PREQUANTIZED_PRECISIONS: frozenset[str] = GGUF_PRECISIONS | {"int8", "int4-awq", "int4-gptq"}
#: HF_ENDPOINT: an http(s) base URL with a host and nothing a shell or unit file would interpret.
_ENDPOINT_RE = re.compile(HTTP_URL_PATTERN)

KvCacheDtype = Literal["auto", "fp8"]
Engine = Literal["vllm", "llama.cpp"]
EngineChoice = Literal["auto", "vllm", "llama.cpp"]
Cloud = Literal["aws", "alicloud"]
CloudChoice = Literal["any", "aws", "alicloud"]
Pricing = Literal["on-demand", "spot"]


# Physical bounds on every figure a workload gives (finite, so no arithmetic downstream can overflow): models hold
# ~1e7 tokens. A rate beyond any real deployment (the largest clusters serve ~1e6 requests/s) is not malformed
# input but an impossible workload: `limits` refuses its plan with exit 3 and the size it would need.
MAX_REQUESTS_PER_S = 1e12
MAX_CONCURRENT_USERS = 10**8
MAX_TOKENS = 10**8
MAX_LATENCY_MS = 1e9
MAX_REPLICAS = 10**5
MAX_USD_PER_MONTH = 1e12
#: Dearest hourly price a price override may give (the largest GPU nodes list at ~100 USD/hour).
MAX_USD_PER_HOUR = 1e5
#: Default sanity limits on a plan (`limits`): beyond them a plan is far more likely a typo (a rate in the wrong
#: unit, an extra zero) than an intended purchase, so it is refused unless the workload raises them.
DEFAULT_MAX_NODES = 1000
DEFAULT_MAX_USD_PER_MONTH = 1e6
#: Largest value `limits` may be raised to (plans stay far below infragen.plan's MAX_PLAN_NUMBER).
MAX_LIMIT_NODES = 10**6
MAX_LIMIT_USD_PER_MONTH = 1e10
#: Longest list a workload field takes (precisions, regions, families).
MAX_LIST = 200
#: Hours in a day: `traffic.hourly_profile` has one value per hour.
HOURS_PER_DAY = 24
#: Longest think time a user may take (a day): a user idle longer than that is not online.
MAX_THINK_TIME_S = 86_400.0


class _Strict(BaseModel):
    # strict: YAML already types its scalars, so `true` is not 1 and "5" is not 5; no inf/nan figures.
    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, allow_inf_nan=False
    )


def conflict(field: str, message: str) -> PydanticCustomError:
    """A cross-field error reported at `field` (validation.py appends it to the error's location)."""
    return PydanticCustomError("conflict", message, {"field": field})


def _as_list(value: Any) -> Any:
    """Let a single string stand for a one-item list (`regions: us-east-1`)."""
    return [value] if isinstance(value, str) else value


class TrafficSpec(_Strict):
    """Peak load and request shape."""

    peak_requests_per_s: Annotated[PositiveFloat, Field(le=MAX_REQUESTS_PER_S)] | None = None
    """Peak arrival rate of requests (open loop). Give this or `concurrent_users`."""
    concurrent_users: Annotated[PositiveInt, Field(le=MAX_CONCURRENT_USERS)] | None = None
    """Peak number of users online at once (closed loop: each user waits for its answer, then `think_time_s`
    before the next request). With the default think time of 0 every user has a request in flight."""
    think_time_s: Annotated[float, Field(ge=0, le=MAX_THINK_TIME_S)] = 0.0
    """Seconds a user spends reading and typing between receiving an answer and sending the next request (only
    with `concurrent_users`). Requests in flight = users x E2E / (think + E2E), arrival rate = users / (think +
    E2E). 0 = every user always has a request in flight (the most demanding reading of `concurrent_users`)."""
    prompt_tokens: Annotated[PositiveInt, Field(le=MAX_TOKENS)] = 512
    """Average prompt length in tokens (system prompt and history included)."""
    output_tokens: Annotated[PositiveInt, Field(le=MAX_TOKENS)] = 256
    """Average generated tokens per request."""
    prefix_cache_hit_rate: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Share of prompt tokens already in vLLM's prefix cache when a request arrives (a system prompt every request
    shares, earlier turns of the same conversation), 0 to 1. Credited in prefill only: TTFT and the prefill work
    mixed into decode steps count the uncached tokens (whole 16-token blocks; the last prompt token is always
    computed). Not credited in KV memory: a hit rate cannot tell a prefix all requests share (held once) from each
    user's own history (held per user, and longer while they think). Above 0 the plan passes
    `--enable-prefix-caching` (vLLM 0.34's default for decoder models) so the credit never rests on a default.
    0 = nothing credited. llama.cpp plans do not credit it."""
    max_context_tokens: Annotated[PositiveInt, Field(le=MAX_TOKENS)] | None = None
    """Longest prompt + output a single request may use (vLLM max_model_len); None = the model's trained context
    (without YaRN scaling), capped by what the KV cache holds at the planned batch: one request of that length beside
    max_num_seqs - 1 average ones (the plan says which and why). llama.cpp: None = 4 x (prompt + output) per slot,
    because it allocates every slot's context up front."""
    average_requests_per_s: Annotated[PositiveFloat, Field(le=MAX_REQUESTS_PER_S)] | None = None
    """Average arrival rate over a day (at most the peak; with `peak_requests_per_s`): the plan also prices the
    deployment at this load. None = priced at the peak only. Give this or `hourly_profile`, not both."""
    hourly_profile: list[Annotated[float, Field(ge=0, le=1)]] | None = None
    """Load of each hour of the day as a fraction of the peak: 24 values, hour 0 (midnight in `time_zone`) first,
    the largest 1. The plan sizes every hour like the peak (same SLOs) and gives replicas per hour, autoscaling
    bounds and the monthly cost at this profile. None = no daily shape."""
    time_zone: TimeZoneName = "UTC"
    """IANA time zone the hours of `hourly_profile` are in (`Europe/Berlin`); scheduled scaling uses it."""
    response_bytes: Annotated[PositiveInt, Field(le=MAX_TOKENS * 1000)] | None = None
    """Average bytes one response sends to the client (the bill's egress and load-balancer traffic). None = 64 bytes
    per output token (a streamed response: one JSON chunk per token)."""

    @field_validator("hourly_profile")
    @classmethod
    def _a_whole_day(cls, value: list[float] | None) -> list[float] | None:
        if value is None:
            return None
        if len(value) != HOURS_PER_DAY:
            raise PydanticCustomError(
                "profile_length", "give 24 values, one per hour from hour 0 to hour 23; found {n}",
                {"n": len(value)})
        if max(value) != 1:
            raise PydanticCustomError(
                "profile_peak", "the largest value is {top}, but the values are fractions of the peak, so the "
                "busiest hour is 1 (divide every value by the largest and make the peak that busiest hour's load)",
                {"top": f"{max(value):g}"})
        return value

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise PydanticCustomError(
                "time_zone", "{value} is not a time zone of the IANA tz database (UTC, Europe/Berlin, Asia/Shanghai, "
                "America/New_York)", {"value": shown(value)}) from None
        return value

    @model_validator(mode="after")
    def _one_load_measure(self) -> TrafficSpec:
        if self.peak_requests_per_s is None and self.concurrent_users is None:
            raise conflict(
                "peak_requests_per_s",
                "give `peak_requests_per_s` or `concurrent_users` (the peak load to size for)",
            )
        if self.peak_requests_per_s is not None and self.concurrent_users is not None:
            raise conflict(
                "concurrent_users",
                "give only one of `peak_requests_per_s` (open loop) and `concurrent_users` (closed loop), not both",
            )
        if self.think_time_s and self.concurrent_users is None:
            raise conflict("think_time_s", "a think time needs `concurrent_users` (closed loop: users who read and "
                           "type between requests); with `peak_requests_per_s` the arrival rate already counts it, "
                           "so remove think_time_s")
        if self.max_context_tokens is not None and self.max_context_tokens < self.prompt_tokens + self.output_tokens:
            raise conflict(
                "max_context_tokens",
                f"{self.max_context_tokens} is below prompt_tokens + output_tokens "
                f"({self.prompt_tokens} + {self.output_tokens} = {self.prompt_tokens + self.output_tokens}); "
                "raise it or shorten the requests",
            )
        if self.average_requests_per_s is not None:
            if self.hourly_profile is not None:
                raise conflict("average_requests_per_s", "give `average_requests_per_s` or `hourly_profile` (the "
                               "profile already sets the average), not both")
            if self.peak_requests_per_s is None:
                raise conflict("average_requests_per_s", "an average rate needs `peak_requests_per_s`; with "
                               "`concurrent_users` give `hourly_profile` (fractions of the peak users) instead")
            if self.average_requests_per_s > self.peak_requests_per_s:
                raise conflict("average_requests_per_s", f"{self.average_requests_per_s:g} requests/s is above "
                               f"peak_requests_per_s ({self.peak_requests_per_s:g}); an average is at most the peak")
        return self


class SloSpec(_Strict):
    """Latency objectives; any subset. Unset objectives are not checked."""

    ttft_p99_ms: Annotated[PositiveFloat, Field(le=MAX_LATENCY_MS)] | None = None
    """99th-percentile time to first token at peak load, in milliseconds (queueing included)."""
    tpot_ms: Annotated[PositiveFloat, Field(le=MAX_LATENCY_MS)] | None = None
    """Time per output token after the first (inter-token latency) at peak load, in milliseconds."""
    e2e_p99_ms: Annotated[PositiveFloat, Field(le=MAX_LATENCY_MS)] | None = None
    """99th-percentile end-to-end latency of an average request at peak load, in milliseconds."""


class FamilyFilter(_Strict):
    """Instance families to consider (`g6e`, `p5`, `ecs.gn7i`...)."""

    allow: list[InstanceType] = Field(default_factory=list, max_length=MAX_LIST)
    """Only these families (empty = every family in the catalog)."""
    deny: list[InstanceType] = Field(default_factory=list, max_length=MAX_LIST)
    """Never these families."""

    @field_validator("allow", "deny", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _as_list(value)


class PriceOverride(_Strict):
    """Your own hourly price for one instance type in one region (a quote, a discount, a savings plan)."""

    instance_type: InstanceType
    """Instance type as the cloud names it (`p5.48xlarge`, `ecs.gn8v-4x.24xlarge`)."""
    region: RegionId
    """Region the price applies to."""
    on_demand_usd_per_hour: Annotated[PositiveFloat, Field(le=MAX_USD_PER_HOUR)] | None = None
    """On-demand / pay-as-you-go price, USD per hour."""
    on_demand_cny_per_hour: Annotated[PositiveFloat, Field(le=MAX_USD_PER_HOUR * 10)] | None = None
    """Alibaba pay-as-you-go price in CNY per hour (converted at the catalog's stated rate)."""
    spot_usd_per_hour: Annotated[PositiveFloat, Field(le=MAX_USD_PER_HOUR)] | None = None
    """Spot price, USD per hour."""
    note: Annotated[str, Field(max_length=200, pattern=r"^[^\x00-\x1f\x7f]*$")] = ""
    """Where the price comes from (a quote number, a contract); recorded in the plan."""

    @model_validator(mode="after")
    def _one_price(self) -> PriceOverride:
        if self.on_demand_usd_per_hour is None and self.on_demand_cny_per_hour is None and (
                self.spot_usd_per_hour is None):
            raise conflict("on_demand_usd_per_hour", "give at least one of on_demand_usd_per_hour, "
                           "on_demand_cny_per_hour or spot_usd_per_hour")
        if self.on_demand_usd_per_hour is not None and self.on_demand_cny_per_hour is not None:
            raise conflict("on_demand_cny_per_hour", "give the on-demand price in USD or in CNY, not both")
        return self


class LimitsSpec(_Strict):
    """Sanity limits on the size of a plan: a candidate above either is rejected (exit 3 when none is left)."""

    max_nodes: Annotated[PositiveInt, Field(le=MAX_LIMIT_NODES)] = DEFAULT_MAX_NODES
    """Most nodes (instances) a plan may have. Raise it for a deployment this large on purpose."""
    max_usd_per_month: Annotated[PositiveFloat, Field(le=MAX_LIMIT_USD_PER_MONTH)] = DEFAULT_MAX_USD_PER_MONTH
    """Dearest monthly cost (730 h, at `pricing`) a plan may have, USD. Unlike `budget_usd_per_month` it guards
    against typos; raise it for a deployment this large on purpose."""


class SpotSpec(_Strict):
    """How a spot plan keeps serving through interruptions."""

    on_demand_base_replicas: Annotated[int, Field(ge=0, le=MAX_REPLICAS)] | None = None
    """Replicas kept on on-demand capacity under `pricing: spot` (the rest run on spot; multi-node replicas
    count whole). None = enough for the median (p50) load: the median hour of `traffic.hourly_profile`, else
    `traffic.average_requests_per_s`; with neither, `min_replicas` (the median load is not known)."""


class WorkloadSpec(_Strict):
    """One model to serve, its traffic and objectives, and where it may run."""

    schema_version: Literal[1] = 1
    """Version of this file's format."""
    name: WorkloadName | None = None
    """Short name used in resource names and secret names; None = the file's stem."""
    model: Annotated[str, Field(min_length=1)] | ModelArchitecture
    """A registry name (`llama-3.1-8b`), a path to a Hugging Face `config.json` (relative to this file),
    or an explicit architecture mapping."""
    weights: str | None = None
    """Where the checkpoint is downloaded from: a Hugging Face repo id (`org/name`, for GGUF
    `org/name/file.gguf`), a ModelScope repo (`modelscope://org/name`, reachable from mainland China), or an
    `s3://` / `oss://` URI. None = the registry's reference repo, which only works for bf16/fp16 (and fp8,
    quantized online by vLLM). The precision list says what the checkpoint holds: with an AWQ/GPTQ/INT8 format
    listed it is that checkpoint; with fp8 and no bf16/fp16 listed it is an FP8 checkpoint (its quantization_config
    decides vLLM's method); with bf16/fp16 listed it holds 16-bit weights (fp8 is then quantized at load)."""
    hf_endpoint: str | None = None
    """HF_ENDPOINT the nodes download Hugging Face repos from (a mirror of the Hub, `https://host[/path]`).
    None = huggingface.co."""
    precision: list[Precision] = Field(default_factory=lambda: ["bf16"], max_length=MAX_LIST)
    """Weight formats allowed (one value or a list; the planner picks the cheapest that meets the SLOs)."""
    kv_cache_dtype: KvCacheDtype = "auto"
    """KV-cache element type: `auto` (the model dtype) or `fp8` (half the memory, on GPUs with FP8)."""
    traffic: TrafficSpec
    """Peak load and request shape."""
    slo: SloSpec = Field(default_factory=SloSpec)
    """Latency objectives at peak load."""
    slo_confidence: Literal["p50", "p90"] = "p90"
    """How sure the plan should be that it meets `slo`, given the speed model's own error. p90 (default): every
    predicted latency is multiplied by the 90th percentile of measured/predicted time over the calibration rows of
    its regime (x1.19 to x2.01, performance.yaml `slo_confidence`), so the SLOs hold unless the model errs more than
    it did on 9 in 10 measurements. p50: the estimate is taken as the median (cheaper; the model is as likely to be
    optimistic as pessimistic). Queueing percentiles (TTFT p99 under Poisson arrivals) are modelled either way."""
    engine: EngineChoice = "auto"
    """Serving engine: vLLM (GPUs), llama.cpp (CPUs, GGUF), or auto (both considered)."""
    cloud: CloudChoice = "any"
    """Cloud to deploy on."""
    regions: list[RegionId] = Field(default_factory=list, max_length=MAX_LIST)
    """Regions allowed (empty = every region with prices in the catalog)."""
    pricing: Pricing = "on-demand"
    """Capacity type the cost is optimised for. Spot needs a spot price in the catalog."""
    spot: SpotSpec = Field(default_factory=SpotSpec)
    """The on-demand floor of a spot plan (`pricing: spot` only)."""
    min_replicas: Annotated[PositiveInt, Field(le=MAX_REPLICAS)] = 1
    """Fewest replicas to run regardless of load (2+ for high availability)."""
    budget_usd_per_month: Annotated[PositiveFloat, Field(le=MAX_USD_PER_MONTH)] | None = None
    """Monthly cap (730 h) on the whole deployment; dearer candidates are rejected."""
    instance_families: FamilyFilter = Field(default_factory=FamilyFilter)
    """Instance families to allow or deny."""
    limits: LimitsSpec = Field(default_factory=LimitsSpec)
    """Sanity limits on the plan's size (nodes, monthly cost); a larger plan is refused with exit 3."""
    allow_multi_node: bool = False
    """Allow one replica to span several nodes (pipeline parallel over an RDMA network)."""
    allow_unpriced: bool = False
    """Also consider instance types the catalog has no price for (ranked after every priced option,
    cost reported as unknown). Useful on Alibaba Cloud, where some GPU families are sold through sales."""
    port: int = Field(default=8000, ge=1024, le=65535)
    """Port the engine listens on inside the private network (the load balancer forwards to it)."""
    prices: list[PriceOverride] = Field(default_factory=list, max_length=MAX_LIST)
    """Your own hourly prices by instance type and region; they replace or add to the catalog's and the plan
    records each one used (`infragen plan --prices FILE` adds more from a file)."""
    calibration: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    """A calibration profile (the YAML `infragen calibrate RESULT... -o FILE` writes; a path relative to this file).
    Its speed factors (and, for vLLM, the serving path it measured) apply only to the candidates on the hardware
    and engine it was measured on (for vLLM: engines of the GPU and tensor-parallel size it measured, on any
    machine), and only when this workload's model has the shapes of the model it was measured with (to no
    candidate otherwise); the plan says which candidates it changed and which it could not, and records the
    profile's digest. `infragen plan --calibration FILE` replaces it."""

    @field_validator("model", mode="before")
    @classmethod
    def _model_kind(cls, value: Any) -> Any:
        if isinstance(value, str | dict | ModelArchitecture):
            return value
        raise PydanticCustomError(
            "model_kind",
            "expected a registry name (`llama-3.1-8b`, see `infragen models`), a path to a Hugging Face "
            "config.json, or an architecture mapping; found {kind} {value}",
            {"kind": type(value).__name__, "value": shown(value)},
        )

    @field_validator("precision", mode="before")
    @classmethod
    def _precision_list(cls, value: Any) -> Any:
        value = _as_list(value)
        if isinstance(value, list):
            return [v.lower() if isinstance(v, str) else v for v in value]
        return value

    @field_validator("regions", mode="before")
    @classmethod
    def _regions_list(cls, value: Any) -> Any:
        return _as_list(value)

    @field_validator("precision")
    @classmethod
    def _precision_nonempty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("list at least one precision")
        return list(dict.fromkeys(value))

    @field_validator("weights")
    @classmethod
    def _weights_form(cls, value: str | None) -> str | None:
        if value is not None and not WEIGHTS_RE.fullmatch(value):
            raise PydanticCustomError(
                "weights_form",
                "{value} is not a Hugging Face repo id (`org/name`, or `org/name/file.gguf` for GGUF), "
                "a ModelScope repo (`modelscope://org/name`[`/file.gguf`]) nor an s3:// or oss:// URI with a "
                "concrete bucket and prefix (letters, digits, '.', '_', '-'; no wildcards, no '..', no leading '-')",
                {"value": shown(value)},
            )
        return value

    @field_validator("hf_endpoint")
    @classmethod
    def _endpoint_form(cls, value: str | None) -> str | None:
        if value is not None and not _ENDPOINT_RE.fullmatch(value):
            raise PydanticCustomError(
                "endpoint_form", "{value} is not an http(s) base URL such as https://hf-mirror.example/",
                {"value": shown(value)})
        return value

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadSpec:
        gguf = [p for p in self.precision if p in GGUF_PRECISIONS]
        if self.engine == "vllm" and gguf:
            raise conflict(
                "precision",
                f"{gguf[0]!r} is a GGUF quant type, which infragen serves with llama.cpp only, but engine is vllm; "
                "use bf16/fp16/fp8/int8/int4-awq/int4-gptq with vllm, or set engine: llama.cpp (or auto)",
            )
        if self.engine == "llama.cpp":
            bad = [p for p in self.precision if p not in LLAMA_CPP_PRECISIONS]
            if bad:
                raise conflict(
                    "precision",
                    f"llama.cpp cannot load {bad[0]!r} weights (engine is llama.cpp); it takes GGUF files: "
                    + ", ".join(sorted(LLAMA_CPP_PRECISIONS))
                    + "; pick one of those or set engine: vllm (or auto)",
                )
        if self.kv_cache_dtype == "fp8" and self.engine == "llama.cpp":
            raise conflict(
                "kv_cache_dtype",
                "fp8 is a vLLM option, but engine is llama.cpp, which keeps its KV cache in f16; "
                "use kv_cache_dtype: auto or engine: vllm",
            )
        if self.engine == "auto" and self.kv_cache_dtype == "fp8" and all(p in GGUF_PRECISIONS for p in self.precision):
            raise conflict(
                "kv_cache_dtype",
                "fp8 is a vLLM option, but every listed precision is a GGUF type, which only llama.cpp serves; "
                "use kv_cache_dtype: auto or add a vLLM precision",
            )
        if self.spot.on_demand_base_replicas is not None and self.pricing != "spot":
            raise conflict("spot", "spot.on_demand_base_replicas applies to spot plans only, but pricing is "
                           "on-demand; set pricing: spot or remove spot")
        fams = set(self.instance_families.allow) & set(self.instance_families.deny)
        if fams:
            raise conflict("instance_families", f"{sorted(fams)} both allowed and denied")
        if self.weights is None and all(p in PREQUANTIZED_PRECISIONS for p in self.precision):
            raise conflict(
                "weights",
                f"precision {', '.join(self.precision)} needs a pre-quantized checkpoint, but weights is not set "
                "(the registry's reference repo holds bf16 weights); give weights: org/name-AWQ (or the GGUF file), "
                "or allow bf16/fp16/fp8",
            )
        if self.weights is not None:
            gguf_file = self.weights.endswith(".gguf")
            if gguf_file and not any(p in GGUF_PRECISIONS for p in self.precision):
                raise conflict("weights", f"{self.weights!r} is a GGUF file but no GGUF precision is listed")
            if not gguf_file and all(p in GGUF_PRECISIONS for p in self.precision):
                raise conflict(
                    "weights", f"precision {', '.join(self.precision)} is GGUF, so weights must name a .gguf file"
                )
        if self.engine == "llama.cpp" and not (self.weights or "").endswith(".gguf"):
            # llama-server loads one GGUF file; a safetensors repo (or none) cannot start it.
            raise conflict(
                "weights",
                "engine is llama.cpp, which loads a GGUF file, but weights "
                + (f"{self.weights!r} is not one" if self.weights else "is not set")
                + "; give weights: org/repo/file.gguf (a Hugging Face GGUF file) or an s3:// / oss:// URI "
                "ending in .gguf, or set engine: vllm (or auto)",
            )
        return self

    def check_model(self, model: ModelArchitecture, *, path: Path | str) -> None:
        """Contradictions between this spec and the resolved model (InputError naming file and field)."""
        ctx = self.traffic.max_context_tokens
        limit = model.max_position_embeddings
        name = model.id if model.id != "custom" else (model.display_name or "the model")
        if ctx is not None and ctx > limit:
            raise InputError(
                f"{path}: traffic.max_context_tokens: {ctx} exceeds {name}'s context of {limit} tokens; "
                f"lower it to at most {limit} or pick a model with a longer context"
            )
        if self.weights is None and not (model.hf_repo and HF_REPO_RE.fullmatch(model.hf_repo)):
            raise InputError(
                f"{path}: weights: {name} names no Hugging Face repo to download (no registry entry, or no "
                "`_name_or_path: org/name` in its config.json); set `weights:` to org/name or an s3:// / oss:// URI"
            )
        need = self.traffic.prompt_tokens + self.traffic.output_tokens
        if ctx is None and need > limit:
            raise InputError(
                f"{path}: traffic: prompt_tokens + output_tokens ({need}) exceed {name}'s context of {limit} tokens"
            )

    # Derived views (no data lookups)
    def engines(self) -> tuple[Engine, ...]:
        """Engines the search may use."""
        if self.engine == "auto":
            return ("vllm", "llama.cpp")
        return (self.engine,)

    def clouds(self) -> tuple[Cloud, ...]:
        """Clouds the search may use."""
        if self.cloud == "any":
            return ("aws", "alicloud")
        return (self.cloud,)

    def resolved_name(self, path: Path | None) -> str:
        """Name for resources: the `name` field, else the workload file's stem."""
        if self.name:
            return self.name
        stem = path.stem if path is not None else "workload"
        if not _NAME_RE.fullmatch(stem):
            raise InputError(f"{path}: name: the file name {shown(stem)} is not a valid workload name (letters, "
                             "digits, '.', '_' and '-', starting with a letter or digit, at most 63); set `name:`")
        return stem


def load_spec(path: Path | str) -> WorkloadSpec:
    """Read and validate a workload file; every failure is an InputError naming the file and field."""
    from infragen.validation import load_yaml_file, validate_file_data

    path = Path(path)
    data = load_yaml_file(path, what="workload file")
    return validate_file_data(path, data, WorkloadSpec, what="workload")


def workload_json_schema() -> dict[str, Any]:
    """JSON Schema of workload.yaml, for editors (`# yaml-language-server: $schema=...`)."""
    from infragen.fielddocs import document

    schema = document(WorkloadSpec).model_json_schema()
    # These lists also accept a single value (see _as_list); say so, or editors flag `precision: int4-awq`.
    singles = [
        schema["properties"]["precision"],
        schema["properties"]["regions"],
        *schema["$defs"]["FamilyFilter"]["properties"].values(),
    ]
    for prop in singles:
        items = prop.pop("items")
        del prop["type"]
        prop["anyOf"] = [items, {"type": "array", "items": items}]
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "infragen workload"
    return schema
