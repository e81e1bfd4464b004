"""A Storybook build's index (`index.json` v4/v5, `stories.json` v3) read, or refused with one
line naming the problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ipc.storybook_index import (
    INDEX_FILES,
    IndexEntry,
    IndexProblem,
    parse_index,
    parse_index_bytes,
    read_index_file,
)

FIXTURE_BUILD = Path(__file__).parents[1] / "fixtures" / "storybook" / "storybook-static"

# Storybook 7's index.json: a docs entry (autodocs) beside the stories, with storiesImports.
V4_STORYBOOK_7: dict[str, Any] = {
    "v": 4,
    "entries": {
        "example-button--docs": {
            "id": "example-button--docs",
            "title": "Example/Button",
            "name": "Docs",
            "importPath": "./src/stories/Button.stories.ts",
            "type": "docs",
            "tags": ["autodocs", "docs"],
            "storiesImports": [],
        },
        "example-button--primary": {
            "id": "example-button--primary",
            "title": "Example/Button",
            "name": "Primary",
            "importPath": "./src/stories/Button.stories.ts",
            "tags": ["autodocs", "story"],
            "type": "story",
        },
    },
}

# Storybook 6.5's stories.json (storyStoreV7): title and name, docsOnly in the parameters.
V3_STORYBOOK_6_5: dict[str, Any] = {
    "v": 3,
    "stories": {
        "introduction--page": {
            "id": "introduction--page",
            "title": "Introduction",
            "name": "Page",
            "importPath": "./src/Introduction.stories.mdx",
            "kind": "Introduction",
            "story": "Page",
            "parameters": {
                "__id": "introduction--page",
                "docsOnly": True,
                "fileName": "./src/Introduction.stories.mdx",
            },
        },
        "example-header--logged-in": {
            "id": "example-header--logged-in",
            "title": "Example/Header",
            "name": "Logged In",
            "importPath": "./src/Header.stories.jsx",
            "kind": "Example/Header",
            "story": "Logged In",
            "parameters": {
                "__id": "example-header--logged-in",
                "docsOnly": False,
                "fileName": "./src/Header.stories.jsx",
            },
        },
    },
}

# Storybook 6.x's older stories.json: kind and story only, no parameters on one entry.
V3_KIND_AND_STORY: dict[str, Any] = {
    "v": 3,
    "stories": {
        "atoms-badge--default": {
            "id": "atoms-badge--default",
            "kind": "Atoms/Badge",
            "story": "Default",
        },
    },
}


def story(entry_id: str, **fields: Any) -> dict[str, Any]:
    """A v5 story entry of the given id, with fields replaced or added."""
    entry = {
        "type": "story",
        "id": entry_id,
        "title": "T",
        "name": "N",
        "importPath": "./x.js",
        "tags": [],
    }
    entry.update(fields)
    return entry


def v5(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"v": 5, "entries": {entry["id"]: entry for entry in entries}}


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            V4_STORYBOOK_7,
            [
                IndexEntry(
                    "example-button--docs", "Example/Button", "Docs", "docs", ("autodocs", "docs")
                ),
                IndexEntry(
                    "example-button--primary",
                    "Example/Button",
                    "Primary",
                    "story",
                    ("autodocs", "story"),
                ),
            ],
        ),
        (
            V3_STORYBOOK_6_5,
            [
                IndexEntry("introduction--page", "Introduction", "Page", "docs", (), mdx=True),
                IndexEntry("example-header--logged-in", "Example/Header", "Logged In", "story", ()),
            ],
        ),
        (
            V3_KIND_AND_STORY,
            [IndexEntry("atoms-badge--default", "Atoms/Badge", "Default", "story", ())],
        ),
        # An early v4 index without tags reads as no tags.
        (
            {
                "v": 4,
                "entries": {"a--b": {"type": "story", "id": "a--b", "title": "A", "name": "B"}},
            },
            [IndexEntry("a--b", "A", "B", "story", ())],
        ),
        ({"v": 5, "entries": {}}, []),
        # An id of exactly the longest length, and non-ASCII text, are fine.
        (v5(story("x" * 180)), [IndexEntry("x" * 180, "T", "N", "story", ())]),
        (
            v5(story("ünïcode--story", title="Ä/Ö")),
            [IndexEntry("ünïcode--story", "Ä/Ö", "N", "story", ())],
        ),
    ],
    ids=[
        "v4 storybook 7",
        "v3 storybook 6.5",
        "v3 kind and story",
        "v4 no tags",
        "empty",
        "id 180",
        "unicode",
    ],
)
def test_an_index_is_read_in_its_order(
    document: dict[str, Any], expected: list[IndexEntry]
) -> None:
    assert parse_index(document) == expected


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ([], "the index is a JSON array, not an object"),
        (None, "the index is a JSON null, not an object"),
        ("index", "the index is a JSON string, not an object"),
        ({"entries": {}}, "the index has no version; this host reads versions 3, 4, 5"),
        ({"v": 6, "entries": {}}, "the index has version 6; this host reads versions 3, 4, 5"),
        ({"v": 2, "stories": {}}, "the index has version 2; this host reads versions 3, 4, 5"),
        ({"v": "5", "entries": {}}, "the index has version '5'; this host reads versions 3, 4, 5"),
        ({"v": 5.0, "entries": {}}, "the index has version 5.0; this host reads versions 3, 4, 5"),
        (
            {"v": True, "entries": {}},
            "the index has version True; this host reads versions 3, 4, 5",
        ),
        ({"v": 5, "stories": {}}, 'an index of version 5 needs an object "entries"'),
        ({"v": 3, "entries": {}}, 'an index of version 3 needs an object "stories"'),
        ({"v": 5, "entries": []}, 'an index of version 5 needs an object "entries"'),
        ({"v": 5, "entries": {"a--b": "story"}}, "entry 'a--b' is a JSON string, not an object"),
        (
            v5(story("a--b", type="component")),
            "entry 'a--b' has type 'component', not \"story\" or \"docs\"",
        ),
        (
            v5({"id": "a--b", "title": "T", "name": "N"}),
            'entry \'a--b\' has type None, not "story" or "docs"',
        ),
        (v5(story("a--b", title=None)), "entry 'a--b' has a \"title\" that is not a string"),
        (v5(story("a--b", name=3)), "entry 'a--b' has a \"name\" that is not a string"),
        (
            v5(story("a--b", tags="snapshot")),
            "entry 'a--b' has \"tags\" that are not a list of strings",
        ),
        (
            v5(story("a--b", tags=["ok", 1])),
            "entry 'a--b' has \"tags\" that are not a list of strings",
        ),
        ({"v": 5, "entries": {"a--b": story("a--c")}}, "entry 'a--b' has id 'a--c'"),
        ({"v": 5, "entries": {"": story("")}}, "entry '' has an empty id"),
        (
            v5(story("x" * 181)),
            f"entry id {('x' * 181)!r:.59}… is 181 characters long; at most 180 fit in a snapshot name",
        ),
        (v5(story("a--b\nc")), "entry id 'a--b\\nc' has the control character U+000A"),
        (v5(story("a--b\x7f")), "entry id 'a--b\\x7f' has the control character U+007F"),
        (v5(story("a--b\u2028")), "entry id 'a--b\\u2028' has the control character U+2028"),
        # Two keys naming the same id: one story would shadow the other.
        (
            {"v": 5, "entries": {"a--b": story("a--b"), "a--b ": story("a--b")}},
            "entry 'a--b ' has id 'a--b'",
        ),
        (
            {"v": 3, "stories": {"a--b": {"id": "a--b", "name": "N"}}},
            'entry \'a--b\' has no "title" or "kind"',
        ),
        (
            {"v": 3, "stories": {"a--b": {"id": "a--b", "kind": "K"}}},
            'entry \'a--b\' has no "name" or "story"',
        ),
        ({"v": 3, "stories": {"a--b": {"title": "K", "name": "N"}}}, "entry 'a--b' has no \"id\""),
        (
            {
                "v": 3,
                "stories": {"a--b": {"id": "a--b", "kind": "K", "story": "S", "parameters": []}},
            },
            "entry 'a--b' has \"parameters\" that are not an object",
        ),
    ],
)
def test_an_index_of_the_wrong_shape_is_refused_with_one_line(
    document: object, problem: str
) -> None:
    with pytest.raises(IndexProblem) as refused:
        parse_index(document)
    assert str(refused.value) == problem
    assert "\n" not in str(refused.value)


def test_the_fixture_build_is_read_from_its_index_json() -> None:
    entries = read_index_file(FIXTURE_BUILD)
    assert len(entries) == 29
    assert all(entry.type == "story" for entry in entries)
    by_id = {entry.id: entry for entry in entries}
    assert by_id["example-button--primary"] == IndexEntry(
        "example-button--primary",
        "Example/Button",
        "Primary",
        "story",
        ("dev", "test", "manifest", "snapshot"),
    )
    # The !snapshot story's tag is resolved away at index time.
    assert "snapshot" not in by_id["example-optout--snapshot-tag-removed"].tags


def test_stories_json_is_read_when_there_is_no_index_json(tmp_path: Path) -> None:
    (tmp_path / "stories.json").write_text(json.dumps(V3_KIND_AND_STORY))
    assert [entry.id for entry in read_index_file(tmp_path)] == ["atoms-badge--default"]


def test_index_json_wins_over_stories_json(tmp_path: Path) -> None:
    assert INDEX_FILES == ("index.json", "stories.json")
    (tmp_path / "index.json").write_text(json.dumps(V4_STORYBOOK_7))
    (tmp_path / "stories.json").write_text(json.dumps(V3_KIND_AND_STORY))
    assert [entry.id for entry in read_index_file(tmp_path)] == [
        "example-button--docs",
        "example-button--primary",
    ]


@pytest.mark.parametrize(
    ("file_name", "content", "problem"),
    [
        (
            "index.json",
            b"{",
            "index.json: not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        ),
        ("stories.json", b"", "stories.json: not valid JSON: Expecting value at line 1 column 1"),
        ("index.json", b'{"v": 5, "entries": {}}\n\xff', "index.json: not UTF-8 text (byte 24)"),
        (
            "index.json",
            b'{"v": 6}',
            "index.json: the index has version 6; this host reads versions 3, 4, 5",
        ),
        (
            "index.json",
            b'{"v": 5, "entries": {"a--b": {"type": "story", "id": "a--b", "title": "T", "name": "N"},'
            b' "a--b": {"type": "story", "id": "a--b", "title": "T", "name": "M"}}}',
            "index.json: key 'a--b' appears twice in one object",
        ),
    ],
)
def test_a_file_that_is_no_index_is_refused_naming_the_file(
    tmp_path: Path, file_name: str, content: bytes, problem: str
) -> None:
    (tmp_path / file_name).write_bytes(content)
    with pytest.raises(IndexProblem) as refused:
        read_index_file(tmp_path)
    assert str(refused.value) == f"{tmp_path}/{problem}"


def test_a_folder_without_an_index_is_not_a_storybook_build(tmp_path: Path) -> None:
    (tmp_path / "iframe.html").write_text("<html></html>")
    (tmp_path / "index.json").mkdir()  # a folder of that name is no index
    with pytest.raises(IndexProblem) as refused:
        read_index_file(tmp_path)
    assert (
        str(refused.value)
        == f"{tmp_path}: no index.json or stories.json: not a Storybook static build"
    )


@pytest.mark.parametrize("name", ["index.json", "stories.json"])
def test_an_index_nested_past_the_recursion_limit_is_one_line_on_either_side(name: str) -> None:
    """The parent's upload and the child's plan both read through `parse_index_bytes`: arrays
    nested 100,000 deep are an `IndexProblem`, never a RecursionError."""
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    with pytest.raises(IndexProblem, match=f"^{name}: nested too deep to read"):
        parse_index_bytes(deep, name)
