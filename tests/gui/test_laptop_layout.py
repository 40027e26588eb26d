"""Issue 43 at 1280x800 (a laptop's screen) with the dark theme: the Export dialog as File > Export opens it over
the window after a run and a whole-slide run, and the docks the issue names, checked by layout facts (what is
shown lies inside its window, no text is cut where it must show whole, size hints fit the screen), not pixels.
The whole window and each tabbed dock are checked at 1280x800, 1920x1080 and 1177x774 by
test_screenshot.test_the_window_fits_the_screen_and_nothing_in_it_is_cut."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QApplication, QWidget

from .screenshot import clipped_texts, clipped_widgets, settle
from .test_session_views import run_current

pytestmark = pytest.mark.gui

SCREEN = (1280, 800)


def inside(widget: QWidget, window: QWidget) -> bool:
    """Whether `widget`'s whole rectangle lies inside `window`'s."""
    return window.rect().contains(QRect(widget.mapTo(window, QPoint(0, 0)), widget.size()))


@pytest.fixture
def laptop(qapp, qtbot, demo_dataset, tiny_model_project):
    """The window at 1280x800 from the start, in the dark theme, on the demo dataset with the tiny model."""
    from segscope.gui.app import apply_dark_theme
    from segscope.gui.dialogs.backend_dialog import BackendChoice
    from segscope.gui.shell.main_window import MainWindow

    apply_dark_theme(QApplication.instance())
    window = MainWindow()
    qtbot.addWidget(window)
    window.resize(*SCREEN)
    window.show()
    window.commands.open_backend(BackendChoice(pipeline=tiny_model_project.pipeline))
    assert window.commands.open_dataset(demo_dataset)
    qtbot.waitUntil(lambda: window.capabilities is not None and window.slide_ready(), timeout=30000)
    settle(qapp)
    yield window
    window.close()


def test_the_export_dialog_shows_every_line_whole_on_a_laptop_screen(qapp, qtbot, laptop, tmp_path):
    from segscope.core.export.job import Exportable
    from segscope.gui.dialogs.export_dialog import ExportDialog

    window = laptop
    run_current(qtbot, window)
    with qtbot.waitSignal(window.controller.batchFinished, timeout=120000):
        assert window.commands.run_whole_slide()
    dialog = ExportDialog(Exportable(window.session, window.capabilities), window)  # as File > Export makes it
    qtbot.addWidget(dialog)
    dialog.folder_edit.setText(str(tmp_path / "out"))
    dialog.show()
    for runs in (dialog.roi_runs_button, dialog.slide_runs_button):
        runs.setChecked(True)
        for box in dialog.kind_boxes.values():
            box.setChecked(box.isEnabled())
        settle(qapp)
        hint = dialog.sizeHint()
        assert hint.width() <= SCREEN[0] and hint.height() <= SCREEN[1], (runs.text(), hint)
        assert dialog.width() <= SCREEN[0] and dialog.height() <= SCREEN[1]
        for kind, details in dialog.kind_details.items():  # the second line: format, size, estimate
            assert details.text() and details.isVisible() and inside(details, dialog), kind
            assert details.height() >= details.fontMetrics().height(), (kind, details.height())  # not cut top/bottom
        assert dialog.estimate.text().startswith("Estimated size: ") and inside(dialog.estimate, dialog)
        assert clipped_texts(dialog) == [] and clipped_widgets(dialog) == [], runs.text()
    dialog.close()


def test_the_docks_the_issue_names_fit_a_laptop_screen(qapp, qtbot, laptop):
    window = laptop
    window.quality_tools.set_spec("all", remember=False)  # every QA metric: the Metrics dock at its tallest
    run_current(qtbot, window)
    qtbot.waitUntil(lambda: window.metrics_panel.value_labels["brier"].isVisible() or
                    not window.metrics_dock.isVisible(), timeout=20000)
    docks = {"Defects": window.quality_tools.defects_dock, "Profile": window.profile_dock,
             "Timing": window.inspection.timing_dock, "Metrics": window.metrics_dock}
    for title, dock in docks.items():
        dock.show()
        dock.raise_()
        settle(qapp)
        assert dock.isVisible() and inside(dock, window), title
        assert clipped_texts(window) == [] and clipped_widgets(window) == [], title
    # the Metrics histogram's axis shows without scrolling, with every QA metric listed above it
    plot = window.metrics_panel.plot
    assert plot.isVisible() and inside(plot, window.metrics_dock)
    assert window.metrics_panel.value_labels["brier"].isVisibleTo(window.metrics_panel)
    # the ROI's four fields show beside the slide, none behind the bar's » button
    bar = window.slide.controls
    assert all(spin.isVisible() and bar.rect().contains(spin.geometry()) for spin in window.slide.spins.values())
    # the status bar's permanent labels are whole (cut only with "…" and whole on hover: clipped_texts) and
    # inside the window
    for label in window.statusBar().findChildren(QWidget):
        if label.isVisible() and label.parentWidget() is window.statusBar():
            assert inside(label, window), label


def test_a_status_note_stays_whole_when_the_labels_grow_and_a_longer_one_is_cut_in_the_middle(qapp, qtbot):
    """A note shown before a run (the slide's path) was pushed under the labels the run filled (timings, means):
    they give up their width for it again; a note wider than all they can give is cut in the middle with "…"."""
    from PySide6.QtWidgets import QMainWindow

    from segscope.gui.shell.status_labels import StatusLabels

    window = QMainWindow()
    qtbot.addWidget(window)
    bar = window.statusBar()
    labels = StatusLabels(bar)
    window.resize(*SCREEN)
    window.show()
    settle(qapp)
    labels.backend_label.setText("embedded · CPU (ONNX Runtime 1.32.0, 2 threads)")
    labels.timings_label.setText("last run 166 ms")
    path = "/home/someone/data/slides/batch-2026-12/scanner-3/001/image.png  1200 x 900"  # 77 characters
    labels.note(path, 4000)
    labels.show_means({"images_with_masks": 3, "soft_dice": 0.6717, "foreground_dice": 0.3053,
                       "foreground_iou": 0.2770})
    settle(qapp)
    assert bar.currentMessage() == path
    assert clipped_texts(window) == []  # the message is whole left of the labels (they are cut with "…")
    assert any(label.text() and label.width() < label.sizeHint().width() for label in labels.labels)
    long_note = "/very/long/" + "folder/" * 60 + "image.png"
    labels.note(long_note)
    settle(qapp)
    shown = bar.currentMessage()
    assert shown != long_note and "…" in shown and shown.startswith("/very/long/") and shown.endswith("image.png")
    assert clipped_texts(window) == []


def test_before_the_first_run_the_previewed_truth_and_its_hint_fit_a_laptop_screen(qapp, qtbot, laptop):
    window = laptop
    panels = window.panels
    qtbot.waitUntil(lambda: panels.preview is not None, timeout=10000)
    settle(qapp)
    assert panels.notice.isVisible() and inside(panels.notice, panels.graphics)
    assert panels.notice.height() >= panels.notice.heightForWidth(panels.notice.width())  # every line shows
    assert clipped_texts(window) == [] and clipped_widgets(window) == []
