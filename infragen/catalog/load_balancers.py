"""Load-balancer packing facts per cloud (data in load_balancers.yaml): how many engines one node may carry behind
the load balancer and how many targets one load balancer takes.

Reads data only; no cloud call. Used by sizing (layouts, the target-count warning) and by the provisioners.
"""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, ConfigDict, Field

from infragen.catalog.parsed import data_dir, load_yaml_text


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LoadBalancerFacts(_Frozen):
    """What one cloud's load balancer allows for packed engines."""

    max_engines_per_node: int | None = Field(default=None, ge=1)
    """Most engine ports of one node the load balancer can reach; None = no limit from the load balancer."""
    engines_per_node_source: str
    """Where the packing mechanism (or its limit) was read."""
    max_targets_per_load_balancer: int | None = Field(default=None, ge=1)
    """Registered targets (instance + port) one load balancer takes by default; None = not read."""
    targets_adjustable: bool
    """The targets quota can be raised on request."""
    targets_source: str
    """Where the targets quota was read (or why it is missing)."""


class LoadBalancerTable(_Frozen):
    schema_version: int
    as_of: str
    source: str
    clouds: dict[str, LoadBalancerFacts]


@cache
def load_load_balancers() -> LoadBalancerTable:
    """The packaged table (cached)."""
    text = (data_dir() / "load_balancers.yaml").read_text(encoding="utf-8")
    return LoadBalancerTable.model_validate(load_yaml_text(text))


def load_balancer_facts(cloud: str) -> LoadBalancerFacts:
    """The facts of `cloud` (every cloud in scope has a row; a missing one is a data error)."""
    table = load_load_balancers()
    if cloud not in table.clouds:
        from infragen.errors import DataError

        raise DataError(f"load_balancers.yaml has no row for cloud {cloud!r}")
    return table.clouds[cloud]
