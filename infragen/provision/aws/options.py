"""AWS-only stack settings (`infragen:*` config): a pinned machine image and a capacity reservation (id, zone,
Capacity Block).

Reads config only; never plans, never creates resources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi

from infragen.errors import InputError

_AMI = re.compile(r"^ami-[0-9a-f]{8,17}$")
_RESERVATION = re.compile(r"^cr-[0-9a-f]{8,17}$")
#: An availability zone id: region prefix, `-az`, number (`use1-az2`, `apne1-az4`; Local Zones add a suffix).
_ZONE_ID = re.compile(r"^[a-z]{2,6}[0-9]{1,2}-(az[0-9]{1,2}|[a-z0-9-]{2,20})$")


@dataclass(frozen=True)
class AwsOptions:
    """What the AWS program reads beyond the shared StackSettings."""

    image_id: str | None = None
    """`infragen:imageId`: the AMI every node boots; None = the image's SSM parameter, resolved at each deploy."""
    capacity_reservation_id: str | None = None
    """`infragen:capacityReservationId`: an On-Demand Capacity Reservation or Capacity Block to launch into."""
    capacity_block: bool = False
    """`infragen:capacityBlock`: the reservation is a Capacity Block for ML (market type capacity-block)."""
    capacity_reservation_zone: str | None = None
    """`infragen:capacityReservationZone`: the reservation's zone id (`use1-az2`); every node launches there (a
    reservation holds capacity in one zone). Required with a reservation; `infragen preflight` checks it."""


def load_aws_options(config: pulumi.Config | None = None) -> AwsOptions:
    """Read and check the AWS-only keys."""
    cfg = config if config is not None else pulumi.Config("infragen")
    image = cfg.get("imageId") or None
    reservation = cfg.get("capacityReservationId") or None
    block = bool(cfg.get_bool("capacityBlock") or False)
    zone = cfg.get("capacityReservationZone") or None
    if image is not None and not _AMI.match(image):
        raise InputError(f"infragen:imageId: {image!r} is not an AMI id (ami-...)")
    if reservation is not None and not _RESERVATION.match(reservation):
        raise InputError(f"infragen:capacityReservationId: {reservation!r} is not a reservation id (cr-...)")
    if block and reservation is None:
        raise InputError("infragen:capacityBlock is true but infragen:capacityReservationId is not set",
                         fix="pulumi config set infragen:capacityReservationId cr-...")
    if zone is not None and not _ZONE_ID.match(zone):
        raise InputError(f"infragen:capacityReservationZone: {zone!r} is not an availability zone id (use1-az2)")
    if reservation is not None and zone is None:
        raise InputError("infragen:capacityReservationId is set but infragen:capacityReservationZone is not: the "
                         "reservation holds capacity in one zone, and every node must launch there",
                         fix="run `infragen preflight STACK`, which prints the reservation's zone, then pulumi config "
                             "set infragen:capacityReservationZone <zone id>")
    if zone is not None and reservation is None:
        raise InputError("infragen:capacityReservationZone is set but infragen:capacityReservationId is not",
                         fix="set both, or unset infragen:capacityReservationZone")
    return AwsOptions(image_id=image, capacity_reservation_id=reservation, capacity_block=block,
                      capacity_reservation_zone=zone)
