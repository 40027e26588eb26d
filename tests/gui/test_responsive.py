"""Every long action returns to the event loop while its work runs: its work is held at a gate on its worker,
and a call queued to the GUI thread meanwhile still runs (the window paints, takes input, shows progress).
No timings: the benchmark (bench/bench_heartbeat.py) measures how late the event loop is."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QMessageBox

pytestmark = pytest.mark.gui


class Gate:
    """Wraps a function so each call waits until `open()`; `entered` is set once a call waits."""

    def __init__(self) -> None:
        self.entered, self.opened = threading.Event(), threading.Event()

    def wrap(self, fn: Callable) -> Callable:
        def gated(*args, **kwargs):
            self.entered.set()
            assert self.opened.wait(30), "the gate was never opened"
            return fn(*args, **kwargs)
        return gated

    def check_and_open(self, qtbot) -> None:
        """The work is held on its worker, and the event loop still turns; then let it go on."""
        assert self.entered.wait(30), "the work never reached its worker"
        turned = []
        QTimer.singleShot(0, lambda: turned.append(True))
        qtbot.waitUntil(lambda: bool(turned), timeout=5000)
        self.opened.set()


def test_long_actions_return_to_the_event_loop_while_their_work_runs(qtbot, window, demo_dataset, tmp_path,
                                                                       tiny_model_project, monkeypatch):
    from segscope.core.backend_choice import BackendChoice
    from segscope.core.dataset import dataset as dataset_module
    from segscope.core.editing import document as mask_document
    from segscope.core.export.files import ExportFolder
    from segscope.core.session import running
    from segscope.core.session.store import SessionStore
    from segscope.gui.dialogs.export_dialog import ExportChoices
    from segscope.gui.shell.commands import OPENING
    from segscope.gui.shell.main_window import MainWindow

    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.StandardButton.Discard))
    gate = Gate()  # Run all: the evaluation waits on the inference thread
    monkeypatch.setattr(running, "evaluate_dataset", gate.wrap(running.evaluate_dataset))
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_all()
        gate.check_and_open(qtbot)
    qtbot.waitUntil(lambda: window.editing.shown_result() is not None and not window.jobs.pending)

    gate = Gate()  # Save: the mask is encoded and written on a worker
    monkeypatch.setattr(mask_document, "save_mask", gate.wrap(mask_document.save_mask))
    window.editing.accept_prediction(None)
    with qtbot.waitSignal(window.editing.saved, timeout=30000):
        assert window.editing.save()
        assert window.editing.document.saving and not window.editing.actions.save_action.isEnabled()
        gate.check_and_open(qtbot)

    gate = Gate()  # Export: one image per step on a worker
    monkeypatch.setattr(ExportFolder, "export_result", gate.wrap(ExportFolder.export_result))
    choices = ExportChoices(("mask",), True, tmp_path / "out", "all", ("001", "002", "003"), False)
    with qtbot.waitSignal(window.exporter.finished, timeout=30000) as exported:
        assert window.commands.write_export(choices)
        gate.check_and_open(qtbot)
    assert len(exported.args[0]) == 3 * 2 + 2  # masks and sidecars, then the metrics table

    gate = Gate()  # Run whole slide: tiles and stitching on the inference thread
    monkeypatch.setattr(running, "evaluate_slide", gate.wrap(running.evaluate_slide))
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_whole_slide()
        gate.check_and_open(qtbot)
    qtbot.waitUntil(lambda: window.slide.overlay.pyramid is not None)
    window.close()

    listing = Gate()  # Opening: the folder is listed on a worker, the table shown once it is
    monkeypatch.setattr(dataset_module, "discover", listing.wrap(dataset_module.discover))
    gate = Gate()  # Reopening: the stored runs are read and re-scored on a worker, then taken one by one
    monkeypatch.setattr(SessionStore, "results", gate.wrap(SessionStore.results))
    again = MainWindow()
    qtbot.addWidget(again)
    again.commands.open_backend(BackendChoice(pipeline=tiny_model_project.pipeline))
    assert again.commands.open_dataset(demo_dataset)
    assert again.session.dataset is None and again.jobs.busy(OPENING)  # nothing shown before it is listed
    listing.check_and_open(qtbot)
    qtbot.waitUntil(lambda: again.dataset_panel.visible_order() == ["001", "002", "003"], timeout=30000)
    qtbot.waitUntil(again.slide_ready, timeout=30000)  # (the jobs over all the images start once it shows)
    gate.check_and_open(qtbot)
    qtbot.waitUntil(lambda: len(again.session.result_ids) == 3 and again.session.slide_run_of("001") is not None,
                    timeout=30000)
    again.close()
