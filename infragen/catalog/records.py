"""Typed records of the hardware and price catalogs (what one row of the data files means).

Facts only, each with its source; the loader checks them, the sizing engine reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

CpuArch = Literal["x86_64", "arm64"]


class _Record(BaseModel):
    # a figure of inf or NaN is no figure (a hardware file's inline record reaches here too)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Accelerator(_Record):
    """One GPU model. Throughputs are dense tensor-core peaks; None = no sourced figure (never guessed)."""

    id: str
    """Canonical id (`h100-sxm-80gb`)."""
    display_name: str
    """Vendor name (`NVIDIA H100 SXM5 80GB`)."""
    vendor: str
    """nvidia, amd..."""
    architecture: str
    """Turing, Volta, Ampere, Ada, Hopper, Blackwell."""
    memory_gib: float = Field(gt=0)
    """Vendor-labelled memory (vendors print GB), GiB as the driver reports it."""
    memory_bandwidth_gb_per_s: float | None = Field(default=None, gt=0)
    """Peak DRAM/HBM bandwidth, GB/s."""
    fp16_tflops: float | None = Field(default=None, gt=0)
    """Dense FP16 tensor TFLOPS."""
    bf16_tflops: float | None = Field(default=None, gt=0)
    """Dense BF16 tensor TFLOPS (None on GPUs without BF16, e.g. T4, V100)."""
    fp8_tflops: float | None = Field(default=None, gt=0)
    """Dense FP8 tensor TFLOPS (None = no FP8 tensor cores)."""
    int8_tops: float | None = Field(default=None, gt=0)
    """Dense INT8 tensor TOPS."""
    interconnect: Literal["nvlink", "pcie"]
    """GPU-to-GPU link inside a node."""
    nvlink_generation: int | None = None
    """NVLink generation (None on PCIe parts)."""
    interconnect_gb_per_s: float | None = Field(default=None, gt=0)
    """Per-GPU bidirectional GPU-to-GPU bandwidth, GB/s (NVLink total, or the PCIe slot's)."""
    tdp_w: float | None = Field(default=None, gt=0)
    """Board power, W."""
    source: str
    """Where these figures were read."""
    confidence: Literal["high", "medium", "low"] = "high"
    """high = vendor figure; medium = cloud doc or conflicting transcriptions; low = unofficial."""
    notes: str = ""
    """Conflicts and caveats."""
    aliases: list[str] = Field(default_factory=list)
    """Other names that resolve to this id (`H100`, `A100-80GB`); matched case-insensitively."""
    memory_type: str | None = None
    """HBM3, GDDR6... (None = not sourced)."""
    full_power_tdp_w: float | None = Field(default=None, gt=0)
    """Board power of the same die's full-power part when this one is a lower-power card with the same datasheet
    peaks (A100 PCIe 300 W vs SXM4 400 W); sustained tensor throughput scales by tdp_w / this. None = full power."""
    driver_memory_mib: float | None = Field(default=None, gt=0)
    """Total memory the driver reports (nvidia-smi, cudaMemGetInfo), MiB; None = not sourced (label used)."""
    driver_memory_source: str | None = None
    """Where driver_memory_mib was read."""
    compute_capability: str | None = Field(default=None, pattern=r"^(\d+\.\d+|gfx[0-9a-f]+)$")
    """CUDA compute capability (`8.9`), or the AMD LLVM target (`gfx942`); None = not sourced. Decides which
    engine wheels and quantization kernels run on the GPU (compat.yaml), never the architecture name."""
    compute_capability_source: str | None = None
    """Where compute_capability was read."""

    @model_validator(mode="after")
    def _power_cap_needs_a_lower_tdp(self) -> Accelerator:
        if self.full_power_tdp_w is not None and (self.tdp_w is None or self.tdp_w > self.full_power_tdp_w):
            raise ValueError(f"{self.id}: full_power_tdp_w needs tdp_w at or below it (got tdp_w {self.tdp_w})")
        return self

    @property
    def compute_power_scale(self) -> float:
        """Share of the datasheet tensor peak a power-capped card sustains (1.0 unless full_power_tdp_w is set)."""
        if self.full_power_tdp_w is None or self.tdp_w is None:
            return 1.0
        return min(1.0, self.tdp_w / self.full_power_tdp_w)

    @property
    def usable_memory_gib(self) -> float:
        """Memory vLLM's profiler sees: the driver's total where sourced, else the vendor label."""
        if self.driver_memory_mib is not None:
            return self.driver_memory_mib / 1024
        return self.memory_gib


class CpuModel(_Record):
    """One server CPU (per socket figures, as the instance sees them)."""

    id: str
    """Canonical id (`xeon-8488c`)."""
    display_name: str
    """Vendor name."""
    vendor: str
    """intel, amd, aws, alibaba."""
    arch: CpuArch
    """Instruction set."""
    microarchitecture: str
    """Sapphire Rapids, Genoa, Neoverse V2..."""
    simd: list[str] = Field(default_factory=list)
    """SIMD/matrix features with a source: avx2, avx512, avx512_bf16, amx, neon, sve, sve2."""
    fp32_flops_per_cycle_per_core: float | None = Field(default=None, gt=0)
    """Peak FP32 FLOPs per cycle per core with the widest SIMD unit (FMA counted as 2)."""
    sustained_clock_ghz: float | None = Field(default=None, gt=0)
    """All-core sustained clock, GHz."""
    memory_channels: int | None = Field(default=None, gt=0)
    """DDR channels per socket."""
    memory_bandwidth_gb_per_s: float | None = Field(default=None, gt=0)
    """Peak DRAM bandwidth per socket, GB/s."""
    source: str
    """Where these figures were read."""
    cores_per_socket: int | None = Field(default=None, gt=0)
    """Physical cores of the full part, per socket (None = not sourced; an instance may expose fewer)."""
    threads_per_core: int | None = Field(default=None, gt=0)
    """Hardware threads per core (2 with SMT/Hyper-Threading, 1 on Graviton/Yitian); None = not sourced."""
    memory_type: str | None = None
    """DDR5-4800, DDR5-5600... (None = not sourced)."""
    confidence: Literal["high", "medium", "low"] = "high"
    """high = vendor/cloud page states it; medium = secondary source; low = unofficial."""
    notes: str = ""
    """Caveats: what is absent and why."""
    amx_bf16_flops_per_cycle_per_core: float | None = Field(default=None, gt=0)
    """Peak BF16 matrix FLOPs per cycle per core on a matrix unit (Intel AMX TMUL); None = no such unit or
    not sourced. Separate from `fp32_flops_per_cycle_per_core`, which is the SIMD (vector) peak."""
    amx_int8_ops_per_cycle_per_core: float | None = Field(default=None, gt=0)
    """Peak INT8 matrix operations per cycle per core on a matrix unit (Intel AMX TMUL); None = not sourced."""


class RegionPrice(_Record):
    """Hourly price of one instance type in one region."""

    region: str
    """Region id."""
    on_demand_usd_per_hour: float | None = Field(default=None, gt=0)
    """On-demand / pay-as-you-go price, USD per hour (converted from CNY for Alibaba)."""
    on_demand_cny_per_hour: float | None = Field(default=None, gt=0)
    """Alibaba pay-as-you-go price as listed, CNY per hour."""
    spot_usd_per_hour: float | None = Field(default=None, gt=0)
    """Spot price, USD per hour (indicative; None = not known)."""
    source: str
    """Where the price was read, with its date."""
    as_of: str
    """Date of the price (YYYY-MM-DD)."""
    spot_source: str | None = None
    """Where the spot price was read, when it differs from `source` (None = no spot price or same source)."""
    zones: list[str] = Field(default_factory=list)
    """Availability zones the source lists this type in (AWS zone ids such as `use1-az4`); empty = not stated."""


class PriceBook(Protocol):
    """Prices kept compact until asked (compact.PriceLines): the packaged catalog's thousands of region rows are
    neither parsed nor validated when it loads, only the regions a plan or command asks about."""

    def regions_of(self, cloud: str, instance_type: str) -> list[str]:
        """The regions pricing this type, in the order of its prices."""
        ...

    def price(self, cloud: str, instance_type: str, region: str) -> RegionPrice | None:
        """This type's price in `region` (reads that region's row only)."""
        ...

    def prices_of(self, cloud: str, instance_type: str) -> list[RegionPrice]:
        """Every price of this type, in order."""
        ...


class InstanceType(_Record):
    """One instance type of one cloud."""

    id: str
    """Instance type as the cloud API names it (`p5.48xlarge`, `ecs.gn7i-c8g1.2xlarge`)."""
    cloud: Literal["aws", "alicloud"]
    """Cloud."""
    family: str
    """Family (`p5`, `gn7i`)."""
    gpu: str | None = None
    """Accelerator id, None for CPU-only types."""
    gpu_count: int = Field(default=0, ge=0)
    """Accelerators per instance."""
    gpu_memory_gib: float | None = Field(default=None, gt=0)
    """Memory of one GPU as this cloud exposes it, GiB (AWS API MiB / 1024)."""
    vcpus: int | None = Field(default=None, gt=0)
    """vCPUs (None = no sourced spec)."""
    memory_gib: float | None = Field(default=None, gt=0)
    """System RAM, GiB."""
    cpu: str | None = None
    """CPU model id (CpuModel), None when not sourced."""
    cpu_arch: CpuArch = "x86_64"
    """CPU architecture."""
    local_nvme_count: int = Field(default=0, ge=0)
    """Instance-store NVMe disks."""
    local_nvme_gib: float = Field(default=0, ge=0)
    """Total instance-store NVMe, GiB."""
    network_gbps: float | None = Field(default=None, gt=0)
    """Baseline network bandwidth, Gbit/s."""
    rdma: Literal["none", "efa", "erdma"] = "none"
    """RDMA fabric this type supports."""
    efa_interfaces: int = Field(default=0, ge=0)
    """Maximum EFA interfaces (AWS), one per network card on multi-card types."""
    network_cards: int = Field(default=1, ge=1)
    """Network cards (AWS; EFA interfaces are laid out one per card)."""
    prices: list[RegionPrice] = Field(default_factory=list)
    """Prices by region (empty = no sourced price: the planner cannot pick it)."""
    source: str
    """Where the specs were read."""
    notes: str = ""
    """Caveats."""
    physical_cores: int | None = Field(default=None, gt=0)
    """Physical CPU cores the instance exposes (AWS DefaultCores); None = not sourced."""
    threads_per_core: int | None = Field(default=None, gt=0)
    """vCPUs per physical core (AWS DefaultThreadsPerCore); None = not sourced."""
    cpu_sockets: int | None = Field(default=None, gt=0)
    """CPU sockets behind this instance (None = not sourced; most virtual sizes are a slice of one)."""
    cpu_sustained_clock_ghz: float | None = Field(default=None, gt=0)
    """All-core sustained clock the cloud states for this type, GHz."""
    network_burst_gbps: float | None = Field(default=None, gt=0)
    """Burst ("up to") network bandwidth, Gbit/s (None = not sourced or same as baseline)."""
    gpu_memory_source: str | None = None
    """How `gpu_memory_gib` was obtained (AWS API MiB/1024, or the cloud doc's GB label)."""

    _book: PriceBook | None = PrivateAttr(default=None)
    """Where `prices` is still to be read from (the packaged catalog's price lines, compact.py); None once read or
    when the record was given its prices."""

    @classmethod
    def with_price_book(cls, record: dict[str, Any], book: PriceBook) -> InstanceType:
        """A record whose prices stay in `book` until asked: `price_in` reads one region, `prices` every one."""
        inst = cls.model_validate(record)
        del inst.__dict__["prices"]  # found again by __getattr__, which reads it from the book
        inst._book = book
        return inst

    def __getattr__(self, name: str) -> Any:
        # Reached only for attributes not in __dict__: `prices` of a record whose prices are still in its book.
        book = self._unread_book() if name == "prices" else None
        if book is None:
            return super().__getattr__(name)
        prices = book.prices_of(self.cloud, self.id)
        self.__dict__["prices"] = prices
        self.__pydantic_private__["_book"] = None  # type: ignore[index]
        return prices

    def with_prices(self, prices: Mapping[str, RegionPrice]) -> InstanceType:
        """This type with `prices` (by region: the user's) replacing or adding those regions' prices, the others
        kept, in the order [kept..., given...]; a record still reading from a price book keeps reading from it."""
        book = self._unread_book()
        if book is None:
            return self.model_copy(update={"prices": [*(p for p in self.prices if p.region not in prices),
                                                      *prices.values()]})
        copied = super().__copy__()  # the fields without reading the book (this class's __copy__ would)
        copied.__pydantic_private__["_book"] = _Overlaid(book, self.cloud, self.id, dict(prices))  # type: ignore[index]
        return copied

    def _unread_book(self) -> PriceBook | None:
        """The book `prices` is still to be read from, or None (prices in the record)."""
        private = self.__pydantic_private__
        return None if private is None or "prices" in self.__dict__ else private.get("_book")

    def _read(self) -> None:
        """Read the book's prices into the record before anything pydantic does with its fields."""
        if self._unread_book() is not None:
            self.__getattr__("prices")

    @property
    def priced_regions(self) -> list[str]:
        """Regions with at least one price."""
        book = self._unread_book()
        if book is not None:
            return book.regions_of(self.cloud, self.id)
        return [p.region for p in self.prices]

    def price_in(self, region: str) -> RegionPrice | None:
        """This type's price in `region` (None = not priced there); reads only that region from a price book."""
        book = self._unread_book()
        if book is not None:
            return book.price(self.cloud, self.id, region)
        for price in self.prices:
            if price.region == region:
                return price
        return None

    # pydantic reads fields from __dict__: a record still holding its book reads its prices first.
    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        self._read()
        return super().model_dump(**kwargs)

    def model_dump_json(self, **kwargs: Any) -> str:
        self._read()
        return super().model_dump_json(**kwargs)

    def __eq__(self, other: object) -> bool:
        self._read()
        if isinstance(other, InstanceType):
            other._read()
        return super().__eq__(other)

    def __copy__(self) -> InstanceType:
        self._read()
        return super().__copy__()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> InstanceType:
        self._read()
        return super().__deepcopy__(memo)

    def __getstate__(self) -> dict[Any, Any]:
        self._read()
        return super().__getstate__()

    def __iter__(self) -> Any:
        self._read()
        return super().__iter__()

    def __repr_args__(self) -> Any:
        self._read()
        return super().__repr_args__()


class _Overlaid:
    """A price book with one type's prices in some regions replaced or added (InstanceType.with_prices)."""

    def __init__(self, book: PriceBook, cloud: str, instance_type: str, prices: dict[str, RegionPrice]) -> None:
        self._book, self._key, self._prices = book, (cloud, instance_type), prices

    def regions_of(self, cloud: str, instance_type: str) -> list[str]:
        regions = self._book.regions_of(cloud, instance_type)
        if (cloud, instance_type) != self._key:
            return regions
        return [*(r for r in regions if r not in self._prices), *self._prices]

    def price(self, cloud: str, instance_type: str, region: str) -> RegionPrice | None:
        if (cloud, instance_type) == self._key and region in self._prices:
            return self._prices[region]
        return self._book.price(cloud, instance_type, region)

    def prices_of(self, cloud: str, instance_type: str) -> list[RegionPrice]:
        prices = self._book.prices_of(cloud, instance_type)
        if (cloud, instance_type) != self._key:
            return prices
        return [*(p for p in prices if p.region not in self._prices), *self._prices.values()]
