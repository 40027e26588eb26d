"""`segscope` with no subcommand: the demo dataset is generated once into the per-user folder and opened."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from segscope.gui import app as app_module
from segscope.gui.shell.main_window import MainWindow

pytestmark = pytest.mark.gui


def test_demo_dataset_is_generated_once(qapp, tmp_path, monkeypatch):
    monkeypatch.setattr(app_module, "DEMO_COUNT", 1)
    target = tmp_path / "data" / "demo"
    assert app_module.ensure_demo_dataset(target) == target
    image = target / "001" / "image.png"
    assert image.is_file() and (target / "001" / "mask.png").is_file()
    assert [p.name for p in target.parent.iterdir()] == ["demo"]  # no staging folder left behind
    stamp = image.stat().st_mtime_ns
    app_module.ensure_demo_dataset(target)
    assert image.stat().st_mtime_ns == stamp


def test_main_opens_the_demo_dataset(qapp, tmp_path, monkeypatch):
    monkeypatch.setattr(app_module, "DEMO_COUNT", 1)
    monkeypatch.setattr(app_module, "demo_dir", lambda: tmp_path / "demo")
    seen = {}

    def check() -> None:
        windows = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]
        if windows and windows[0].dataset is not None and windows[0].slide_ready():
            seen["root"] = windows[0].dataset.root
            seen["style"] = qapp.style().name()
            windows[0].close()
        else:
            QTimer.singleShot(50, check)

    QTimer.singleShot(0, check)
    assert app_module.main([]) == 0
    assert seen["root"] == (tmp_path / "demo").resolve()
    assert seen["style"].lower() == "fusion"
