"""The host's metrics: what each event records, in a registry the test owns."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from supervisor.host.deaths import cause_class
from supervisor.metrics.registry import HostMetrics


def sample(metrics: HostMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


@pytest.mark.parametrize(
    ("cause", "label"),
    [
        ("SIGSEGV", "SIGSEGV"),
        ("SIGABRT", "SIGABRT"),
        ("SIGKILL (likely out of memory)", "SIGKILL"),
        ("SIGKILL (out of memory)", "oom_kill"),
        ("signal 77", "signal_77"),
        ("exit status 3", "exit_3"),
        ("hung (no progress for 40 s)", "stalled"),
        ("hung (no hello within 3 s)", "stalled"),
        ("memory limit", "memory_limit"),
        ("protocol error: undecodable frame", "protocol_error"),
        ("wait status 1234", "other"),
    ],
)
def test_crash_causes_are_labelled_by_their_class(cause: str, label: str) -> None:
    assert cause_class(cause) == label


def test_each_host_records_in_its_own_registry() -> None:
    first, second = HostMetrics(), HostMetrics(CollectorRegistry())
    first.child_crashed("SIGSEGV")
    assert sample(first, "storyshelf_child_crashes_total", cause="SIGSEGV") == 1
    assert sample(second, "storyshelf_child_crashes_total", cause="SIGSEGV") is None


def test_known_kinds_start_at_zero_for_every_outcome() -> None:
    metrics = HostMetrics()
    metrics.know_kinds(["capture"])
    for outcome in ("completed", "retried", "failed", "cancelled", "lost", "released"):
        assert (
            sample(metrics, "storyshelf_jobs_finished_total", kind="capture", outcome=outcome) == 0
        )
    assert sample(metrics, "storyshelf_job_duration_seconds_count", kind="capture") == 0


def test_a_finished_job_counts_its_outcome_and_its_duration() -> None:
    metrics = HostMetrics()
    metrics.job_finished("capture", "completed", 2.0)
    metrics.job_finished("capture", "retried", 0.5)
    metrics.job_finished("capture", "dropped", None)
    assert (
        sample(metrics, "storyshelf_jobs_finished_total", kind="capture", outcome="completed") == 1
    )
    assert sample(metrics, "storyshelf_jobs_finished_total", kind="capture", outcome="dropped") == 1
    assert sample(metrics, "storyshelf_job_duration_seconds_count", kind="capture") == 2
    assert sample(metrics, "storyshelf_job_duration_seconds_sum", kind="capture") == 2.5


def test_renewals_and_lost_leases_are_counted_per_job() -> None:
    metrics = HostMetrics()
    metrics.leases_renewed(3, 1)
    metrics.leases_renewed(1, 0)
    assert sample(metrics, "storyshelf_lease_renewals_total") == 4
    assert sample(metrics, "storyshelf_leases_lost_total") == 1


def test_a_claim_records_its_batch_and_each_pickup() -> None:
    metrics = HostMetrics()
    metrics.claimed(3, [0.2, 1.5, -0.01])
    metrics.claimed(0, [])
    assert sample(metrics, "storyshelf_claim_batch_size_count") == 2
    assert sample(metrics, "storyshelf_claim_batch_size_sum") == 3
    assert sample(metrics, "storyshelf_pickup_latency_seconds_count") == 3
    # A clock step between the enqueuing host and the database never makes a negative wait.
    assert sample(metrics, "storyshelf_pickup_latency_seconds_bucket", le="0.01") == 1


def test_host_state_sets_the_gauges_and_the_backoff() -> None:
    metrics = HostMetrics()
    metrics.host_state(children=2, claimed_ahead=5, backoff_remaining=1.5)
    assert sample(metrics, "storyshelf_children") == 2
    assert sample(metrics, "storyshelf_claimed_ahead") == 5
    assert sample(metrics, "storyshelf_spawn_backoff") == 1
    assert sample(metrics, "storyshelf_spawn_backoff_remaining_seconds") == 1.5
    metrics.host_state(children=2, claimed_ahead=0, backoff_remaining=None)
    assert sample(metrics, "storyshelf_spawn_backoff") == 0
    assert sample(metrics, "storyshelf_spawn_backoff_remaining_seconds") == 0


def story(name: str, seconds: float, settled: bool | None) -> dict[str, object]:
    return {"name": name, "status": "new", "render_seconds": seconds, "settled": settled}


def test_a_capture_result_counts_its_stories_render_times_and_unsettled_ones() -> None:
    metrics = HostMetrics()
    metrics.captured(
        {
            "snapshots": [
                story("a", 0.3, True),
                story("b", 2.0, False),
                story("c", 15.2, None),  # failed at the cap: rendered, with no shot
            ]
        }
    )
    assert sample(metrics, "storyshelf_stories_rendered_total") == 3
    assert sample(metrics, "storyshelf_story_render_seconds_count") == 3
    assert sample(metrics, "storyshelf_story_render_seconds_sum") == pytest.approx(17.5)
    assert sample(metrics, "storyshelf_stories_unsettled_total") == 1


def test_an_upload_renders_no_story() -> None:
    metrics = HostMetrics()
    metrics.captured({"snapshots": [{"name": "a", "status": "unchanged"}]})
    metrics.captured({"unexpected": True})
    metrics.captured(None)
    assert sample(metrics, "storyshelf_stories_rendered_total") == 0


def test_the_exposition_names_follow_prometheus_conventions() -> None:
    metrics = HostMetrics()
    metrics.know_kinds(["sleep"])
    text = generate_latest(metrics.registry).decode()
    names = {family.name for family in metrics.registry.collect()}
    assert names == {
        "storyshelf_jobs_finished",
        "storyshelf_job_duration_seconds",
        "storyshelf_children",
        "storyshelf_child_crashes",
        "storyshelf_lease_renewals",
        "storyshelf_leases_lost",
        "storyshelf_claim_batch_size",
        "storyshelf_claimed_ahead",
        "storyshelf_pickup_latency_seconds",
        "storyshelf_spawn_backoff",
        "storyshelf_spawn_backoff_remaining_seconds",
        "storyshelf_stories_rendered",
        "storyshelf_story_render_seconds",
        "storyshelf_stories_unsettled",
    }
    assert 'storyshelf_jobs_finished_total{kind="sleep",outcome="completed"} 0.0' in text
