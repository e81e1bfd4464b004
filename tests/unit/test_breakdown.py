"""When a child calls a build's stories broken by one error (`child.storybook.breakdown`)."""

from __future__ import annotations

from child.storybook.breakdown import Breakdown

E = "Error: [MSW] Failed to register a Service Worker"


def test_three_stories_of_two_components_two_of_them_alone_break_the_build() -> None:
    watch = Breakdown()
    watch.saw("A", E, alone=True)
    assert watch.worth_retrying(E)  # one fresh page has said it: another may not
    watch.saw("A", E, alone=True)
    assert not watch.worth_retrying(E) and watch.worth_retrying("another error")
    assert watch.stopped is None
    watch.saw("B", E, alone=False)
    assert watch.stopped == E


def test_a_broken_component_alone_stops_nothing() -> None:
    watch = Breakdown()
    for _ in range(10):
        watch.saw("A", E, alone=True)
    assert watch.stopped is None and watch.state == "watching"


def test_stories_that_failed_only_on_reused_pages_stop_nothing() -> None:
    watch = Breakdown()
    watch.saw("A", E, alone=True)
    for title in "BCDEF":
        watch.saw(title, E, alone=False)
    assert watch.stopped is None


def test_a_story_that_rendered_or_a_second_error_ends_the_watch_for_good() -> None:
    for first in (None, "TypeError: x is undefined"):
        watch = Breakdown()
        watch.saw("A", E, alone=True)
        watch.saw("B", first, alone=True)
        for title in "CDEF":
            watch.saw(title, E, alone=True)
        assert watch.state == "healthy" and watch.stopped is None
        assert watch.worth_retrying(E)
