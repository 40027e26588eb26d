"""The layering rule: `segscope.core` runs headless (CLI, remote worker, tests) and never loads Qt."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "core"
QT_MODULES = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "qtpy", "shiboken6")


def test_no_core_module_imports_qt_or_the_gui() -> None:
    offenders = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            level = getattr(node, "level", 0)
            for name in names:
                is_gui = name.startswith("segscope.gui") or (level >= 2 and name.startswith("gui"))
                if name.split(".")[0] in QT_MODULES or is_gui:
                    offenders.append(f"{path.relative_to(CORE.parent)}:{node.lineno} imports {name}")
    assert offenders == []


def test_importing_every_core_module_loads_no_qt() -> None:
    modules = sorted(".".join(("segscope", *p.relative_to(CORE.parent).with_suffix("").parts)).replace(".__init__", "")
                     for p in CORE.rglob("*.py") if p.name != "worker.py")
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {QT_MODULES!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_package_folder_is_installed() -> None:
    """A non-editable install ships only the packages pyproject lists: a new subpackage must be named there."""
    root = CORE.parent
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    listed = set(re.findall(r'"(segscope(?:\.\w+)*)"', re.search(r"^packages = \[(.*)\]$", text, re.M).group(1)))
    folders = {".".join(("segscope", *p.parent.relative_to(root).parts))
               for top in ("core", "gui", "models", "pipelines", "resources")
               for p in (root / top).rglob("__init__.py")} | {"segscope"}  # api/ is `segscope` itself
    assert (root / "api" / "__init__.py").is_file()
    mapped = set(re.findall(r'"(segscope(?:\.\w+)*)" = "', text))
    assert folders - listed == set()
    assert folders - mapped == set()


#: The start of an import statement on its own line, at any indentation (inside a function too), with a
#: parenthesised name list over several lines; each match is parsed with `ast` (prose that is no import is not).
#: Parsing only these keeps the walk fast (parsing every file takes about a second).
_IMPORT = re.compile(r"^[ \t]*(from[ \t]+[\w.]+[ \t]+import[ \t]+(?:\((?:[^)#]|#[^\n]*)*\)|[^\n]*)|import[ \t][^\n]*)",
                     re.M)


def _imports(root: Path) -> dict[str, set[str]]:
    """segscope module -> the segscope modules it imports, at the top or inside a function (TYPE_CHECKING too)."""
    files = {}
    for top in ("core", "gui"):
        for path in (root / top).rglob("*.py"):
            parts = ("segscope", *path.relative_to(root).with_suffix("").parts)
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for match in _IMPORT.finditer(path.read_text(encoding="utf-8")):
            try:
                node = ast.parse(match.group(1)).body[0]
            except SyntaxError:  # a docstring's line that starts with "import"
                continue
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1]) if node.level else ""
                name = ".".join(part for part in (base, node.module or "") if part)
                targets.update([name, *(f"{name}.{alias.name}" for alias in node.names)])
        graph[module] = {target for target in targets if target in files and target != module}
    return graph


def _a_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of `graph` (its modules, the first repeated at the end), or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str]:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state and (found := visit(target)):
                return found
        state[module] = 2
        path.pop()
        return []

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return []


def test_no_import_cycle_in_core_or_gui_even_inside_functions() -> None:
    graph = _imports(CORE.parent)
    assert "segscope.core.backends.base" in graph["segscope.core.backends.embedded"]  # the walk sees imports
    cycle = _a_cycle(graph)
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import(tmp_path) -> None:
    (tmp_path / "core" / "sub").mkdir(parents=True)
    (tmp_path / "gui").mkdir()
    (tmp_path / "core" / "__init__.py").write_text("")
    (tmp_path / "core" / "sub" / "__init__.py").write_text("")
    (tmp_path / "core" / "a.py").write_text('"""A module.\n\nimport it from c\n"""\n'
                                            'from .sub import (  # (b)\n    b,\n)\n')
    (tmp_path / "core" / "sub" / "b.py").write_text("def f():\n    from ..c import x\n")
    (tmp_path / "core" / "c.py").write_text("from segscope.core import a\nx = 1\n")
    (tmp_path / "gui" / "d.py").write_text("from ..core import a\n")
    graph = _imports(tmp_path)
    assert graph["segscope.gui.d"] == {"segscope.core", "segscope.core.a"}
    assert _a_cycle(graph) == ["segscope.core.a", "segscope.core.sub.b", "segscope.core.c", "segscope.core.a"]


def test_backends_remote_cluster_and_the_spec_are_layered() -> None:
    """Each layer imports only those below it: backends, then remote (its worker opens the registry's kinds),
    then cluster (it reaches hosts as remote does), then the spec that composes them."""
    layers = ("segscope.core.backends", "segscope.core.remote", "segscope.core.cluster", "segscope.core.backend_spec")
    graph = _imports(CORE.parent)
    upward = sorted(f"{module} imports {target}" for module, targets in graph.items() for target in targets
                    for low, layer in enumerate(layers) if module.startswith(layer)
                    for high in layers[low + 1:] if target.startswith(high))
    assert upward == []
    assert "segscope.core.backends.registry" in graph["segscope.core.remote.server"]  # the walk sees the layers
    # the registry imports the backends' modules by name when a kind opens: none of them may import it back
    assert [module for module, targets in graph.items() if module.startswith("segscope.core.backends.")
            and module != "segscope.core.backends.registry" and "segscope.core.backends.registry" in targets] == []


#: Ways of starting a thread; in gui/ only the job runner (gui/runtime/jobs.py) may use them.
THREAD_MODULES = ("threading", "_thread", "concurrent.futures")
QT_THREAD_CLASSES = ("QThread", "QThreadPool", "QRunnable")


def _thread_idioms(source: str) -> list[str]:
    """`line: what` for each import of a thread module and each use of Qt's thread classes in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            modules = [node.module or "", *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            modules = []
        found += [f"{node.lineno}: imports {m}" for m in modules if m in THREAD_MODULES]
        names = [alias.name for alias in node.names] if isinstance(node, (ast.Import, ast.ImportFrom)) else \
            [node.attr] if isinstance(node, ast.Attribute) else [node.id] if isinstance(node, ast.Name) else []
        found += [f"{node.lineno}: uses {n}" for n in names if n.split(".")[-1] in QT_THREAD_CLASSES]
    return found


def test_only_the_job_runner_starts_threads_in_the_gui() -> None:
    gui = CORE.parent / "gui"
    offenders = [f"{path.relative_to(gui.parent)}:{idiom}" for path in sorted(gui.rglob("*.py"))
                 if path.name != "jobs.py" for idiom in _thread_idioms(path.read_text(encoding="utf-8"))]
    assert offenders == [], "start work with gui/runtime/jobs.py's runner instead"
    assert _thread_idioms((gui / "runtime" / "jobs.py").read_text(encoding="utf-8"))  # the walk sees the runner's own


def test_the_thread_walk_finds_every_idiom() -> None:
    source = ("import threading\nimport concurrent.futures as cf\nfrom concurrent.futures import Future\n"
              "from concurrent import futures\nfrom PySide6.QtCore import QThread, QObject\n"
              "from PySide6 import QtCore\npool = QtCore.QThreadPool.globalInstance()\n"
              "class Job(QRunnable): pass\nimport json\nfrom .jobs import Jobs\n")
    assert sorted({int(line.split(":")[0]) for line in _thread_idioms(source)}) == [1, 2, 3, 4, 5, 7, 8]


#: gui/'s rooms and the rooms each may import. The views (canvas, editing, docks, dialogs) never import one
#: another: only the shell binds them to each other and to the session's flows.
GUI_ROOMS = {
    "widgets": {"widgets"},
    "runtime": {"runtime", "widgets"},
    **{view: {view, "runtime", "widgets"} for view in ("canvas", "editing", "docks", "dialogs")},
    "shell": {"shell", "canvas", "editing", "docks", "dialogs", "runtime", "widgets"},
}


def _room(module: str) -> str:
    """"shell" for segscope.gui.shell.main_window; "" for a module at gui/'s top (the app's entry)."""
    room = module.split(".")[2]
    return room if room in GUI_ROOMS else ""


def test_gui_rooms_import_only_the_rooms_below_them() -> None:
    graph = _imports(CORE.parent)
    gui = {module: targets for module, targets in graph.items() if module.startswith("segscope.gui.")}
    assert {_room(module) for module in gui} == {"", *GUI_ROOMS}  # every room exists; no module outside them
    crossing = sorted(f"{module} imports {target}" for module, targets in gui.items() if _room(module)
                      for target in targets if target.startswith("segscope.gui.") and _room(target) not in
                      GUI_ROOMS[_room(module)])
    assert crossing == []
    assert "segscope.gui.runtime.jobs" in gui["segscope.gui.canvas.tile_layer"]  # the walk sees the rooms


def test_gui_top_level_stays_navigable() -> None:
    gui = CORE.parent / "gui"
    top = sorted(p.name for p in gui.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists())
    assert len(top) <= 12, top


def test_only_the_shell_holds_the_session() -> None:
    """The binding layer is the one place that holds both the session and widgets: views get what to draw."""
    graph = _imports(CORE.parent)
    holders = sorted(module for module, targets in graph.items() if module.startswith("segscope.gui.")
                     and "segscope.core.session.session" in targets and _room(module) != "shell")
    assert holders == []
    assert "segscope.core.session.session" in graph["segscope.gui.shell.main_window"]
