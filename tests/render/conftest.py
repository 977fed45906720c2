"""Fixtures for the render tests: plans of every shape on both clouds (tests/plan_factory.py)."""

from __future__ import annotations

import pytest

from infragen.plan import Plan
from tests.plan_factory import make_plan
from tests.render.support import CASES


@pytest.fixture(params=CASES, ids=[f"{k}-{c}" for k, c in CASES])
def plan(request: pytest.FixtureRequest) -> Plan:
    kind, cloud = request.param
    return make_plan(kind, cloud)
