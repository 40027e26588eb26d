"""The slide view on a reader's own levels: the coarsest level at open, then tiles of the level the zoom
needs, read off the GUI thread into a byte-bounded cache; stale requests dropped; exact pixels."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QRectF

from segscope.core.roi import Roi
from segscope.core.slides import SlideReader, open_slide
from segscope.core.slides.synthetic import write_pyramidal_tiff
from segscope.gui.canvas.slide_view import SlideView
from segscope.gui.canvas.tile_layer import TILE, TileCache, TileLoader, visible_tiles
from segscope.gui.runtime.jobs import Jobs
from segscope.gui.runtime.slide_loader import read_base

pytestmark = pytest.mark.gui

SIZE = (6000, 4000)  # levels 6000x4000, 3000x2000, 1500x1000, 750x500 (tile 256: halved until one tile)


class CountingReader(SlideReader):
    """A reader passing every region read on to `inner`, recording (level, box, thread); `gate` can hold reads."""

    kind = "counting"

    def __init__(self, inner: SlideReader) -> None:
        super().__init__(inner.path, inner.levels)
        self.inner = inner
        self.reads: list[tuple[int, int, int, int, int, threading.Thread]] = []
        self.gate = threading.Event()
        self.gate.set()
        self._lock = threading.Lock()

    def _read(self, level: int, x: int, y: int, width: int, height: int) -> np.ndarray:
        self.gate.wait(10)
        with self._lock:
            self.reads.append((level, x, y, width, height, threading.current_thread()))
        return self.inner.read_region(level, x, y, width, height)

    def area(self, level: int) -> int:
        return sum(w * h for lv, _x, _y, w, h, _t in self.reads if lv == level)


@pytest.fixture(scope="module")
def tiff_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("slide") / "slide.tif"
    return write_pyramidal_tiff(path, SIZE, tile=256, compression="zlib", seed=3)


@pytest.fixture
def reader(tiff_path: Path):
    with open_slide(tiff_path) as inner:
        yield CountingReader(inner)


def shown_view(qtbot, reader: SlideReader, jobs: Jobs, cache_bytes: int | None = None) -> SlideView:
    view = SlideView(jobs)
    qtbot.addWidget(view)
    if cache_bytes is not None:
        view.tiles.cache.max_bytes = cache_bytes
    view.resize(900, 600)
    view.show()
    view.set_reader(reader, read_base(reader), Roi(100, 100, 1000, 1000))
    return view


def zoom_to(qtbot, view: SlideView, x: float, y: float) -> None:
    """One slide pixel per screen pixel around (x, y); wait until every visible tile is shown."""
    view.vb.setRange(QRectF(x, y, 450, 300), padding=0)
    view.one_to_one()
    view._update_detail()
    qtbot.waitUntil(lambda: view.tiles.wanted and set(view.tiles.wanted) <= set(view.tiles.shown), timeout=10000)


def test_cache_drops_the_least_recently_used_beyond_its_bytes():
    cache = TileCache(max_bytes=3 * 100)
    tiles = {k: np.full((10, 10), k, np.uint8) for k in range(4)}  # 100 bytes each
    for k in range(3):
        cache.put((0, k, 0), tiles[k])
    assert cache.get((0, 0, 0)) is tiles[0]  # now the most recently used
    cache.put((0, 3, 0), tiles[3])
    assert cache.get((0, 1, 0)) is None and cache.bytes == 300 and len(cache) == 3
    assert all(cache.get((0, k, 0)) is tiles[k] for k in (0, 2, 3))


def test_visible_tiles_cover_the_rect_at_the_levels_scale(reader):
    # level 1 is 3000 x 2000: a level-0 rect x 1100..2100, y 0..700 is level-1 x 550..1050, y 0..350
    keys = visible_tiles(reader, 1, QRectF(1100, 0, 1000, 700))
    assert sorted(keys) == sorted((1, c, r) for c in (550 // TILE, 1049 // TILE) for r in (0,))
    assert visible_tiles(reader, 0, QRectF(-500, -500, 100, 100)) == []


def test_opening_reads_only_the_coarsest_level_and_shows_it_stretched(qtbot, reader, jobs):
    view = shown_view(qtbot, reader, jobs)
    last = len(reader.levels) - 1
    assert {read[0] for read in reader.reads} == {last}  # opening reads nothing finer
    lv = reader.levels[last]
    np.testing.assert_array_equal(view.base.image, reader.inner.read_region(last, 0, 0, lv.width, lv.height)[..., ::-1])
    rect = view.base.mapRectToParent(view.base.boundingRect())
    assert (rect.width(), rect.height()) == SIZE
    # fitted (6000 px in ~900 screen px): the tiles of the level with 4 slide px a pixel, nothing finer
    px, _ = view.vb.viewPixelSize()
    assert 4 < px < 8 and reader.level_for(px) == 2
    view._update_detail()
    qtbot.waitUntil(lambda: view.tiles.wanted and set(view.tiles.wanted) <= set(view.tiles.shown), timeout=10000)
    assert {read[0] for read in reader.reads} == {2, last} and {key[0] for key in view.tiles.shown} == {2}


def test_zooming_in_reads_the_visible_tiles_off_the_gui_thread_with_exact_pixels(qtbot, reader, jobs):
    view = shown_view(qtbot, reader, jobs)  # (the test reads the base level itself, on this thread)
    del reader.reads[:]
    zoom_to(qtbot, view, 3000, 2000)
    levels = {key[0] for key in view.tiles.shown}
    assert levels == {0}  # 1:1 needs full resolution
    assert reader.reads and all(thread is not threading.main_thread() for *_box, thread in reader.reads)
    # a ~900 x 570 screen at 1:1 plus a quarter on each side is 1350 x 855 slide px: at most 4 x 3 tiles
    assert reader.area(0) <= 12 * TILE * TILE
    visible = view.vb.viewRect()
    for key, item in view.tiles.shown.items():
        level, column, row = key
        x, y = column * TILE, row * TILE
        w, h = min(TILE, reader.levels[0].width - x), min(TILE, reader.levels[0].height - y)
        np.testing.assert_array_equal(item.image, reader.inner.read_region(level, x, y, w, h)[..., ::-1])
        rect = item.mapRectToParent(item.boundingRect())
        assert (rect.left(), rect.top(), rect.width(), rect.height()) == (x, y, w, h)
    covered = [item.mapRectToParent(item.boundingRect()) for item in view.tiles.shown.values()]
    assert min(r.left() for r in covered) <= visible.left() and max(r.right() for r in covered) >= visible.right()
    assert min(r.top() for r in covered) <= visible.top() and max(r.bottom() for r in covered) >= visible.bottom()


def test_a_middle_zoom_uses_a_middle_level(qtbot, reader, jobs):
    view = shown_view(qtbot, reader, jobs)
    view.vb.setRange(QRectF(1000, 1000, 1800, 1200), padding=0)  # ~2 slide px per screen px
    px, _ = view.vb.viewPixelSize()
    assert 1.5 < px < 3.9
    view._update_detail()
    qtbot.waitUntil(lambda: view.tiles.wanted and set(view.tiles.wanted) <= set(view.tiles.shown), timeout=10000)
    assert {key[0] for key in view.tiles.shown} == {1 if px < 4 else 2}
    assert reader.area(0) == 0


def test_panning_keeps_the_cache_within_its_bytes_and_panning_back_reads_nothing(qtbot, reader, jobs):
    bound = 12 * TILE * TILE * 3
    view = shown_view(qtbot, reader, jobs, cache_bytes=bound)
    for x in (300, 2500, 4800, 300):
        zoom_to(qtbot, view, x, 1500)
        assert view.tiles.cache.bytes <= bound
    reads = len(reader.reads)
    view._update_detail()  # the same place again: every tile is cached
    assert len(reader.reads) == reads and set(view.tiles.wanted) <= set(view.tiles.shown)


def test_requests_the_view_moved_away_from_are_dropped_before_they_read(qtbot, reader, jobs):
    loader = TileLoader(jobs)
    arrived: list[tuple[int, int, int]] = []
    loader.loaded.connect(lambda _r, key, _rgb: arrived.append(key))
    reader.gate.clear()  # the first reads hold the pool's threads
    first = [(0, c, 0) for c in range(10)]
    loader.request(reader, first)
    qtbot.waitUntil(lambda: loader.pending() == 10, timeout=5000)
    later = [(0, c, 5) for c in range(3)]
    loader.request(reader, later)
    reader.gate.set()
    qtbot.waitUntil(lambda: loader.pending() == 0 and len(arrived) >= len(later), timeout=10000)
    read = {(level, x // TILE, y // TILE) for level, x, y, *_ in reader.reads}
    assert set(later) <= read
    assert len(read & set(first)) <= 2  # only those already running when the view moved
    jobs.shutdown()


def test_a_tile_read_but_not_yet_delivered_is_not_read_again(qtbot, reader, jobs):
    view = shown_view(qtbot, reader, jobs)
    view.vb.setRange(QRectF(3000, 2000, 450, 300), padding=0)
    view.one_to_one()
    del reader.reads[:]
    view._update_detail()
    wanted = list(view.tiles.wanted)
    deadline = time.monotonic() + 10
    while len(reader.reads) < len(wanted) and time.monotonic() < deadline:
        time.sleep(0.01)  # the reads finish on the pool; their results wait for this (the GUI) thread
    assert len(reader.reads) == len(wanted) and not view.tiles.shown
    view._update_detail()  # the same view again before the results arrive
    qtbot.waitUntil(lambda: set(wanted) <= set(view.tiles.shown), timeout=10000)
    assert len(reader.reads) == len(wanted)


def test_the_tiles_shown_before_stay_beneath_until_the_new_levels_arrive(qtbot, reader, jobs):
    view = shown_view(qtbot, reader, jobs)
    view._update_detail()
    qtbot.waitUntil(lambda: view.tiles.wanted and set(view.tiles.wanted) <= set(view.tiles.shown), timeout=10000)
    before = set(view.tiles.shown.values())
    reader.gate.clear()  # level-0 reads wait
    view.vb.setRange(QRectF(3000, 2000, 450, 300), padding=0)
    view.one_to_one()
    view._update_detail()
    assert view.tiles.shown == {} and set(view.tiles.previous) == before
    assert all(item.getViewBox() is view.vb for item in before)
    reader.gate.set()
    qtbot.waitUntil(lambda: set(view.tiles.wanted) <= set(view.tiles.shown), timeout=10000)
    assert view.tiles.previous == [] and all(item.getViewBox() is None for item in before)


def test_the_roi_rectangle_goes_on_to_the_next_image_within_its_bounds(qtbot, jobs):
    """The rectangle is kept from one image to the next (hidden while the next loads): it shows the new image's
    ROI, and a drag stays inside the new image, not the one before."""
    from segscope.core.slides.opencv_reader import ImageSlide

    view = SlideView(jobs)
    qtbot.addWidget(view)
    view.resize(900, 600)
    view.show()
    big = ImageSlide(Path("big.png"), np.zeros((400, 600, 3), np.uint8))
    small = ImageSlide(Path("small.png"), np.zeros((80, 120, 3), np.uint8))
    view.set_reader(big, None, Roi(300, 200, 600, 400))
    first = view.roi_item
    view.set_loading("Loading small.png")
    assert not first.isVisible() and view.roi() is None
    view.set_reader(small, None, Roi(10, 20, 50, 60))
    assert view.roi_item is first and first.isVisible()
    assert view.roi() == Roi(10, 20, 50, 60)
    first.translate((500, 300), snap=True, finish=True)  # as a drag does: held inside the image shown
    assert (first.pos().x(), first.pos().y()) == (80, 40) and view.roi() == Roi(80, 40, 120, 80)
