"""What the child makes of the browser's answers to the frames it begins
(`child.browser.frames`): when a page counts as still, and how long a shot waits for a frame
that is drawn. The browser's own answers are exercised by the capture tests; here, the answers
that are rare on a quiet machine (frames not drawn while a surface is made) are given on cue."""

from __future__ import annotations

from typing import Any, cast

import pytest
from playwright.sync_api import CDPSession

from child.browser import frames


class Answers:
    """Answers `HeadlessExperimental.beginFrame` with the frames given, in order."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.begun = 0

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert method == "HeadlessExperimental.beginFrame"
        self.begun += 1
        return self.answers.pop(0)

    def session(self) -> CDPSession:
        return cast(CDPSession, self)


@pytest.mark.parametrize(
    ("first", "second", "still"),
    [
        (True, False, True),  # drew, then nothing changed
        (True, True, False),  # drew, and drew again: maybe the same pixels, maybe not
        (False, False, False),  # nothing drawn at all (a surface being made): says nothing
        (None, False, False),  # a browser that does not say
    ],
)
def test_a_page_is_still_when_a_frame_that_drew_is_followed_by_one_without_damage(
    first: bool | None, second: bool, still: bool
) -> None:
    answers = Answers(
        {} if first is None else {"hasDamage": first},
        {"hasDamage": second},
    )
    assert frames.still(answers.session()) is still
    assert answers.begun == 2


def test_a_shot_begins_frames_until_one_is_drawn_waiting_between_them_after_the_first_few() -> None:
    undrawn = [{"hasDamage": False}] * 9
    answers = Answers(*undrawn, {"hasDamage": True, "screenshotData": "cG5n"})
    waits: list[float] = []
    assert frames._drawn(answers.session(), waits.append) == "cG5n"
    assert answers.begun == 10
    assert waits == [frames.FRAME_WAIT_SECONDS] * (10 - frames.BACK_TO_BACK_FRAMES)


def test_a_shot_that_is_never_drawn_gives_up_after_its_frames() -> None:
    answers = Answers(*[{"hasDamage": False}] * frames.MAX_FRAMES_A_SHOT)
    with pytest.raises(frames.NotDrawn, match=f"no frame was drawn in {frames.MAX_FRAMES_A_SHOT}"):
        frames._drawn(answers.session(), lambda _: None)
    assert answers.begun == frames.MAX_FRAMES_A_SHOT
