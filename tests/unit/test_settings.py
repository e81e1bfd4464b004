"""Settings that cannot work are named before a host starts (`HostSettings.problems`)."""

from __future__ import annotations

import pytest

from supervisor.host.settings import HostSettings


def test_the_defaults_can_work() -> None:
    assert HostSettings().problems() == []


@pytest.mark.parametrize(
    ("lease_seconds", "stall_seconds", "fits"),
    [
        (60.0, 40.0, True),  # the defaults: two thirds of the lease
        (60.0, 45.0, False),  # the old defaults: a lapsed lease before the stall kill
        (60.0, 60.0, False),
        (10.0, 3.0, True),  # the tests' short leases
        (10.0, 7.0, False),
        (2.0, 1.2, True),
    ],
)
def test_the_stall_must_leave_the_lease_room_for_its_renewal(
    lease_seconds: float, stall_seconds: float, fits: bool
) -> None:
    problems = HostSettings(lease_seconds=lease_seconds, stall_seconds=stall_seconds).problems()
    assert (problems == []) == fits
    if not fits:
        assert problems == [
            f"--stall-seconds {stall_seconds:g} leaves no room to renew the lease: with "
            f"--lease-seconds {lease_seconds:g} it must be at most {lease_seconds * 2 / 3:g} "
            "(two thirds of the lease)"
        ]


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        (HostSettings(lease_seconds=0.0), "--lease-seconds must be more than 0, not 0"),
        (HostSettings(lease_seconds=-1.0), "--lease-seconds must be more than 0, not -1"),
        (HostSettings(concurrency=0), "--concurrency must be 1 or more, not 0"),
        (HostSettings(concurrency=-1), "--concurrency must be 1 or more, not -1"),
        (HostSettings(max_crashes=0), "--max-crashes must be 1 or more, not 0"),
        (HostSettings(drain_seconds=-5.0), "--drain-seconds must be 0 or more, not -5"),
        (HostSettings(hard_rss_bytes=0), "--hard-rss-mib must be more than 0, not 0"),
    ],
)
def test_a_setting_that_cannot_work_is_named_with_its_option(
    settings: HostSettings, problem: str
) -> None:
    assert problem in settings.problems()


def test_a_lease_of_zero_is_one_problem_not_also_a_stall_problem() -> None:
    assert HostSettings(lease_seconds=0.0).problems() == [
        "--lease-seconds must be more than 0, not 0"
    ]
