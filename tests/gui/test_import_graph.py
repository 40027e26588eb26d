"""The gui package's modules import each other without a cycle (type-only imports included), so every
view can be built and tested on its own."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sibling_imports(path: Path) -> set[str]:
    """Modules of the same package that `path` imports (`from .x import`, `from . import x`), anywhere in
    the file, `if TYPE_CHECKING:` blocks included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for target in sorted(graph.get(name, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target in graph and state.get(target) is None and (cycle := visit(target)):
                return cycle
        path.pop()
        state[name] = 2
        return None

    for name in sorted(graph):
        if state.get(name) is None and (cycle := visit(name)):
            return cycle
    return None


def package_graph(folder: Path) -> dict[str, set[str]]:
    modules = {p.stem: p for p in folder.glob("*.py") if p.stem != "__init__"}
    return {name: sibling_imports(path) & modules.keys() for name, path in modules.items()}


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_sibling_imports_see_type_only_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nfrom . import a\nfrom .b import B\nfrom ..core import c\n"
                      "if TYPE_CHECKING:\n    from .d import D\n", encoding="utf-8")
    assert sibling_imports(module) == {"a", "b", "d"}


def test_no_import_cycle_in_gui():
    graph = package_graph(ROOT / "gui")
    assert {"main_window", "mask_editing", "inspection"} <= graph.keys()
    assert find_cycle(graph) is None
