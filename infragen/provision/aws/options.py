"""AWS-only stack settings (`infragen:*` config): a pinned machine image and a capacity reservation.

Reads config only; never plans, never creates resources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi

from infragen.errors import InputError

_AMI = re.compile(r"^ami-[0-9a-f]{8,17}$")
_RESERVATION = re.compile(r"^cr-[0-9a-f]{8,17}$")


@dataclass(frozen=True)
class AwsOptions:
    """What the AWS program reads beyond the shared StackSettings."""

    image_id: str | None = None
    """`infragen:imageId`: the AMI every node boots; None = the image's SSM parameter, resolved at each deploy."""
    capacity_reservation_id: str | None = None
    """`infragen:capacityReservationId`: an On-Demand Capacity Reservation or Capacity Block to launch into."""
    capacity_block: bool = False
    """`infragen:capacityBlock`: the reservation is a Capacity Block for ML (market type capacity-block)."""


def load_aws_options(config: pulumi.Config | None = None) -> AwsOptions:
    """Read and check the AWS-only keys."""
    cfg = config if config is not None else pulumi.Config("infragen")
    image = cfg.get("imageId") or None
    reservation = cfg.get("capacityReservationId") or None
    block = bool(cfg.get_bool("capacityBlock") or False)
    if image is not None and not _AMI.match(image):
        raise InputError(f"infragen:imageId: {image!r} is not an AMI id (ami-...)")
    if reservation is not None and not _RESERVATION.match(reservation):
        raise InputError(f"infragen:capacityReservationId: {reservation!r} is not a reservation id (cr-...)")
    if block and reservation is None:
        raise InputError("infragen:capacityBlock is true but infragen:capacityReservationId is not set",
                         fix="pulumi config set infragen:capacityReservationId cr-...")
    return AwsOptions(image_id=image, capacity_reservation_id=reservation, capacity_block=block)
