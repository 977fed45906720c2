"""The whole bill: instances plus load balancer, NAT gateway and model downloads, block storage, cross-zone traffic
and egress, each line priced from a cited row of services.yaml; and what a million tokens cost.

Pure arithmetic on the finished plan and the workload's traffic; a price services.yaml lacks leaves its line
unpriced (listed, never $0).
"""

from __future__ import annotations

from collections.abc import Callable

from infragen.catalog.services import ServicePrice, ServicePrices
from infragen.plan import BillLine, BillPlan, Plan
from infragen.spec import TrafficSpec
from infragen.units import GIB, HOURS_PER_MONTH

#: Bytes a streamed response sends per output token (one SSE `data:` JSON chunk per token; the network sizing's
#: figure, a policy estimate) and a request per prompt token (about 4 characters of JSON text per token).
STREAMED_BYTES_PER_OUTPUT_TOKEN = 64
REQUEST_BYTES_PER_PROMPT_TOKEN = 32
#: Both stacks spread nodes over (at most) two zones behind one NAT gateway in the first (provision/aws/layout.py
#: AZ_COUNT, provision/alicloud/layout.py; a test keeps them equal), so half the nodes' downloads cross a zone.
NODE_ZONES = 2
#: gp3 includes 3,000 IOPS and 125 MB/s; only what is provisioned above them is billed (EBS pricing).
GP3_FREE_IOPS = 3000
GP3_FREE_MB_PER_S = 125
SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600
DAYS_PER_MONTH = HOURS_PER_MONTH / 24

METHOD = (
    "730-hour month; requests/s = the peak (closed loop: output tokens/s / output tokens), each request opening "
    "one connection (no keep-alive: the upper bound); request bytes = 32 x prompt tokens, response bytes = "
    "traffic.response_bytes or 64 x output tokens; model downloads: one per node launch (the peak fleet once, the "
    "profile's daily scale-ups every day) through the NAT gateway (s3:// on AWS: the free gateway endpoint); "
    "egress at the first 10 TB/month tier (an upper "
    "bound above it); package installs and logs are not counted"
)


def select_bill(plan: Plan, traffic: TrafficSpec, prices: ServicePrices) -> BillPlan:
    """Every line of the monthly bill at the peak (and at the daily profile when the plan has one)."""
    d, sc = plan.deployment, plan.scaling
    cloud, region = d.cloud, d.region

    def price(item: str) -> ServicePrice | None:
        return prices.price(cloud, region, item)

    rps = traffic.peak_requests_per_s or plan.estimate.output_tokens_per_s / traffic.output_tokens
    request_bytes = REQUEST_BYTES_PER_PROMPT_TOKEN * traffic.prompt_tokens
    response_bytes = traffic.response_bytes or STREAMED_BYTES_PER_OUTPUT_TOKEN * traffic.output_tokens
    fractions = (sc.hourly_profile or [sc.average_load_fraction]) if sc else None
    average = sc.average_load_fraction if sc else None
    lines = [
        _instances(plan),
        _load_balancer(plan, prices, price, rps, request_bytes + response_bytes, fractions),
        _nat(price, sc is not None),
        *_downloads(plan, price),
        _storage(plan, price),
        _egress(price, rps, response_bytes, average),
    ]
    # Without the instances' price the bill has no meaningful total (the rest is a few percent of it).
    priced = lines[0].usd_per_month_at_peak is not None
    peak = sum(x.usd_per_month_at_peak or 0.0 for x in lines) if priced else None
    profile = None if sc is None or not priced else sum(x.usd_per_month_at_profile or 0.0 for x in lines)
    out_tokens = rps * traffic.output_tokens * SECONDS_PER_MONTH
    all_tokens = rps * (traffic.prompt_tokens + traffic.output_tokens) * SECONDS_PER_MONTH

    def per_million(usd: float | None, tokens: float) -> float | None:
        return None if usd is None or tokens <= 0 else round(usd / tokens * 1e6, 4)

    return BillPlan(
        lines=lines, usd_per_month_at_peak=_r(peak), usd_per_month_at_profile=_r(profile),
        unpriced=[x.item for x in lines if x.unpriced], request_bytes=request_bytes, response_bytes=response_bytes,
        usd_per_million_output_tokens_at_peak=per_million(peak, out_tokens),
        usd_per_million_tokens_at_peak=per_million(peak, all_tokens),
        usd_per_million_output_tokens_at_average=None if average is None else per_million(profile,
                                                                                         out_tokens * average),
        usd_per_million_tokens_at_average=None if average is None else per_million(profile, all_tokens * average),
        method=METHOD)


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def _line(item: str, peak: float | None, profile: float | None, quantity: str, sources: list[ServicePrice | None],
          *, profiled: bool, missing: str = "") -> BillLine:
    cited = [p.cite() for p in sources if p is not None]
    unpriced = missing or ("" if all(p is not None for p in sources) else "no price in services.yaml for "
                           "this cloud and region")
    return BillLine(item=item, usd_per_month_at_peak=_r(peak),  # type: ignore[arg-type]
                    usd_per_month_at_profile=_r(profile) if profiled else None, quantity=quantity,
                    price_source="; ".join(cited) or "none", unpriced=unpriced)


def _instances(plan: Plan) -> BillLine:
    d, c, sc, sp = plan.deployment, plan.cost, plan.scaling, plan.spot
    known = bool(c.usd_per_hour)
    # A spot plan's cost already bills its on-demand base on demand (sizing/spot.py); say how many nodes.
    at = (f"with {sp.on_demand_base_nodes} on demand and {sp.spot_nodes} on spot" if sp and sp.on_demand_base_nodes
          else f"at {d.pricing}")
    return BillLine(item="instances", usd_per_month_at_peak=c.usd_per_month if known else None,
                    usd_per_month_at_profile=sc.usd_per_month_at_profile if sc else None,
                    quantity=f"{d.nodes} x {d.instance_type} x 730 h {at}"
                    + (f"; {sc.average_replicas:g} replicas on average over the day" if sc else ""),
                    price_source=c.price_source, unpriced="" if known else "no instance price")


def _load_balancer(plan: Plan, prices: ServicePrices, price: Callable[[str], ServicePrice | None], rps: float,
                   bytes_per_request: int, fractions: list[float] | None) -> BillLine:
    kind = plan.network.load_balancer
    hour, lcu = price(f"{kind}-hour"), price(f"{kind}-lcu-hour")
    unit = prices.capacity_unit(plan.deployment.cloud, kind)
    in_flight_s = plan.estimate.e2e_ms / 1000

    def lcus(load: float) -> float:
        if unit is None:
            return 0.0
        return max(load / unit.new_connections_per_s, load * in_flight_s / unit.active_connections,
                   load * bytes_per_request * 3600 / 1e9 / unit.gb_per_hour)

    def monthly(units: float) -> float | None:
        if hour is None or lcu is None:  # a half-priced balancer would read as a real, too low figure
            return None
        return (hour.usd + lcu.usd * units) * HOURS_PER_MONTH

    peak_units = lcus(rps)
    profile_units = None if fractions is None else sum(lcus(rps * f) for f in fractions) / len(fractions)
    return _line("load-balancer", monthly(peak_units), None if profile_units is None else monthly(profile_units),
                 f"1 {kind.upper()} x 730 h + {peak_units:.2f} capacity units/h at the peak "
                 f"({rps:g} new connections/s, {rps * in_flight_s:.0f} in flight, "
                 f"{rps * bytes_per_request * 3600 / 1e9:.2f} GB/h)",
                 [hour, lcu] + ([] if unit else [None]), profiled=fractions is not None)


def _nat(price: Callable[[str], ServicePrice | None], profiled: bool) -> BillLine:
    hour = price("nat-hour")
    usd = None if hour is None else hour.usd * HOURS_PER_MONTH
    return _line("nat-gateway", usd, usd, "1 NAT gateway x 730 h", [hour], profiled=profiled)


def _launches(plan: Plan) -> tuple[int, float | None]:
    """Node launches per month: the peak fleet once; with a profile, every day's scale-ups too."""
    d, sc = plan.deployment, plan.scaling
    if sc is None or sc.replicas_by_hour is None:
        return d.nodes, (None if sc is None else float(d.nodes))

    def nodes(r: int) -> int:
        return -(-r * d.nodes_per_replica // d.replicas_per_node)

    by_hour = [nodes(r) for r in sc.replicas_by_hour]
    daily = sum(max(0, by_hour[h] - by_hour[h - 1]) for h in range(24))
    return d.nodes, min(by_hour) + daily * DAYS_PER_MONTH


def _downloads(plan: Plan, price: Callable[[str], ServicePrice | None]) -> list[BillLine]:
    gb = plan.model.weights_gib * GIB / 1e9
    at_peak, at_profile = _launches(plan)
    profiled = plan.scaling is not None
    nat_gb, cross = price("nat-gb"), price("cross-zone-gb")
    # The AWS stack reaches S3 through a gateway endpoint (provision/aws/network.py), not the NAT gateway, and S3 is
    # regional: neither NAT processing nor a zone crossing is billed for a same-region bucket.
    gateway = price("s3-gateway-gb") if plan.model.weights_source == "s3" else None
    if gateway is not None:
        nat_gb = cross = gateway
    nat_usd = None if nat_gb is None else nat_gb.usd * gb
    # Nodes in the other AZ fetch through the NAT gateway in the first: both sides of the zone crossing are billed.
    share = (NODE_ZONES - 1) / NODE_ZONES
    cross_usd = None if cross is None else 2 * cross.usd * gb * share

    def times(usd: float | None, n: float | None) -> float | None:
        return None if usd is None or n is None else usd * n

    what = (f"{gb:.1f} GB of weights x {at_peak} node launch(es)"
            + (f" (with the profile {at_profile:.0f} a month)" if at_profile is not None else ""))
    if gateway is not None:
        path = (" through the S3 gateway endpoint (a bucket in the stack's region; another region's bucket goes "
                "through the NAT and is not priced here)")
        return [
            _line("model-download", times(nat_usd, at_peak), times(nat_usd, at_profile), what + path, [gateway],
                  profiled=profiled),
            _line("cross-zone", times(cross_usd, at_peak), times(cross_usd, at_profile),
                  "none: S3 is regional, so weights through the gateway endpoint cross no zone", [gateway],
                  profiled=profiled),
        ]
    return [
        _line("model-download", times(nat_usd, at_peak), times(nat_usd, at_profile), what + " through the NAT",
              [nat_gb], profiled=profiled),
        _line("cross-zone", times(cross_usd, at_peak), times(cross_usd, at_profile),
              what + f", {share:.0%} of them from the other zone; client traffic: none (ALB cross-zone is not "
              "billed, NLB cross-zone is off, a multi-node replica shares one placement group)",
              [cross], profiled=profiled),
    ]


def _storage(plan: Plan, price: Callable[[str], ServicePrice | None]) -> BillLine:
    s, d, sc = plan.storage, plan.deployment, plan.scaling
    gb, iops, mbps = price("volume-gb-month"), price("volume-iops-month"), price("volume-mb-per-s-month")
    data_gib = s.volume_gib if s.kind == "volume" else 0
    extra_iops = max(0, (s.volume_iops or 0) - GP3_FREE_IOPS) if s.kind == "volume" else 0
    extra_mbps = max(0, (s.volume_throughput_mb_per_s or 0) - GP3_FREE_MB_PER_S) if s.kind == "volume" else 0
    gp3 = s.kind != "volume" or s.volume_type == "gp3"
    per_node = None
    if gb is not None and gp3 and (not extra_iops or iops) and (not extra_mbps or mbps):
        per_node = ((s.root_volume_gib + data_gib) * gb.usd + extra_iops * (iops.usd if iops else 0.0)
                    + extra_mbps * (mbps.usd if mbps else 0.0))
    average_nodes = None if sc is None else sc.average_replicas * d.nodes_per_replica / d.replicas_per_node
    what = (f"{d.nodes} node(s) x ({s.root_volume_gib} GiB root"
            + (f" + {data_gib} GiB {s.volume_type}, {s.volume_iops} IOPS, {s.volume_throughput_mb_per_s} MB/s"
               if s.kind == "volume" else ", instance-store NVMe for the model") + ")")
    return _line("block-storage", None if per_node is None else per_node * d.nodes,
                 None if per_node is None or average_nodes is None else per_node * average_nodes, what,
                 [gb] + ([iops] if extra_iops else []) + ([mbps] if extra_mbps else []), profiled=sc is not None,
                 missing="" if gp3 else f"no price for {s.volume_type} volumes in services.yaml")


def _egress(price: Callable[[str], ServicePrice | None], rps: float, response_bytes: int,
            average: float | None) -> BillLine:
    out = price("egress-gb")
    gb = rps * response_bytes * SECONDS_PER_MONTH / 1e9
    usd = None if out is None else out.usd * gb
    return _line("egress", usd, None if usd is None or average is None else usd * average,
                 f"{gb:,.0f} GB of responses a month at the peak ({response_bytes:,} bytes each)", [out],
                 profiled=average is not None)
