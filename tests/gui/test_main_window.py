"""The main window end to end: ROI editing by mouse, fields and keys; runs; run-all; cancel; export; errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtTest import QTest

from segscope.core.backends.base import Backend, Capabilities
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.dataset.dataset import Dataset
from segscope.core.errors import BackendError
from segscope.core.files.fileio import read_mask
from segscope.core.metrics.scores import image_metrics, mask_to_labels
from segscope.core.roi import Roi

from .conftest import DEFAULT_ROI, SLIDE_SIZE, RunsSeen, drag, open_and_wait, open_double

pytestmark = pytest.mark.gui


def spins(win) -> tuple[int, ...]:
    return tuple(win.slide.spins[n].value() for n in ("x0", "y0", "x1", "y1"))


def screen_point(win, x: float, y: float) -> QPoint:
    """Where slide pixel (x, y) is on the slide view's viewport."""
    return win.slide.view.mapFromScene(win.slide.vb.mapViewToScene(QPointF(x, y)))


def run_and_wait(qtbot, win, action) -> list:
    runs = RunsSeen(win)
    with qtbot.waitSignal(win.controller.batchFinished, timeout=60000):
        assert action()
    qtbot.waitUntil(lambda: not win.jobs.pending)  # the panels' crops, the re-scoring, the review
    qtbot.waitUntil(lambda: not win.redraws_due())  # the table, means, status bar: drawn at a bounded rate
    return runs.evaluations()


def test_opens_on_the_dataset_with_its_default_roi(window):
    assert window.slide.roi() == DEFAULT_ROI
    assert spins(window) == DEFAULT_ROI.as_tuple()
    assert window.slide.reader.size == SLIDE_SIZE
    assert window.dataset_panel.visible_order() == ["001", "002", "003"]
    assert window.main_actions.run_action.isEnabled()


def test_dragging_the_roi_moves_the_fields_and_saves_it(window, demo_dataset):
    roi = window.slide.roi()
    px, _ = window.slide.vb.viewPixelSize()  # slide pixels per screen pixel
    start = screen_point(window, (roi.x0 + roi.x1) / 2, (roi.y0 + roi.y1) / 2)
    drag(window.slide.view.viewport(), start, start + QPoint(-60, -40))
    moved = window.slide.roi()
    assert moved.width == roi.width and moved.height == roi.height
    assert moved.x0 == pytest.approx(roi.x0 - 60 * px, abs=2 * px + 1)
    assert moved.y0 == pytest.approx(roi.y0 - 40 * px, abs=2 * px + 1)
    assert spins(window) == moved.as_tuple()
    assert Dataset.open(demo_dataset).roi_for(Dataset.open(demo_dataset).item("001")) == moved


def test_dragging_past_the_edge_keeps_the_roi_inside(window):
    roi = window.slide.roi()
    start = screen_point(window, (roi.x0 + roi.x1) / 2, (roi.y0 + roi.y1) / 2)
    drag(window.slide.view.viewport(), start, start + QPoint(900, 900), steps=12)
    moved = window.slide.roi()
    assert moved.fits(*SLIDE_SIZE)
    assert moved.x1 <= SLIDE_SIZE[0] and moved.y1 <= SLIDE_SIZE[1]
    assert (moved.width, moved.height) == (roi.width, roi.height)


def test_resizing_with_the_corner_handle(window):
    roi = window.slide.roi()
    px, _ = window.slide.vb.viewPixelSize()
    start = screen_point(window, roi.x0, roi.y0)  # top-left handle scales about the bottom-right corner
    drag(window.slide.view.viewport(), start, start + QPoint(50, 30))
    resized = window.slide.roi()
    assert (resized.x1, resized.y1) == (roi.x1, roi.y1)
    assert resized.x0 == pytest.approx(roi.x0 + 50 * px, abs=2 * px + 1)
    assert resized.y0 == pytest.approx(roi.y0 + 30 * px, abs=2 * px + 1)
    assert spins(window) == resized.as_tuple()


def test_typing_in_the_fields_moves_the_rectangle(window):
    spin = window.slide.spins["x0"]
    spin.setFocus()
    spin.selectAll()
    QTest.keyClicks(spin, "700")
    QTest.keyClick(spin, Qt.Key.Key_Return)
    assert window.slide.roi_item.pos().x() == 700
    assert window.slide.roi().x0 == 700
    spin = window.slide.spins["y1"]
    spin.setFocus()
    spin.selectAll()
    QTest.keyClicks(spin, "800")
    QTest.keyClick(spin, Qt.Key.Key_Return)
    assert window.slide.roi_item.size().y() == 800 - DEFAULT_ROI.y0
    assert window.slide.roi() == Roi(700, DEFAULT_ROI.y0, DEFAULT_ROI.x1, 800)


def test_arrow_keys_nudge_and_stop_at_the_edge(window):
    window.slide.view.setFocus()
    roi = window.slide.roi()
    QTest.keyClick(window.slide.view, Qt.Key.Key_Left)
    QTest.keyClick(window.slide.view, Qt.Key.Key_Up, Qt.KeyboardModifier.ShiftModifier)
    assert window.slide.roi() == Roi(roi.x0 - 1, roi.y0 - 10, roi.x1 - 1, roi.y1 - 10)
    assert spins(window) == window.slide.roi().as_tuple()
    for _ in range(20):  # the default ROI touches the right edge: it cannot go further
        QTest.keyClick(window.slide.view, Qt.Key.Key_Right, Qt.KeyboardModifier.ShiftModifier)
    assert window.slide.roi().x1 == SLIDE_SIZE[0]


def test_square_lock_and_reset(window, demo_dataset):
    window.main_actions.square_action.trigger()
    roi = window.slide.roi()
    assert roi.width == roi.height == min(DEFAULT_ROI.width, DEFAULT_ROI.height)
    spin = window.slide.spins["x1"]
    spin.setValue(roi.x1 - 100)
    assert window.slide.roi().width == window.slide.roi().height == roi.width - 100
    window.main_actions.reset_roi_action.trigger()
    assert window.slide.roi() == DEFAULT_ROI.clamped(*SLIDE_SIZE)
    assert Dataset.open(demo_dataset).stored_roi(Dataset.open(demo_dataset).item("001")) is None


def test_run_shows_exactly_the_backends_arrays_and_the_core_metric(qtbot, window, demo_dataset,
                                                                   tiny_model_project):
    results = run_and_wait(qtbot, window, window.commands.run_current)
    assert len(results) == 1
    evaluation = results[0]
    result = evaluation.result
    arrays = window.panels.panel_arrays()
    np.testing.assert_array_equal(arrays["heatmap"], result.probabilities[..., 1])
    np.testing.assert_array_equal(arrays["argmax"], result.argmax)
    mask = read_mask(demo_dataset / "001" / "mask.png")
    roi = result.roi
    assert roi == DEFAULT_ROI
    np.testing.assert_array_equal(arrays["truth"], mask_to_labels(mask[roi.y0:roi.y1, roi.x0:roi.x1], 2))

    # The same image through a separate backend gives the same tensors: the GUI shows the stream's output.
    with EmbeddedBackend(tiny_model_project.pipeline) as backend:
        reference = backend.infer(demo_dataset / "001" / "image.png", roi)
    np.testing.assert_allclose(result.probabilities, reference.probabilities, atol=1e-6)
    expected = image_metrics(reference, mask)
    assert f"Soft Dice {expected.soft_dice:.4f}" in window.main_actions.dice_label.text()
    assert f"Dice {expected.foreground_dice:.4f}" in window.main_actions.dice_label.text()
    assert window.metrics_panel.value_labels["soft_dice"].text() == f"{expected.soft_dice:.4f}"
    row = window.dataset_panel.model.row("001")
    assert row.status == "done" and row.metrics.soft_dice == pytest.approx(expected.soft_dice, abs=1e-6)
    # the status bar shows the run's total; the stages are in its tooltip (the full list did not fit)
    total_ms = sum(result.timings.values()) * 1000
    assert window.status_labels.timings_label.text() == f"last run {total_ms:.0f} ms"
    assert f"infer {result.timings['infer'] * 1000:.0f} ms" in window.status_labels.timings_label.toolTip()
    means = window.status_labels.means_label.text()
    assert "mean Soft Dice" in means and "(1 image)" in means


def test_a_viewer_run_reads_the_roi_from_the_open_slide_and_equals_the_file_run(qtbot, window, demo_dataset,
                                                                               tiny_model_project, monkeypatch):
    from segscope.core.backends import embedded

    decodes = []
    real_decode, real_region = embedded.decode_image, embedded.image_region  # a file decoded whole, or its ROI
    monkeypatch.setattr(embedded, "decode_image", lambda *a, **k: decodes.append(a[1]) or real_decode(*a, **k))
    monkeypatch.setattr(embedded, "image_region", lambda *a, **k: decodes.append(a[1]) or real_region(*a, **k))
    mask_reads = []
    real_load_mask = Dataset.load_mask
    monkeypatch.setattr(Dataset, "load_mask",
                        lambda self, item: mask_reads.append(item.id) or real_load_mask(self, item))
    roi = Roi(333, 101, 911, 650)
    window.slide.set_roi(roi)
    window.slide.roiChanged.emit(window.slide.roi())
    evaluation = run_and_wait(qtbot, window, window.commands.run_current)[0]
    result = evaluation.result
    assert decodes == []  # the viewer's open slide gave the pixels: no file decoded for the run
    assert mask_reads == []  # and the mask it holds scored it: the mask file was not read again
    expected = image_metrics(result, read_mask(demo_dataset / "001" / "mask.png"))
    assert evaluation.metrics.soft_dice == expected.soft_dice
    assert evaluation.metrics.foreground_dice == expected.foreground_dice
    with EmbeddedBackend(tiny_model_project.pipeline) as backend:
        reference = backend.infer(demo_dataset / "001" / "image.png", roi)
    assert decodes == [str(demo_dataset / "001" / "image.png")]  # the reference run did read the file
    assert (result.roi, result.image_size) == (reference.roi, reference.image_size) == (roi, SLIDE_SIZE)
    np.testing.assert_array_equal(result.probabilities, reference.probabilities)
    np.testing.assert_array_equal(result.argmax, reference.argmax)


def test_roi_change_then_run_uses_the_new_roi(qtbot, window):
    window.slide.set_roi(Roi(100, 50, 500, 450))
    window.slide.roiChanged.emit(window.slide.roi())
    results = run_and_wait(qtbot, window, window.commands.run_current)
    assert results[0].result.roi == Roi(100, 50, 500, 450)
    assert window.panels.panel_arrays()["truth"].shape == (400, 400)


def test_run_all_fills_the_table_and_worst_first_sorts(qtbot, window):
    results = run_and_wait(qtbot, window, window.commands.run_all)
    assert [e.item.id for e in results] == ["001", "002", "003"]
    rows = window.dataset_panel.model.rows
    assert all(r.status == "done" and r.metrics is not None for r in rows)
    window.main_actions.worst_action.trigger()  # by the default ranking: the foreground Dice
    order = window.dataset_panel.visible_order()
    dice = {e.item.id: e.metrics.foreground_dice for e in results}
    assert order == sorted(dice, key=dice.get)
    assert window.dataset_panel.current_item() == order[0]
    soft = np.mean([e.metrics.soft_dice for e in results])
    assert f"mean Soft Dice {soft:.4f} · Dice {np.mean(list(dice.values())):.4f}" in \
        window.status_labels.means_label.text()
    assert not window.main_actions.progress_action.isVisible()


def test_cancel_stops_run_all(qtbot, window, monkeypatch):
    from segscope.core.session import running

    evaluate = running.evaluate_dataset

    def user_cancels_after_the_first(*args, cancel, **kwargs):  # (not after the last: a tiny model is that fast)
        for evaluation in evaluate(*args, cancel=cancel, **kwargs):
            yield evaluation
            cancel.wait(30)

    monkeypatch.setattr(running, "evaluate_dataset", user_cancels_after_the_first)
    finished = []
    window.controller.batchFinished.connect(lambda *a: finished.append(a))
    window.session.events.result_added.connect(lambda _added: window.main_actions.cancel_action.trigger())
    assert window.commands.run_all()
    assert window.main_actions.cancel_action.isEnabled()
    qtbot.waitUntil(lambda: bool(finished), timeout=60000)
    done, failed, cancelled = finished[0]
    assert cancelled and failed == 0 and done == 1
    statuses = [r.status for r in window.dataset_panel.model.rows]
    assert statuses.count("done") == done and "cancelled" in statuses
    assert not window.controller.busy and window.main_actions.run_all_action.isEnabled()


def test_export_writes_files_and_never_overwrites_silently(qtbot, window, tmp_path):
    from segscope.gui.dialogs.export_dialog import ExportChoices

    run_and_wait(qtbot, window, window.commands.run_all)
    out = tmp_path / "export"
    choices = ExportChoices(kinds=("mask", "softmax"), metrics=True, folder=out, scope="all",
                            item_ids=("001", "002", "003"), overwrite=False)
    with qtbot.waitSignal(window.exporter.finished, timeout=30000) as exported:
        assert window.commands.write_export(choices)  # written on a worker
    written = exported.args[0]
    assert sorted(p.name for p in written) == sorted(
        [f"{i}_{k}" for i in ("001", "002", "003") for k in ("mask.png", "softmax.npy", "provenance.json")]
        + ["metrics.csv", "metrics.json"])
    softmax = np.load(out / "002_softmax.npy")
    np.testing.assert_array_equal(softmax, window.session.result("002").probabilities)
    summary = json.loads((out / "metrics.json").read_text())["summary"]
    dice = [window.session.metrics(i).soft_dice for i in ("001", "002", "003")]
    assert summary["soft_dice"] == pytest.approx(np.mean(dice))
    before = (out / "001_mask.png").stat().st_mtime_ns
    with qtbot.waitSignal(window.exporter.finished, timeout=30000) as exported:
        assert window.commands.write_export(choices)
    assert exported.args[0] == []
    assert "already exists" in window.messages.errors()[-1].text
    assert (out / "001_mask.png").stat().st_mtime_ns == before


class FailingBackend(Backend):
    """A backend whose stream fails on every image, as a broken SDK or a dropped host would."""

    capabilities = Capabilities("failing", "nowhere", (960, 960), ("background", "defect"))

    def infer(self, image, roi=None):
        raise BackendError("mxpi_tensorinfer0: SendData returned 1001 (test double): check the model path")

    def close(self) -> None:
        pass


def test_a_backend_error_goes_to_the_message_area_and_the_app_keeps_working(qtbot, window, tiny_model_project):
    open_double(qtbot, window, FailingBackend)
    finished = []
    window.controller.batchFinished.connect(lambda *a: finished.append(a))
    assert window.commands.run_all()
    qtbot.waitUntil(lambda: bool(finished), timeout=30000)
    assert finished[0] == (0, 3, False)  # every image reported, the batch went on after each failure
    errors = window.messages.errors()
    assert len(errors) == 3 and "SendData returned 1001" in errors[0].text
    assert window.messages_dock.isVisible()
    assert window.dataset_panel.model.row("002").status == "error"
    window.messages.list.setCurrentRow(window.messages.messages.index(errors[1]))
    details = window.messages.details.toPlainText()  # the user's words, not a class name ("BackendError:")
    assert "SendData returned 1001" in details and "Error:" not in details

    from segscope.core.backend_choice import BackendChoice

    with qtbot.waitSignal(window.controller.backendOpened, timeout=10000):
        window.commands.open_backend(BackendChoice(pipeline=tiny_model_project.pipeline))
    results = run_and_wait(qtbot, window, window.commands.run_current)
    assert results and window.dataset_panel.model.row("001").status == "done"


def test_a_bad_dataset_or_unreadable_slide_is_a_message(qtbot, window, tmp_path):
    open_and_wait(qtbot, window, tmp_path / "missing")
    assert "dataset folder not found" in window.messages.errors()[-1].text
    assert window.dataset is not None  # the open dataset is kept
    broken = tmp_path / "broken"
    (broken / "a").mkdir(parents=True)
    (broken / "a" / "image.png").write_bytes(b"not a png")
    open_and_wait(qtbot, window, broken)
    qtbot.waitUntil(
        lambda: bool(window.messages.errors()) and "no slide reader reads" in window.messages.errors()[-1].text
    )
    assert window.dataset_panel.model.row("a").status == "unreadable"
    assert not window.main_actions.run_action.isEnabled()


def test_the_end_of_run_all_is_drawn_at_once(qtbot, window):
    """When the batch ends, every view that draws at a bounded rate draws its last results at once (not at the end
    of its interval): the histogram counts all three images, the status bar's means are of all three."""
    window.metrics_dock.show()
    runs = RunsSeen(window)
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_all()
    assert not window.redraws_due()
    heights, _edges = window.metrics_panel.histogram()
    assert heights.sum() == len(runs.added) == 3
    assert window.status_labels.means_label.text().endswith("(3 images)")


def test_run_all_goes_past_unreadable_images_and_no_view_stays_loading(qtbot, window, demo_dataset, tmp_path):
    folder = tmp_path / "mixed"
    for name in ("001", "002", "003"):
        (folder / name).mkdir(parents=True)
    (folder / "001" / "image.png").write_bytes(np.random.default_rng(0).bytes(5000))  # random bytes
    png = (demo_dataset / "003" / "image.png").read_bytes()
    (folder / "002" / "image.png").write_bytes(png[: len(png) // 3])  # truncated
    (folder / "003" / "image.png").write_bytes(png)
    assert window.commands.open_dataset(folder)
    qtbot.waitUntil(lambda: window.dataset_panel.model.row("001").status == "unreadable")
    assert "cannot be opened" in window.slide.notice.text() and "Loading" not in window.panels.notice.text()
    qtbot.waitUntil(lambda: not window.jobs.busy("restore"))  # ("Opened …: 3 images" said before the run's summary)
    results = run_and_wait(qtbot, window, window.commands.run_all)  # the unreadable first image stops nothing
    assert [r.item.id for r in results] == ["003"]
    rows = {i: window.dataset_panel.model.row(i) for i in ("001", "002", "003")}
    assert [rows[i].status for i in ("001", "002")] == ["error", "error"] and rows["003"].status.startswith("done")
    assert "no slide reader reads this file" in rows["001"].error and "002" in rows["002"].error
    assert "\n" not in rows["002"].error  # one line each
    assert "1 done, 2 failed" in window.messages.messages[-1].text


def test_shortcuts_are_unique_listed_and_bound(window):
    from segscope.gui.widgets.shortcuts import SHORTCUTS, ShortcutsDialog

    keys = [k for k, _ in SHORTCUTS]
    assert len(keys) == len(set(keys))
    bound = {a.shortcut().toString() for a in window.actions() if not a.shortcut().isEmpty()}
    assert bound <= set(keys)
    assert {"Ctrl+R", "Ctrl+Shift+R", "Ctrl+O", "Ctrl+E", "F1"} <= bound
    dialog = ShortcutsDialog(window)
    assert dialog.table.rowCount() == len(SHORTCUTS)
    assert all(a.toolTip().endswith(f"({a.shortcut().toString()})") for a in window.actions()
               if not a.shortcut().isEmpty())


def test_ctrl_r_runs_the_current_image(qtbot, window):
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        QTest.keyClick(window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    assert window.dataset_panel.model.row("001").status == "done"


def test_layout_and_recent_list_are_remembered(qtbot, window, demo_dataset):
    from segscope.gui.runtime import settings
    from segscope.gui.shell.main_window import MainWindow

    assert settings.recent_datasets()[0] == demo_dataset.resolve()
    not_one = demo_dataset.parent / "notes"  # a folder that does not open as a dataset is not remembered
    not_one.mkdir()
    (not_one / "README.md").write_text("# notes\n", encoding="utf-8")
    open_and_wait(qtbot, window, not_one)
    assert settings.recent_datasets() == [demo_dataset.resolve()]
    settings.add_recent_dataset(not_one)  # one remembered before (it held images then) is forgotten when it fails
    open_and_wait(qtbot, window, not_one)
    assert settings.recent_datasets() == [demo_dataset.resolve()] and window.dataset.root == demo_dataset.resolve()
    assert "no images found (it is a folder with no images" in window.messages.errors()[-1].text
    window.metrics_dock.hide()
    window.close()
    again = MainWindow()
    qtbot.addWidget(again)
    again.show()
    assert not again.metrics_dock.isVisible() and again.dataset_dock.isVisible()
    again.close()


def test_dropping_a_folder_opens_it(qtbot, window, demo_dataset, tmp_path):
    import shutil

    from PySide6.QtCore import QMimeData, QUrl
    from PySide6.QtGui import QDropEvent

    other = tmp_path / "other"
    shutil.copytree(demo_dataset, other)
    shutil.rmtree(other / "003")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(other))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                       Qt.KeyboardModifier.NoModifier)
    window.dataset_panel.dropEvent(event)
    qtbot.waitUntil(lambda: window.dataset.root == other.resolve())
    assert window.dataset_panel.visible_order() == ["001", "002"]
    qtbot.waitUntil(window.slide_ready)


def test_a_newer_open_supersedes_one_still_listing(qtbot, window, demo_dataset, tmp_path):
    """Two folders asked one after the other before either is listed: only the newer is ever shown (its listing
    on a worker answers; the older one's is dropped), and the status bar said an open was under way."""
    import shutil

    other = tmp_path / "other"
    shutil.copytree(demo_dataset, other)
    shutil.rmtree(other / "003")
    shown = []
    window.session.events.dataset.connect(lambda dataset, _old: shown.append(dataset.root))
    assert window.commands.open_dataset(other)
    assert window.statusBar().currentMessage() == f"Opening {other}…"
    open_and_wait(qtbot, window, demo_dataset)
    assert shown == [demo_dataset.resolve()] and window.dataset_panel.visible_order() == ["001", "002", "003"]


def test_run_all_on_two_devices_gives_the_same_metrics_and_counts_per_device(qtbot, window, tiny_model_project):
    from segscope.core.backend_choice import BackendChoice

    plain = {e.item.id: e.metrics for e in run_and_wait(qtbot, window, window.commands.run_all)}
    window.commands.open_backend(BackendChoice(pipeline=tiny_model_project.pipeline, devices="0,1"))
    qtbot.waitUntil(lambda: window.capabilities is not None, timeout=30000)
    assert window.capabilities.device.startswith("2 devices (session 0, session 1)")
    pooled = {e.item.id: e.metrics for e in run_and_wait(qtbot, window, window.commands.run_all)}
    assert pooled == plain  # the same images, the same numbers, whichever device ran each
    counts = dict(c.split(": ") for c in window.status_labels.usage_label.text().split(" · "))
    assert set(counts) == {"session 0", "session 1"}  # "session 0: 2 images · session 1: 1 image(s)"
    assert sum(int(text.split()[0]) for text in counts.values()) == 3


def test_run_all_on_a_cluster_gives_the_same_metrics_and_counts_per_worker(qtbot, window, tiny_model_project):
    distributed = pytest.importorskip("distributed")
    from segscope.core.backend_choice import BackendChoice

    plain = {e.item.id: e.metrics for e in run_and_wait(qtbot, window, window.commands.run_all)}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                                  protocol="tcp", host="127.0.0.1") as cluster:
        window.commands.open_backend(BackendChoice(pipeline=tiny_model_project.pipeline,
                                                   cluster=cluster.scheduler_address))
        qtbot.waitUntil(lambda: window.capabilities is not None, timeout=60000)
        assert window.capabilities.details["cluster"] == cluster.scheduler_address
        clustered = {e.item.id: e.metrics for e in run_and_wait(qtbot, window, window.commands.run_all)}
        counts = dict(c.split(": ") for c in window.status_labels.usage_label.text().split(" · "))
        assert all(name.startswith("worker ") for name in counts)  # per worker: "worker 0: 2 images"
        assert sum(int(text.split()[0]) for text in counts.values()) == 3
        window.commands.open_backend(BackendChoice(pipeline=tiny_model_project.pipeline))  # closed before the cluster
        qtbot.waitUntil(lambda: window.capabilities is not None, timeout=60000)
    assert clustered == plain
    assert window.status_labels.usage_label.text() == ""  # a new backend: no counts yet


def test_a_stream_without_a_crop_gets_the_viewers_roi_cropped_before_it(qtbot, window, tiny_model_project,
                                                                         demo_dataset):
    """The viewer's ROI is the point: with a crop-less stream SegScope crops it before the stream (the shown
    slide and the others of Run all alike), and the messages say so."""
    from segscope.core.backend_choice import BackendChoice
    from segscope.core.backends.embedded import EmbeddedBackend
    from segscope.core.files.fileio import read_image
    from segscope.core.stream.input import PRE_CROP_NOTE

    def no_crop(data: dict) -> None:
        stream = data["unet_mindspore"]
        del stream["mxpi_imagecrop0"]
        stream["mxpi_imagedecoder0"]["next"] = "mxpi_imageresize0"

    pipeline = tiny_model_project.write_pipeline("no_crop.pipeline", no_crop)
    with qtbot.waitSignal(window.controller.backendOpened, timeout=10000):
        window.commands.open_backend(BackendChoice(pipeline=pipeline))
    results = run_and_wait(qtbot, window, window.commands.run_all)
    assert [e.result.roi for e in results] == [DEFAULT_ROI] * 3
    assert all(e.result.roi_note == PRE_CROP_NOTE for e in results)
    assert sum(PRE_CROP_NOTE in m.text for m in window.messages.messages) == 1  # said once for the batch
    image = read_image(demo_dataset / "002" / "image.png")
    roi = DEFAULT_ROI
    with EmbeddedBackend(pipeline) as backend:  # the ROI's pixels as the stream's whole image
        expected = backend.infer(np.ascontiguousarray(image[roi.y0:roi.y1, roi.x0:roi.x1]))
    np.testing.assert_array_equal(results[1].result.probabilities, expected.probabilities)


def test_a_first_start_shows_metrics_and_messages_with_review_and_timing_a_tab_away(qtbot, window):
    from segscope.gui.widgets.docking import dock_seen

    review, timing = window.inspection.review_dock, window.inspection.timing_dock
    qtbot.waitUntil(lambda: dock_seen(window.metrics_dock) and dock_seen(window.messages_dock), timeout=5000)
    assert not dock_seen(review) and not dock_seen(timing)
    assert review in window.tabifiedDockWidgets(window.metrics_dock)
    assert timing in window.tabifiedDockWidgets(window.messages_dock)
    timing.raise_()  # the user picks another tab; View > Reset layout brings the first layout back
    qtbot.waitUntil(lambda: dock_seen(timing))
    window.dock_layout.reset()
    qtbot.waitUntil(lambda: dock_seen(window.messages_dock) and not dock_seen(timing))


def test_a_message_takes_width_from_the_least_needed_status_label_first(qtbot):
    """At 1280 px a message cut all three labels at once (each to a stub): now the devices' use and the timings
    give their width up first, and the dataset means stay whole while the others can make the room."""
    from PySide6.QtWidgets import QMainWindow

    from segscope.gui.shell.status_labels import StatusLabels

    main = QMainWindow()
    qtbot.addWidget(main)
    labels = StatusLabels(main.statusBar())
    main.resize(1280, 800)
    main.show()
    labels.usage_label.setText("device 0: 12 images, 1.2 s · device 1: 11 images, 1.1 s")
    labels.timings_label.setText("last run 1226 ms")
    labels.means_label.setText("mean Soft Dice 0.9993 · Dice 0.9157 · IoU 0.8482 (3 images)")
    labels.backend_label.setText("embedded · CPU (ONNX Runtime 1.32.0, 2 threads)")
    qtbot.waitUntil(lambda: all(label.isVisible() for label in labels.labels) and main.statusBar().width() == 1280)
    main.statusBar().showMessage("x" * 60)  # a note that needs some of their width (made room for at once)
    means, usage = labels.means_label, labels.usage_label
    assert means.maximumWidth() >= means.sizeHint().width()  # whole
    assert usage.maximumWidth() < usage.sizeHint().width()  # the first to give width up
