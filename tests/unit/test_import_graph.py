"""Imports go one way: no first-party module reaches itself through what it imports.

A circle is two duties that cannot be read, tested or moved apart, and it hides until an import
order breaks at start-up; hiding the import inside a function or under `TYPE_CHECKING` keeps the
circle, so every import counts here, wherever it stands in the module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("supervisor", "child", "ipc")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def first_party_modules() -> dict[str, Path]:
    return {
        module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
    }


def imported_by(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The first-party modules `name` imports: `from a import b` names module `a.b` when there
    is one, else `a` itself."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + is_package]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {module for module in found if module in modules and module != name}


def import_graph() -> dict[str, set[str]]:
    modules = first_party_modules()
    return {name: imported_by(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of `graph` as the modules along it (the first repeated at the end), or None."""
    done: set[str] = set()
    for start in sorted(graph):
        path: list[str] = []
        pending = [iter([start])]
        while pending:
            following = next(pending[-1], None)
            if following is None:
                pending.pop()
                if path:
                    done.add(path.pop())
            elif following in path:
                return [*path[path.index(following) :], following]
            elif following not in done:
                path.append(following)
                pending.append(iter(sorted(graph[following])))
    return None


def test_find_cycle_names_a_circle_and_passes_a_tree() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_every_import_counts_wherever_it_stands(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "from pkg import sub, name\n"
        "from . import sibling\n"
        "if TYPE_CHECKING:\n    from pkg.typed import T\n"
        "def f() -> None:\n    import pkg.other\n"
    )
    modules = dict.fromkeys(["pkg", "pkg.sub", "pkg.other", "pkg.typed", "pkg.sibling"], source)
    assert imported_by("pkg.m", source, modules) == {
        "pkg",
        "pkg.sub",
        "pkg.other",
        "pkg.typed",
        "pkg.sibling",
    }


def test_no_first_party_module_imports_itself_through_others() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])
