"""A Storybook build's list of stories, read from its `index.json` (v4, v5) or `stories.json` (v3).

Both sides read it: the parent to refuse an upload that is not a Storybook static build before
it stores anything, the child to plan the build's snapshots. It is untrusted input (CI hands it
over), so every entry is checked for the shape this host relies on, and anything else is refused
with one line that names the problem rather than half-read.

The formats, as Storybook writes them:

* `index.json` v4 (Storybook 7) and v5 (8 and later): `{"v": 5, "entries": {id: {"type":
  "story" | "docs", "id", "title", "name", "importPath", "tags": [...]}}}`. Early v4 indexes may
  lack `tags`; they read as no tags.
* `stories.json` v3 (Storybook 6.4, 6.5, and 7 with `buildStoriesJson`): `{"v": 3, "stories":
  {id: {"id", "title" (or 6.x's "kind"), "name" (or "story"), "parameters": {...}}}}`. It has no
  entry type: an entry whose parameters say `docsOnly` is an MDX docs page.

Ids are what snapshots are named by (`<id>` or `<id> [mode]`, at most 200 characters), so an id
with control characters or longer than `MAX_ID_LENGTH` is refused here, where the whole index
can be refused with one message, rather than failing snapshot by snapshot later.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

#: The files a static build lists its stories in, in the order they are looked for.
INDEX_FILES = ("index.json", "stories.json")
#: The index versions this host reads.
INDEX_VERSIONS = (3, 4, 5)
#: The longest story id: a snapshot name (the id plus " [mode]") is at most 200 characters.
MAX_ID_LENGTH = 180

EntryType = Literal["story", "docs"]
ENTRY_TYPES: tuple[EntryType, ...] = get_args(EntryType)

#: Unicode categories refused in an id: control characters and line/paragraph separators, which
#: would break the one-line messages and file names an id ends up in.
_REFUSED_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})
#: How much of an offending id a message quotes.
_QUOTED_ID_LENGTH = 60


class IndexProblem(ValueError):
    """The index cannot be read as a Storybook's; the message is one line naming why."""


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One entry of the index: a story, or a docs page (which the plan drops)."""

    id: str
    title: str
    name: str
    type: EntryType
    tags: tuple[str, ...]
    #: Whether it comes from an MDX file (`importPath`): a Storybook 6.5 `stories.json` lists
    #: MDX docs pages as stories, and only the preview, which has no story for them, tells.
    mdx: bool = False


def parse_index(document: object) -> list[IndexEntry]:
    """The entries of a parsed `index.json` or `stories.json`, in the index's order.

    Raises `IndexProblem` for anything that is not an index of a version in `INDEX_VERSIONS`
    whose every entry has the expected shape and a usable id equal to its key (so ids are
    distinct: two entries that claim one id are refused).
    """
    if not isinstance(document, dict):
        raise IndexProblem(f"the index is a JSON {_json_kind(document)}, not an object")
    version = document.get("v")
    if type(version) is not int or version not in INDEX_VERSIONS:
        shown = "no version" if "v" not in document else f"version {_short(version)}"
        raise IndexProblem(
            f"the index has {shown}; this host reads versions "
            + ", ".join(str(v) for v in INDEX_VERSIONS)
        )
    key = "stories" if version == 3 else "entries"
    table = document.get(key)
    if not isinstance(table, dict):
        raise IndexProblem(f'an index of version {version} needs an object "{key}"')
    read = _v3_entry if version == 3 else _v4_entry
    entries: list[IndexEntry] = []
    for entry_key, raw in table.items():
        if not isinstance(raw, dict):
            raise IndexProblem(
                f"entry {_short(entry_key)} is a JSON {_json_kind(raw)}, not an object"
            )
        entry = read(raw, entry_key)
        # Keyed by id, so ids are distinct once each key is its entry's id (a key given twice in
        # the file is refused while reading it, `_refuse_duplicate_keys`).
        if entry.id != entry_key:
            raise IndexProblem(f"entry {_short(entry_key)} has id {_short(entry.id)}")
        entries.append(entry)
    return entries


def read_index_file(folder: Path) -> list[IndexEntry]:
    """The entries of the static build in `folder`, from the first of `INDEX_FILES` present.

    Every refusal is an `IndexProblem` whose message names the folder or file.
    """
    for file_name in INDEX_FILES:
        path = folder / file_name
        if path.is_file():
            return _read(path)
    raise IndexProblem(f"{folder}: no index.json or stories.json: not a Storybook static build")


def _read(path: Path) -> list[IndexEntry]:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise IndexProblem(f"{path}: cannot be read: {error.strerror or error}") from None
    return parse_index_bytes(data, str(path))


def parse_index_bytes(data: bytes, name: str) -> list[IndexEntry]:
    """The entries of the index file `name` whose bytes are `data`; refusals name `name`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise IndexProblem(f"{name}: not UTF-8 text (byte {error.start})") from None
    try:
        document = json.loads(text, object_pairs_hook=_refuse_duplicate_keys)
    except json.JSONDecodeError as error:
        raise IndexProblem(
            f"{name}: not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None
    except RecursionError:  # arrays or objects nested past Python's recursion limit
        raise IndexProblem(f"{name}: nested too deep to read as a Storybook index") from None
    except IndexProblem as problem:
        raise IndexProblem(f"{name}: {problem}") from None
    try:
        return parse_index(document)
    except IndexProblem as problem:
        raise IndexProblem(f"{name}: {problem}") from None


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """JSON objects as dicts, refusing a key given twice (json keeps the last one silently,
    which would hide a story)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise IndexProblem(f"key {_short(key)} appears twice in one object")
        result[key] = value
    return result


def _v4_entry(raw: Mapping[str, Any], key: str) -> IndexEntry:
    entry_type = raw.get("type")
    if entry_type not in ENTRY_TYPES:
        raise IndexProblem(
            f'entry {_short(key)} has type {_short(entry_type)}, not "story" or "docs"'
        )
    tags = raw.get("tags", [])
    return IndexEntry(
        id=_id(raw, key),
        title=_text(raw, key, "title"),
        name=_text(raw, key, "name"),
        type=entry_type,
        tags=_tags(tags, key),
    )


def _v3_entry(raw: Mapping[str, Any], key: str) -> IndexEntry:
    parameters = raw.get("parameters", {})
    if not isinstance(parameters, dict):
        raise IndexProblem(f'entry {_short(key)} has "parameters" that are not an object')
    title_field = "title" if "title" in raw else "kind"
    name_field = "name" if "name" in raw else "story"
    return IndexEntry(
        id=_id(raw, key),
        title=_text(raw, key, title_field, wanted='"title" or "kind"'),
        name=_text(raw, key, name_field, wanted='"name" or "story"'),
        type="docs" if parameters.get("docsOnly") is True else "story",
        tags=_tags(raw.get("tags", []), key),
        mdx=_from_mdx(raw),
    )


def _from_mdx(raw: Mapping[str, Any]) -> bool:
    path = raw.get("importPath")
    return isinstance(path, str) and path.endswith(".mdx")


def _id(raw: Mapping[str, Any], key: str) -> str:
    value = _text(raw, key, "id")
    if not value:
        raise IndexProblem(f"entry {_short(key)} has an empty id")
    if len(value) > MAX_ID_LENGTH:
        raise IndexProblem(
            f"entry id {_short(value)} is {len(value)} characters long; at most {MAX_ID_LENGTH} "
            "fit in a snapshot name"
        )
    bad = next((c for c in value if unicodedata.category(c) in _REFUSED_CATEGORIES), None)
    if bad is not None:
        raise IndexProblem(f"entry id {_short(value)} has the control character U+{ord(bad):04X}")
    return value


def _text(raw: Mapping[str, Any], key: str, field: str, wanted: str | None = None) -> str:
    value = raw.get(field)
    if not isinstance(value, str):
        if field not in raw:
            named = wanted if wanted is not None else f'"{field}"'
            raise IndexProblem(f"entry {_short(key)} has no {named}")
        raise IndexProblem(f'entry {_short(key)} has a "{field}" that is not a string')
    return value


def _tags(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise IndexProblem(f'entry {_short(key)} has "tags" that are not a list of strings')
    return tuple(value)


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _short(value: object) -> str:
    """A value as a message quotes it: repr (so control characters show escaped), cut short."""
    shown = repr(value)
    if len(shown) > _QUOTED_ID_LENGTH:
        shown = shown[: _QUOTED_ID_LENGTH - 1] + "…"
    return shown
