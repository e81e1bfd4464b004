"""Where each branch's `latest` page lives (`ipc.publish.latest_pointer`): a key for every
branch git takes (and any other string), within every limit of a file system and a bucket,
never shared by two branches, and where it was for ordinary names."""

from __future__ import annotations

import posixpath

from hypothesis import given
from hypothesis import strategies as st

from ipc.publish import (
    INDEX,
    NAME_BYTES,
    POINTER_SUFFIX,
    latest_pointer,
    pointer_target,
    report_index,
)

#: S3's limit on a key; the pointer must leave room for a store's prefix too.
S3_KEY_BYTES = 1024

branches = st.one_of(
    st.text(min_size=1, max_size=600),
    st.lists(st.text(min_size=0, max_size=300), min_size=1, max_size=40).map("/".join),
    st.lists(st.sampled_from(["a", "é", "x.html", ".", "..", "%", "!", "/"]), min_size=1).map(
        "".join
    ),
)


def assert_fits(key: str) -> None:
    names = key.split("/")
    assert len(key.encode()) < S3_KEY_BYTES - 300, key
    assert all(0 < len(name.encode()) <= NAME_BYTES for name in names), key
    assert not {".", ".."} & set(names), key
    assert key.endswith(POINTER_SUFFIX)
    assert not any(name.endswith(POINTER_SUFFIX) for name in names[:-1]), key


@given(branches, st.text(min_size=1, max_size=400))
def test_every_branch_has_a_pointer_within_every_limit(branch: str, project: str) -> None:
    key = latest_pointer(project, branch)
    assert_fits(key)
    target = posixpath.normpath(posixpath.join(posixpath.dirname(key), pointer_target(branch, 7)))
    assert target == report_index(project, 7)
    assert target.endswith(f"/7/{INDEX}")


@given(branches, branches)
def test_two_branches_never_share_a_pointer_or_stand_in_each_other_s_way(
    one: str, other: str
) -> None:
    if one == other:
        return
    first, second = latest_pointer("web", one), latest_pointer("web", other)
    assert first != second
    # Neither is a folder of the other's path: in a folder store both must be writable.
    assert not second.startswith(first + "/") and not first.startswith(second + "/")


def test_ordinary_branches_keep_their_readable_place() -> None:
    assert latest_pointer("web", "main") == "reports/web/latest/main.html"
    assert latest_pointer("web", "feature/login") == "reports/web/latest/feature/login.html"
    assert latest_pointer("web", "release/2.x") == "reports/web/latest/release/2.x.html"
    assert latest_pointer("my app", "fix/café") == "reports/my%20app/latest/fix/caf%C3%A9.html"
    assert pointer_target("feature/login", 12) == "../../12/index.html"


def test_a_project_named_as_a_page_gets_a_folder_no_page_can_stand_in_the_way_of() -> None:
    """A project `build-5.html` beside an older store's page `reports/build-5.html`."""
    for project in ("build-5.html", ".html"):
        folder = latest_pointer(project, "main").split("/")[1]
        assert not folder.endswith(POINTER_SUFFIX)
        assert folder.startswith(project.removesuffix(POINTER_SUFFIX)[:3])


def test_a_long_branch_keeps_its_readable_beginning() -> None:
    """43 two-byte characters pass 255 bytes once quoted; 256 ASCII ones pass it as they are."""
    for branch in ("é" * 43, "a" * 256, "feature/" + "ü" * 200, "/".join(["team"] * 120)):
        key = latest_pointer("web", branch)
        assert_fits(key)
        assert key.startswith("reports/web/latest/")
        assert key.removeprefix("reports/web/latest/")[:4] in ("%C3%", "aaaa", "feat", "team")
    assert latest_pointer("web", "a" * 256) != latest_pointer("web", "a" * 257)
