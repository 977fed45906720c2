"""Spot with a floor: how many replicas stay on on-demand capacity, which same-GPU types may fill the spot part,
and the expected monthly cost of the mix.

Pure arithmetic on a sizing, the workload's traffic and the catalog. The search prices every spot candidate with
its floor (`base_nodes`), so the cheapest plan is the cheapest mix, not the cheapest all-spot fleet.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from infragen.catalog import Catalog
from infragen.plan import SpotPlan
from infragen.sizing import daily
from infragen.spec import WorkloadSpec
from infragen.units import HOURS_PER_MONTH

if TYPE_CHECKING:  # search imports this module
    from infragen.sizing.search import Candidate, Sizing

#: Same-GPU instance types offered to the spot pools besides the planned one, at most (more pools, fewer
#: simultaneous interruptions; a policy figure, not a measured one).
MAX_ALTERNATIVES = 5
RISK = ("a spot node can be reclaimed at two minutes' notice (EC2 user guide, 'Spot Instance interruption "
        "notices'); its in-flight requests fail, new ones go to the other replicas while a replacement boots (the "
        "plan's boot time), and only the on-demand base is sure to be there meanwhile; when no spot pool has "
        "capacity, only the base serves")
NO_BAND = ("no interruption-frequency band: AWS publishes it only on the live Spot Instance Advisor page, and the "
           "catalog holds no dated copy of it")


def _median_load(spec: WorkloadSpec) -> tuple[float | None, str]:
    """The median load in the peak's unit and where it comes from (None: not known)."""
    t = spec.traffic
    peak = t.peak_requests_per_s if t.peak_requests_per_s is not None else float(t.concurrent_users or 0)
    if t.hourly_profile is not None:
        import statistics  # daily profiles only: a plan without one does not import it

        return statistics.median(t.hourly_profile) * peak, "the median hour of traffic.hourly_profile"
    if t.average_requests_per_s is not None:
        return t.average_requests_per_s, "traffic.average_requests_per_s (no hourly profile: the average stands in)"
    return None, "min_replicas (no hourly profile or average, so the median load is not known)"


def base_replicas(spec: WorkloadSpec, s: Sizing) -> tuple[int, str]:
    """(replicas kept on demand, where the figure comes from) for a spot plan of this sizing; (0, '') otherwise."""
    if spec.pricing != "spot":
        return 0, ""
    if spec.spot.on_demand_base_replicas is not None:
        return min(spec.spot.on_demand_base_replicas, s.replicas), "spot.on_demand_base_replicas"
    load, basis = _median_load(spec)
    if load is None or s.estimate is None:
        return min(spec.min_replicas, s.replicas), basis
    shape = daily.shape_for(spec.traffic, capacity_requests_per_s=s.estimate.requests_per_s, batch=s.batch,
                            min_replicas=spec.min_replicas, nodes_per_replica=s.layout.nodes_per_replica,
                            replicas_per_node=s.layout.replicas_per_node)
    return min(shape.replicas_for(load), s.replicas), basis


def base_nodes(spec: WorkloadSpec, s: Sizing, nodes: int) -> int:
    """Nodes on demand: whole replicas (a multi-node replica is all on demand or all spot); packed nodes round up."""
    base, _ = base_replicas(spec, s)
    return min(nodes, math.ceil(base * s.layout.nodes_per_replica / s.layout.replicas_per_node))


def select_spot(spec: WorkloadSpec, chosen: Candidate, catalog: Catalog) -> SpotPlan | None:
    """The on-demand floor of a spot plan and its expected cost; None unless pricing is spot."""
    if spec.pricing != "spot":
        return None
    s = chosen.sizing
    base, basis = base_replicas(spec, s)
    held = base_nodes(spec, s, chosen.nodes)
    od, sp = chosen.on_demand_usd_per_hour, chosen.spot_usd_per_hour
    expected = None if sp is None or (od is None and held) else (
        (held * (od or 0.0) + (chosen.nodes - held) * sp) / chosen.nodes * HOURS_PER_MONTH)
    return SpotPlan(
        on_demand_base_replicas=base, on_demand_base_nodes=held, spot_nodes=chosen.nodes - held,
        base_basis=basis,
        alternative_instance_types=_alternatives(chosen, catalog) if s.layout.nodes_per_replica == 1 else [],
        usd_per_month_expected=None if expected is None else round(expected, 2),
        interruption_band=None, interruption_note=NO_BAND, risk=RISK)


def _alternatives(chosen: Candidate, catalog: Catalog) -> list[str]:
    """Other types with the same GPUs (model and count), CPU architecture and local NVMe layout, at least the
    vCPUs, RAM and NVMe space, and a spot price in the region: one launch template and user-data serve them all."""
    inst = chosen.sizing.instance
    if inst.gpu is None:
        return []
    out = []
    for other in catalog.instances_for(chosen.cloud):
        price = other.price_in(chosen.region)
        if (other.id == inst.id or other.gpu != inst.gpu or other.gpu_count != inst.gpu_count
                or other.cpu_arch != inst.cpu_arch or price is None or price.spot_usd_per_hour is None
                or other.local_nvme_count != inst.local_nvme_count or other.local_nvme_gib < inst.local_nvme_gib
                or (other.vcpus or 0) < (inst.vcpus or 0) or (other.memory_gib or 0) < (inst.memory_gib or 0)):
            continue
        out.append((price.spot_usd_per_hour, other.id))
    return [name for _, name in sorted(out)[:MAX_ALTERNATIVES]]
