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
    listed = set(re.findall(r'"(segscope(?:\.\w+)+)"', re.search(r"^packages = \[(.*)\]$", text, re.M).group(1)))
    folders = {"segscope." + ".".join(p.parent.relative_to(root).parts)
               for top in ("core", "gui", "models", "pipelines", "resources")
               for p in (root / top).rglob("__init__.py")}
    mapped = set(re.findall(r'"(segscope(?:\.\w+)+)" = "', text))
    assert folders - listed == set()
    assert folders - mapped == set()
