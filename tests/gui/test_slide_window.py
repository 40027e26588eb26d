"""The main window on a pyramidal TIFF: opened without reading full resolution, a run of the ROI read from
the open reader equals a run of the same pixels from a PNG file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.roi import Roi
from segscope.core.slides.synthetic import write_pyramidal_tiff

from .conftest import RunsSeen
from .test_slide_view import CountingReader

pytestmark = pytest.mark.gui

SIZE = (3000, 2000)


@pytest.fixture
def tiff_window(qtbot, tmp_path: Path, tiny_model_project, monkeypatch):
    from segscope.core.backend_choice import BackendChoice
    from segscope.gui.runtime import slide_loader
    from segscope.gui.shell.main_window import MainWindow

    readers: list[CountingReader] = []
    real_open = slide_loader.open_slide
    monkeypatch.setattr(slide_loader, "open_slide", lambda *a: readers.append(CountingReader(real_open(*a)))
                        or readers[-1])
    (tmp_path / "ds" / "a").mkdir(parents=True)
    write_pyramidal_tiff(tmp_path / "ds" / "a" / "image.tif", SIZE, tile=256, compression="zlib", seed=5)
    win = MainWindow()
    qtbot.addWidget(win)
    win.resize(1400, 900)
    win.show()
    win.commands.open_backend(BackendChoice(pipeline=tiny_model_project.pipeline))
    assert win.commands.open_dataset(tmp_path / "ds")
    qtbot.waitUntil(lambda: win.capabilities is not None and win.slide_ready(), timeout=30000)
    yield win, readers
    win.close()


def test_a_pyramidal_tiff_opens_on_its_levels_and_runs_from_the_open_reader(qtbot, tiff_window, tmp_path,
                                                                               tiny_model_project, monkeypatch):
    from segscope.core.backends import embedded

    decodes = []
    real_decode = embedded.decode_image
    monkeypatch.setattr(embedded, "decode_image", lambda *a, **k: decodes.append(a[1]) or real_decode(*a, **k))
    window, readers = tiff_window
    reader = readers[-1]
    assert reader.inner.kind == "tiff" and len(reader.levels) > 1
    window.slide._update_detail()
    qtbot.waitUntil(lambda: set(window.slide.tiles.wanted) <= set(window.slide.tiles.shown), timeout=10000)
    assert reader.area(0) == 0  # fitted, nothing of full resolution is read

    roi = Roi(1210, 640, 1730, 1100)
    window.slide.set_roi(roi)
    window.slide.roiChanged.emit(window.slide.roi())
    runs = RunsSeen(window)
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_current()
    results = runs.evaluations()
    result = results[0].result
    assert decodes == []  # no file decoded for the run
    # the ROI: read for the preview of its truth before the run (at full resolution: it is near the preview's
    # size), for the run and for the panels
    assert reader.area(0) <= 3 * roi.width * roi.height

    png = tmp_path / "level0.png"  # the same pixels as a file, run the ordinary way
    assert cv2.imwrite(str(png), reader.inner.read_region(0, 0, 0, *SIZE))
    with EmbeddedBackend(tiny_model_project.pipeline) as backend:
        reference = backend.infer(png, roi)
    assert (result.roi, result.image_size) == (reference.roi, reference.image_size) == (roi, SIZE)
    np.testing.assert_array_equal(result.probabilities, reference.probabilities)
    qtbot.waitUntil(lambda: window.panels.result is result)  # the crops are made on a worker, then drawn
    np.testing.assert_array_equal(window.panels.panel_arrays()["argmax"], reference.argmax)


def test_run_whole_slide_stitches_from_the_open_reader_and_any_roi_shows_its_part(qtbot, tiff_window,
                                                                                    tiny_model_project, tmp_path):
    from segscope.core.slides import open_slide
    from segscope.core.wholeslide.evaluate import TilePlan, run_tiled

    window, readers = tiff_window
    reader = readers[-1]
    del reader.reads[:]
    heatmap_action = window.main_actions.slide_heatmap_action
    assert not heatmap_action.isChecked() and not heatmap_action.isEnabled()  # nothing to show before a run
    assert not window.main_actions.export_action.isEnabled()
    with qtbot.waitSignal(window.controller.batchFinished, timeout=120000) as finished:
        assert window.commands.run_whole_slide()
    assert finished.args == [1, 0, False]
    run = window.session.slide_run_of("a")
    # 1800 px tiles overlapping by 480 px over 3000 x 2000 widened by their 240 px margins (mirrored past the
    # slide): x at -240, 1080 and 1440 (flush with 3240), y at -240 and 440 (flush with 2240)
    assert run is not None and run.item.id == "a" and run.tiles == 6
    # the tiles were read from the open reader, region by region (their parts inside the slide), off the GUI thread
    tile_reads = [(x, y, w, h) for level, x, y, w, h, thread in reader.reads
                  if thread.name.startswith("segscope-tile-read")]  # (not the slide view's display tiles)
    assert sorted(tile_reads) == [(0, 0, 1560, 1560), (0, 440, 1560, 1560), (1080, 0, 1800, 1560),
                                  (1080, 440, 1800, 1560), (1440, 0, 1560, 1560), (1440, 440, 1560, 1560)]

    # the same slide and plan, run apart from the window
    with open_slide(reader.path) as separate, EmbeddedBackend(tiny_model_project.pipeline) as backend:
        expected = run_tiled(backend, separate, TilePlan((1800, 1800), seams=True))  # eval --tile's default
    np.testing.assert_allclose(run.stitched.probabilities, expected.probabilities, rtol=0, atol=1e-6)
    overlay = window.slide.overlay
    qtbot.waitUntil(lambda: overlay.pyramid is not None)  # its levels are made on a worker
    assert overlay.heatmap.isVisible() and not overlay.seams.isVisible()  # seams: off until asked for
    assert window.main_actions.slide_heatmap_action.isChecked()
    finest = overlay.pyramid.heatmap[0]
    foreground = np.round((1 - expected.probabilities[..., 0]) * 255)  # every pixel covered: 8-bit 1 - p0
    np.testing.assert_allclose(finest, foreground, rtol=0, atol=1)
    np.testing.assert_allclose(overlay.pyramid.seams[0], np.round(expected.seams * 255), rtol=0, atol=1)
    shown = overlay.pyramid.heatmap[overlay.level]  # at Fit: a coarser level, each pixel its block's maximum
    assert overlay.level > 0 and np.array_equal(overlay.heatmap.image, shown)
    block = 2 ** overlay.level
    assert shown[3, 5] == finest[3 * block : 4 * block, 5 * block : 6 * block].max()
    assert shown.max() == finest.max()  # the strongest spot stays visible when zoomed out
    rect = overlay.heatmap.mapRectToParent(overlay.heatmap.boundingRect())
    covered_width = finest.shape[1] / expected.scale  # slide px under the finest level (whole pixels)
    assert (rect.left(), rect.top()) == (0, 0)
    assert abs(rect.width() - covered_width) < 1e-6 and abs(covered_width - SIZE[0]) < 1 / expected.scale
    assert any("Whole slide of a: 6 tiles" in message.text for message in window.messages.messages)
    assert any(message.text.startswith("Running the whole slide of a in 6 tiles: 1800x1800 px tiles overlapping by "
                                       "480 px") and "6 tiles, 1.50x the 4 without overlap" in message.text
               for message in window.messages.messages)

    # a new ROI shows the stitched part under it at once, without a run
    roi = Roi(600, 400, 1500, 1300)
    window.slide.set_roi(roi)
    window.slide.roiChanged.emit(window.slide.roi())
    qtbot.waitUntil(lambda: window.panels.result is not None and window.panels.result.roi == roi)  # (read on a worker)
    window_heatmap = window.panels.panel_arrays()["heatmap"]
    out = expected.from_slide(roi)
    np.testing.assert_allclose(window_heatmap, expected.probabilities[out.y0:out.y1, out.x0:out.x1, 1], atol=1e-6)
    window.main_actions.slide_heatmap_action.trigger()  # View > Whole-slide heatmap off
    window.main_actions.slide_seams_action.trigger()  # View > Whole-slide seams on
    assert not overlay.heatmap.isVisible() and overlay.seams.isVisible()

    # Export writes the stitched run: what a tiled evaluation's export writes
    from segscope.core.files.fileio import read_mask
    from segscope.gui.dialogs.export_dialog import ExportChoices

    assert window.main_actions.export_action.isEnabled()
    out = tmp_path / "export"
    with qtbot.waitSignal(window.exporter.finished, timeout=30000) as exported:
        choices = ExportChoices(("mask", "softmax"), True, out, "current", ("a",), False, True)
        assert window.commands.write_export(choices)
    assert sorted(p.name for p in exported.args[0]) == ["a_mask.png", "a_provenance.json", "a_softmax.npy",
                                                        "metrics.csv", "metrics.json"]
    np.testing.assert_array_equal(read_mask(out / "a_mask.png"), run.stitched.argmax * 255)
    np.testing.assert_array_equal(np.load(out / "a_softmax.npy"), run.stitched.probabilities)
    tiling = json.loads((out / "a_provenance.json").read_text())["tiling"]
    assert (tiling["tile"], tiling["overlap"], tiling["margin"], tiling["tiles"]) == ([1800, 1800], 480, 240, 6)


def test_a_cancelled_whole_slide_run_leaves_no_overlay(qtbot, tiff_window):
    window, readers = tiff_window
    reader = readers[-1]
    reader.gate.clear()  # tile reads wait
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000) as finished:
        assert window.commands.run_whole_slide()
        assert not window.main_actions.run_slide_action.isEnabled()  # one run at a time
        window.controller.cancel()
        reader.gate.set()
    assert finished.args[2] is True  # cancelled
    assert window.session.slide_run_of("a") is None and window.slide.overlay.pyramid is None
    assert not window.slide.overlay.heatmap.isVisible()
    assert window.main_actions.run_slide_action.isEnabled()


def test_a_chosen_output_scale_is_the_sessions_plan_and_one_over_the_bound_is_refused(tiff_window, monkeypatch):
    """The window asks the session's policy (`Session.whole_slide_plan`, tested in core/test_slide_plan.py) with
    the scale chosen in Run > Whole-slide output scale…, and says a refusal in one line."""
    from segscope.gui.runtime import settings
    from segscope.gui.shell import whole_slide

    window, _readers = tiff_window
    run = window.whole_slide.slide_run()
    small = dataclasses.replace(run, max_bytes=run.needed(run.own_scale) // 4)  # the own scale: 4x what may be held
    monkeypatch.setattr(window.session, "slide_run", lambda size: small)
    size = window.open_slide.reader.size
    settings.settings().setValue(whole_slide.SCALE_KEY, run.own_scale)
    assert not window.commands.run_whole_slide()
    said = [m.text for m in window.messages.messages if m.level == "error"]
    assert len(said) == 1 and said[0].startswith(f"Whole slide of a: At output scale {run.own_scale:.4g} the ")
    assert "--" not in said[0]
    settings.settings().setValue(whole_slide.SCALE_KEY, run.own_scale / 4)
    assert window.session.whole_slide_plan(size, whole_slide.chosen_scale()).plan.output_scale == run.own_scale / 4
    settings.settings().setValue(whole_slide.SCALE_KEY, 0.0)


def test_a_whole_slide_result_too_big_to_keep_on_disk_is_said_as_the_run_starts(qtbot, tiff_window):
    from segscope.core.wholeslide.tiling import stitched_bytes

    window, _readers = tiff_window
    run = window.whole_slide.slide_run()
    own = run.own_scale
    size = stitched_bytes(run.region, own, run.classes, seams=True)
    window.session.store.max_bytes = size - 1  # the result is one byte over what the dataset keeps on disk
    with qtbot.waitSignal(window.controller.batchFinished, timeout=120000):
        assert window.commands.run_whole_slide()
        assert window.session.slide_run_of("a") is None  # no tile has come back yet
        said = [m.text for m in window.messages.messages if m.level == "warning"]
        assert len(said) == 1 and said[0].startswith("Whole slide of a: its result")
        assert "not restored when it is reopened" in said[0] and "--" not in said[0]
    assert window.session.slide_run_of("a") is not None  # shown for this session
    window.session.store.max_bytes = size
    assert window.session.unkept(run, own) == ""  # a result that fits is kept on disk: nothing to say


def _damage_full_resolution(path: Path) -> None:
    """Overwrite the start of every full-resolution tile (zlib streams no longer): the coarser levels stay whole."""
    import tifffile

    with tifffile.TiffFile(path) as tif:
        page = tif.series[0].levels[0].keyframe
        tiles = list(zip(page.dataoffsets, page.databytecounts))
    with open(path, "r+b") as file:
        for offset, count in tiles:
            file.seek(int(offset))
            file.write(b"\xff" * min(int(count), 16))


def test_tiles_that_cannot_be_read_are_said_once_per_slide(qtbot, tmp_path):
    from PySide6.QtCore import QRectF

    from segscope.gui.shell.main_window import MainWindow

    paths = []
    for item in ("a", "b"):
        (tmp_path / "ds" / item).mkdir(parents=True)
        paths.append(write_pyramidal_tiff(tmp_path / "ds" / item / "image.tif", SIZE, tile=256, compression="zlib",
                                          seed=5))
        _damage_full_resolution(paths[-1])
    win = MainWindow()
    qtbot.addWidget(win)
    win.resize(1400, 900)
    win.show()
    assert win.commands.open_dataset(tmp_path / "ds")

    def look_closely(x: int, y: int) -> None:
        """1:1 around (x, y) (full resolution: every tile there fails), until no read is pending."""
        tiles = win.slide.tiles
        win.slide.vb.setRange(QRectF(x, y, 450, 300), padding=0)
        win.slide.one_to_one()
        win.slide._update_detail()
        qtbot.waitUntil(lambda: bool(tiles.wanted or tiles.broken) and tiles.loader.pending() == 0, timeout=10000)

    def said(path: Path) -> list[str]:
        return [m.text for m in win.messages.messages if m.text.startswith(str(path))]

    for index, item in enumerate(("a", "b")):
        if index:
            win.dataset_panel.select_item(item)
        qtbot.waitUntil(lambda item=item: win.slide_ready() and win.session.current.id == item, timeout=20000)
        for x, y in ((300, 300), (2000, 1200), (300, 300)):
            look_closely(x, y)
        assert len(win.slide.tiles.broken) > 4  # many tiles failed...
        lines = said(paths[index])
        assert len(lines) == 1, lines  # ...and the slide's one line says so
        assert "part of the slide cannot be read" in lines[0] and "cannot be decoded" in lines[0]
        assert all(key[0] == 0 for key in win.slide.tiles.broken)  # (the coarser levels read whole)
    win.dataset_panel.select_item("a")  # back to a: its tiles fail again, it was said already
    qtbot.waitUntil(lambda: win.slide_ready() and win.session.current.id == "a", timeout=20000)
    look_closely(300, 300)
    assert win.slide.tiles.broken and len(said(paths[0])) == 1
    win.close()
