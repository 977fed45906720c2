"""Requests beyond the batch the KV cache holds wait for a slot (Little's law), so capping never looks faster."""

from infragen.sizing.estimate import queue_wait_s


def test_no_wait_when_everything_runs() -> None:
    assert queue_wait_s(8, 8, 10.0) == 0.0
    assert queue_wait_s(0, 8, 10.0) == 0.0


def test_twice_the_slots_waits_one_service_time() -> None:
    assert queue_wait_s(16, 8, 10.0) == 10.0
    assert queue_wait_s(12, 8, 10.0) == 5.0
