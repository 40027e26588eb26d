"""A slide shown on its own levels: tiles of the level the zoom needs, read off the GUI thread and cached.

The coarsest level is always shown, stretched over the slide (`SlideView.set_reader`); on top of it,
`TileLayer.update` shows the visible tiles of the level for the current zoom; until they have all arrived,
the tiles shown before stay beneath them (so zooming never falls back to the blurry base). Tiles not yet
read are asked of the job runner's `TILES` lane (two reads at a time, `SlideReader.read_region`); requests the
view moved away from are dropped before they start.
Read tiles live in a byte-bounded LRU cache (`TileCache`), so panning back costs nothing. A tile that cannot be
read or drawn leaves the coarser level showing there; the first one of a slide is said in one `message` line
naming the slide (a damaged file fails at many tiles: one line per slide, not one per tile or per visit).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from functools import partial
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QRectF, Signal

from ...core.slides import SlideReader
from ..runtime.jobs import TILES, Job, Jobs, describe_error

#: Side of a tile in its level's pixels.
TILE = 512
#: Default byte bound of the tile cache.
CACHE_BYTES = 256 * 2**20
#: Above this many visible tiles (a finest level with no coarser one to show), only the base level is shown.
MAX_VISIBLE_TILES = 256

TileKey = tuple[int, int, int]  # level, column, row


class TileCache:
    """RGB tiles by key, least recently used dropped first once their bytes pass `max_bytes`."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._tiles: OrderedDict[TileKey, np.ndarray] = OrderedDict()

    def get(self, key: TileKey) -> np.ndarray | None:
        tile = self._tiles.get(key)
        if tile is not None:
            self._tiles.move_to_end(key)
        return tile

    def put(self, key: TileKey, tile: np.ndarray) -> None:
        self.drop(key)
        self._tiles[key] = tile
        self.bytes += tile.nbytes
        while self.bytes > self.max_bytes and len(self._tiles) > 1:
            _, dropped = self._tiles.popitem(last=False)
            self.bytes -= dropped.nbytes

    def drop(self, key: TileKey) -> None:
        old = self._tiles.pop(key, None)
        if old is not None:
            self.bytes -= old.nbytes

    def clear(self) -> None:
        self._tiles.clear()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._tiles)


def tile_box(reader: SlideReader, key: TileKey) -> tuple[int, int, int, int]:
    """(x, y, width, height) of a tile in its level's pixels (edge tiles are cut to the level)."""
    level, column, row = key
    lv = reader.levels[level]
    x, y = column * TILE, row * TILE
    return x, y, min(TILE, lv.width - x), min(TILE, lv.height - y)


def visible_tiles(reader: SlideReader, level: int, rect: QRectF) -> list[TileKey]:
    """Keys of `level`'s tiles meeting `rect` (level-0 pixels), centre first."""
    lv = reader.levels[level]
    sx, sy = reader.size[0] / lv.width, reader.size[1] / lv.height
    columns = range(max(int(rect.left() / sx) // TILE, 0),
                    min(math.ceil(rect.right() / sx / TILE), -(-lv.width // TILE)))
    rows = range(max(int(rect.top() / sy) // TILE, 0),
                 min(math.ceil(rect.bottom() / sy / TILE), -(-lv.height // TILE)))
    keys = [(level, c, r) for r in rows for c in columns]
    if not keys:
        return keys
    mid_c, mid_r = (columns.start + columns.stop - 1) / 2, (rows.start + rows.stop - 1) / 2
    return sorted(keys, key=lambda k: (k[1] - mid_c) ** 2 + (k[2] - mid_r) ** 2)


def read_tile(reader: SlideReader, key: TileKey) -> np.ndarray:
    """A tile's RGB pixels (on a worker: the readers release the GIL while decoding)."""
    return np.ascontiguousarray(reader.read_region(key[0], *tile_box(reader, key))[..., ::-1])


class TileLoader(QObject):
    """Reads tiles on the `TILES` lane; `loaded(reader, key, rgb)` arrives in the GUI thread."""

    loaded = Signal(object, object, object)  # reader, TileKey, RGB pixels: in the GUI thread
    failed = Signal(object, object, str, str)  # reader, TileKey, message, details: in the GUI thread

    def __init__(self, jobs: Jobs, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.jobs = jobs
        self._pending: dict[TileKey, Job] = {}

    def request(self, reader: SlideReader, keys: list[TileKey]) -> None:
        """Read `keys` (in this order) and drop every pending request not among them."""
        wanted = set(keys)
        for key, job in list(self._pending.items()):
            if key not in wanted and job.dequeue():
                del self._pending[key]
        for key in keys:
            if key not in self._pending:
                self._pending[key] = self.jobs.submit(None, partial(read_tile, reader, key),
                                                      partial(self._deliver, reader, key),
                                                      partial(self._failed, reader, key), lane=TILES)

    def pending(self) -> int:
        return len(self._pending)

    def drop_all(self) -> None:
        for job in self._pending.values():
            job.dequeue()
        self._pending.clear()

    def _deliver(self, reader: SlideReader, key: TileKey, rgb: np.ndarray) -> None:
        """In the GUI thread: the tile stops being pending and reaches the receivers in one step, so no view
        update can come between and ask for it again."""
        self._pending.pop(key, None)
        self.loaded.emit(reader, key, rgb)

    def _failed(self, reader: SlideReader, key: TileKey, text: str, details: str) -> None:
        self._pending.pop(key, None)
        self.failed.emit(reader, key, text, details)


class TileLayer(QObject):
    """The tiles of one slide in a ViewBox: `set_reader`, then `update(level, visible rect)` on each move;
    `message(level, text, details)` says once per slide that its tiles fail."""

    message = Signal(str, str, str)

    def __init__(self, view_box: pg.ViewBox, jobs: Jobs, cache_bytes: int = CACHE_BYTES,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.vb = view_box
        self.reader: SlideReader | None = None
        self.cache = TileCache(cache_bytes)
        self.loader = TileLoader(jobs, self)
        self.loader.loaded.connect(self._on_loaded)
        self.loader.failed.connect(self._on_failed)
        self.shown: dict[TileKey, pg.ImageItem] = {}
        self.previous: list[pg.ImageItem] = []  # tiles shown before the view moved, until the wanted arrive
        self.wanted: list[TileKey] = []
        self.broken: set[TileKey] = set()  # tiles of this slide that could not be read or drawn: not asked again
        self._said: set[Path] = set()  # the slides whose failing tiles were said (once per slide, reopened or not)

    def set_reader(self, reader: SlideReader | None) -> None:
        self.loader.drop_all()
        self.cache.clear()
        self._show([])
        self.reader, self.wanted = reader, []
        self.broken = set()

    def update(self, level: int | None, rect: QRectF) -> None:
        """Show `level`'s tiles meeting `rect` (None: none), reading those not cached."""
        reader = self.reader
        keys = visible_tiles(reader, level, rect) if reader is not None and level is not None else []
        keys = [key for key in keys if key not in self.broken]
        if len(keys) > MAX_VISIBLE_TILES:
            keys = []
        self.wanted = keys
        missing = [key for key in keys if self.cache.get(key) is None]
        if reader is not None:
            self.loader.request(reader, missing)
        self._show([key for key in keys if key not in missing], keep_previous=bool(missing))

    def _show(self, keys: list[TileKey], keep_previous: bool = False) -> None:
        gone = [self.shown.pop(key) for key in set(self.shown) - set(keys)]
        if keep_previous and gone:
            self._drop_previous()
            for item in gone:
                item.setZValue(0.5)
            self.previous = gone
        else:
            for item in gone:
                self.vb.removeItem(item)
        if not keep_previous:
            self._drop_previous()
        for key in keys:
            if key not in self.shown:
                self._add(key)

    def _drop_previous(self) -> None:
        for item in self.previous:
            self.vb.removeItem(item)
        self.previous = []

    def _add(self, key: TileKey) -> None:
        reader, tile = self.reader, self.cache.get(key)
        assert reader is not None and tile is not None
        lv = reader.levels[key[0]]
        sx, sy = reader.size[0] / lv.width, reader.size[1] / lv.height
        x, y, w, h = tile_box(reader, key)
        try:
            item = pg.ImageItem(tile, axisOrder="row-major", autoLevels=False, levels=(0, 255))
        except Exception as exc:  # noqa: BLE001 - pixels pyqtgraph cannot draw: said once, the slide goes on
            self._failed(reader, key, "drawn", *describe_error(exc))
            return
        item.setRect(QRectF(x * sx, y * sy, w * sx, h * sy))
        item.setZValue(1)
        self.vb.addItem(item)
        self.shown[key] = item

    def _on_loaded(self, reader: SlideReader, key: TileKey, rgb: np.ndarray) -> None:
        if reader is not self.reader:
            return  # a tile of the slide shown before
        self.cache.put(key, rgb)
        if key in self.wanted and key not in self.shown:
            self._add(key)
            if len(self.shown) == len(self.wanted):
                self._drop_previous()

    def _on_failed(self, reader: SlideReader, key: TileKey, text: str, details: str) -> None:
        self._failed(reader, key, "read", text, details)

    def _failed(self, reader: SlideReader, key: TileKey, what: str, text: str, details: str) -> None:
        """A tile of `reader` cannot be `what` ("read", "drawn"): it is not asked for again, its place keeps the
        coarser level, and the slide's first such tile is said in one line."""
        if self.reader is None or reader is not self.reader:
            return  # a tile of the slide shown before
        self.cache.drop(key)
        if key in self.wanted:
            self.wanted.remove(key)
            if len(self.shown) == len(self.wanted):
                self._drop_previous()
        self.broken.add(key)
        if reader.path not in self._said:
            self._said.add(reader.path)
            x, y, width, height = tile_box(reader, key)
            self.message.emit("warning", f"{reader.path}: part of the slide cannot be {what} at this zoom (the tile "
                              f"{width}x{height} at ({x}, {y}) of level {key[0]}: {text}); it shows at a coarser "
                              "level there, and further such tiles of this slide are not reported", details)

    def pixel(self, x: int, y: int) -> tuple[int, int, int] | None:
        """RGB of slide pixel (x, y) from the finest cached tile holding it, or None."""
        reader = self.reader
        if reader is None:
            return None
        for level in range(len(reader.levels)):
            lv = reader.levels[level]
            lx, ly = int(x * lv.width / reader.size[0]), int(y * lv.height / reader.size[1])
            tile = self.cache.get((level, lx // TILE, ly // TILE))
            if tile is not None:
                r, g, b = tile[ly % TILE, lx % TILE]
                return int(r), int(g), int(b)
        return None

    def shutdown(self) -> None:
        """Drop the reads not started (the window's runner waits for those running)."""
        self.loader.drop_all()
