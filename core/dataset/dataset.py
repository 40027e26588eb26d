"""Datasets of slides with optional ground-truth masks, and the ROIs picked on them.

Two layouts are recognised:
- one folder per image (the original project's): `DIR/<id>/image.png|jpg|tif` + optional `DIR/<id>/mask.png`;
- a flat folder: `DIR/<name>.png` + optional `DIR/<name>_mask.png`.
Images may be whole slides (a pyramidal TIFF, SVS, MRXS...: `IMAGE_SUFFIXES`); masks may be tiled TIFFs,
read region by region through `open_mask`.
ROIs picked per image live in the sidecar `DIR/segscope.json`; without one an image gets the dataset's
default ROI when it fits the image (the original script's 2200,1000,4000,2800 unless configured), else
the whole image.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import logging
import os
import re
import threading
import time
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cache.decoded import read_truth
from ..errors import SegScopeError
from ..export.names import PROVENANCE_NAME, exported_item, stem_suffix
from ..files.fileio import DEFAULT_MAX_PIXELS, atomic_write_bytes, gone, read_json
from ..files.image_types import IMAGE_SUFFIXES
from ..files.kinds import dataset_folder, not_wanted, what_is
from ..files.stamp import Stamp, short_lock
from ..roi import ORIGINAL_DEFAULT_ROI, Roi
from ..slides import slide_size
from ..slides.masks import MaskReader
from .masks import MaskRule, histogram, relabelled
from .truth import (
    AUTO,
    BACKUP_SUFFIX,
    CORRECTED,
    CORRECTED_SUFFIX,
    MASK_SUFFIX,
    Truth,
    check_choice,
    default_mask_path,
    truth_for,
)

log = logging.getLogger(__name__)

SIDECAR_NAME = "segscope.json"
#: The lock file of the sidecar's writers (`_save_sidecar`), beside it.
SIDECAR_LOCK = ".segscope.json.lock"


#: A copy of edits kept instead of overwriting another writer's mask: `mask.mine-20261206-073000[-2].png`
#: (`copy_mask_path`): never read as a mask or an image.
_COPY = re.compile(r"\.mine-\d{8}-\d{6}(?:-\d+)?$")


def copy_mask_path(mask_path: Path, when: float, n: int = 1) -> Path:
    """`mask.png` -> `mask.mine-20261206-073000.png` (`-<n>` from the second of one second): where edits are kept
    as a copy (`core.editing.files.keep_copy`)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(when))
    return Path(mask_path).with_name(f"{Path(mask_path).stem}.mine-{stamp}{'' if n == 1 else f'-{n}'}.png")


def _is_mask_file(name: str) -> bool:
    if MASK_SUFFIX not in name:  # (half the 200,000 names of a flat 100,000-image dataset: nothing to parse)
        return False
    stem = _COPY.sub("", stem_suffix(name)[0]).removesuffix(BACKUP_SUFFIX).removesuffix(CORRECTED_SUFFIX)
    return stem.endswith(MASK_SUFFIX)


def _is_export(listing: _Listing, name: str) -> bool:
    """An export of `core.export.files` (`<id>_mask.png` etc. beside `<id>_provenance.json`): never data. A folder
    that holds no provenance file answers at once (no name of it parsed as an export's)."""
    if not listing.may_hold_ending(_PROVENANCE_ENDING):
        return False
    item = exported_item(name)
    return item is not None and listing.is_file(PROVENANCE_NAME.format(id=item))


class _Listing:
    """A folder's entries, listed once (`os.scandir`), answering what `Path.exists` and `Path.is_file` would for a
    name in it without a system call per name: a dataset of 100,000 images opens from one listing per folder, not a
    `stat` per candidate suffix. The file system is still asked, as before, where the listing alone cannot answer:
    for a symbolic link (broken or not), in a folder that cannot be listed (searchable but not readable), and for a
    name the listing holds only in another case or Unicode form (which a case-insensitive file system finds).
    Each entry is kept as its name and what it is (`DIR`, `FILE`, `LINK` bits), not as its `os.DirEntry`."""

    DIR, FILE, LINK = 1, 2, 4  # a folder, a file (either through a symbolic link), a symbolic link

    def __init__(self, folder: Path, entries: dict[str, int] | None):
        self.folder, self.entries = folder, entries  # in the order the folder lists them
        self._prefix = str(folder / "_")[:-1]  # what `str(folder / name)` starts with ("" for the folder ".")
        self._folded: set[str] | None = None
        self._endings: dict[str, bool] = {}

    @classmethod
    def of(cls, folder: Path) -> _Listing:
        """`folder` listed; raises the OSError of a folder that cannot be listed."""
        with os.scandir(folder) as found:  # a link's target is looked at (a stat) as `Path.is_dir` looked before
            return cls(folder, {e.name: cls.DIR * e.is_dir() | cls.FILE * e.is_file() | cls.LINK * e.is_symlink()
                                for e in found})

    @classmethod
    def or_asked(cls, folder: Path) -> _Listing:
        """`folder` listed, or (it cannot be) a listing that asks the file system for every name."""
        try:
            return cls.of(folder)
        except OSError:
            return cls(folder, None)

    def _near(self, name: str) -> bool:
        """Whether the file system must be asked about `name`, which the listing does not hold as it is spelt."""
        if self.entries is None:
            return True
        if self._folded is None:
            self._folded = {_folded(n) for n in self.entries}
        return _folded(name) in self._folded

    def may_hold_ending(self, ending: str) -> bool:
        """Whether a name ending in `ending` (ASCII, lower case) may be found here in any case or Unicode form
        (False: none is, so `exists` and `is_file` are False for every such name). Names that are not ASCII, and
        a folder that could not be listed, may: the file system is asked about them."""
        held = self._endings.get(ending)
        if held is None:
            held = self._endings[ending] = self.entries is None or any(
                not name.isascii() or name.lower().endswith(ending) for name in self.entries)
        return held

    def exists(self, name: str) -> bool:
        kind = self.entries.get(name) if self.entries is not None else None
        if kind is None:
            return self._near(name) and (self.folder / name).exists()
        return not kind & self.LINK or (self.folder / name).exists()

    def is_file(self, name: str) -> bool:
        kind = self.entries.get(name) if self.entries is not None else None
        if kind is None:
            return self._near(name) and (self.folder / name).is_file()
        return bool(kind & self.FILE)  # through a symbolic link, as `Path.is_file`

    def path(self, name: str) -> str:
        """`str(folder / name)` for a name the listing holds (one part), without parsing it as a path: a third of
        the cost of a 100,000-image dataset's 200,000 paths."""
        return self._prefix + name

    def first(self, stem: str) -> str | None:
        """The name of the first `stem.<image suffix>` there (whatever it is: a folder there is reported when
        read)."""
        return next((n for s in IMAGE_SUFFIXES if self.exists(n := f"{stem}{s}")), None)

    def dangling(self, stem: str) -> str | None:
        """The name of the first `stem.<image suffix>` there that is a symbolic link to nothing (which `first` does
        not see)."""
        if self.entries is None:
            return None
        return next((n for s in IMAGE_SUFFIXES if self.entries.get(n := f"{stem}{s}") == self.LINK), None)


class _CollectionPause:
    """The cyclic garbage collector paused while a listing builds its items (a few objects per image, none in a
    cycle): each of the collections 100,000 images' objects would set off walks every object of the process,
    ~0.5 s of a 100,000-image listing in a small process, more in the viewer's. Pauses may overlap (two listings in
    two threads): the collector runs again when the last ends, unless its owner had paused it before the first.
    The listing collects its young objects itself every `COLLECT_EVERY` items and once at its end; a listing of
    more takes what is alive then out of the collector's full walks (`gc.freeze`): the objects it built would
    count as long-lived at once and set off a full collection of the process, in whichever thread allocates next
    (the window's, drawing the new table), or in the listing's if it collected everything itself: a walk of every
    object of a viewer holding a few GB, the interpreter lock held 1-2 s after 100,000 images (bench/RESULTS.md).
    The price: a reference cycle alive at that moment that later becomes garbage is never collected (the items
    themselves hold none; they are freed as usual)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._under_way = 0
        self._was_enabled = False

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if not self._under_way:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._under_way += 1
        try:
            yield
        finally:
            with self._lock:
                self._under_way -= 1
                if not self._under_way and self._was_enabled:
                    gc.enable()


_collection_paused = _CollectionPause()

#: Items a listing builds between two collections of its young objects (`_CollectionPause`): ~30 ms each.
COLLECT_EVERY = 20_000


def _collect_young(built: int) -> None:
    """The young generations collected once every `COLLECT_EVERY` items built (those a listing made since the last
    collection: they then sit in the oldest generation, which only the collector's own full passes walk)."""
    if built % COLLECT_EVERY == 0:
        gc.collect(1)

#: How every provenance file's name ends (`PROVENANCE_NAME`).
_PROVENANCE_ENDING = PROVENANCE_NAME.format(id="").lower()


def _folded(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


@dataclass(frozen=True)
class DatasetItem:
    """One image of a dataset. Its files are held as strings: a `Path` is two objects the garbage collector tracks,
    and each of its full walks (a stall of the viewer's window) walks every object a session keeps."""

    id: str  # the sub-folder name, or the image's stem in a flat folder
    image_file: str
    mask_file: str | None  # the original ground truth, if any
    #: Why the image cannot be used, in one line ("" when it can): a folder of the dataset that cannot be read,
    #: opened with its damaged parts (`Dataset.open(partial=True)`, the viewer's).
    problem: str = ""

    @property
    def image_path(self) -> Path:
        return Path(self.image_file)

    @property
    def mask_path(self) -> Path | None:
        return None if self.mask_file is None else Path(self.mask_file)

    @property
    def truth_path(self) -> Path | None:
        """The ground truth by the `auto` rule (`core.dataset.truth`): a saved correction wins over the original.
        `Dataset.truth(item)` follows the dataset's choice."""
        truth = truth_for(self)
        return truth.path if truth is not None else None

    @property
    def has_mask(self) -> bool:
        return self.truth_path is not None


_DIGITS = re.compile(r"(\d+)")


def _natural_key(text: str) -> list[object]:
    return [int(part) if part.isdecimal() else part.lower() for part in _DIGITS.split(text)]


def natural_order(names: Iterable[str]) -> list[str]:
    """`names` (distinct) in natural order: `2` before `10`, case ignored, equal keys in the order given. For ASCII
    names each key is one string that sorts as `_natural_key`'s parts do (each text part ended by NUL, which is
    below any character of a name; each digit run zero-padded to the longest run): the sort runs in C holding
    the GIL, and comparing 100,000 keys of mixed parts held it (so the window, while a worker lists) ~0.4 s;
    strings take a tenth of that."""
    names = list(names)
    if not all(name.isascii() for name in names):
        return sorted(names, key=_natural_key)
    split = [_DIGITS.split(name.lower()) for name in names]
    width = max((len(part) for parts in split for part in parts[1::2]), default=0)
    keys = {name: "".join(part.zfill(width) if n % 2 else part + "\0" for n, part in enumerate(parts))
            for name, parts in zip(names, split)}
    return sorted(names, key=keys.__getitem__)


def discover(root: Path, partial: bool = False) -> list[DatasetItem]:
    """The dataset's images in natural order (`2` before `10`): `root` and each folder in it listed once
    (`_Listing`), no image or mask read. A folder that cannot be read raises its OSError, and an image (or its
    folder) that is a symbolic link to nothing, or a folder holding a mask but no image, a SegScopeError naming it,
    or (`partial`) each is an item of its own whose `problem` says why. A mask that is such a link is kept as the
    image's mask: reading it says so."""
    with _collection_paused():
        items = _discover(root, partial)
        gc.collect(1)  # (here, not in the thread that allocates next: see `_CollectionPause`)
        if len(items) >= COLLECT_EVERY:
            gc.freeze()
        return items


def _discover(root: Path, partial: bool) -> list[DatasetItem]:
    listing = _Listing.of(root)
    assert listing.entries is not None
    entries = listing.entries.items()  # in the order the folder lists them (of equal keys, the first first)
    items = []

    def refused(item_id: str, path: str, problem: str) -> None:
        if not partial:
            raise SegScopeError(problem)
        items.append(DatasetItem(item_id, path, None, problem))

    image_named = {name: stem_suffix(name)[1].lower() in IMAGE_SUFFIXES for name, _kind in entries}
    for sub in natural_order(name for name, kind in entries
                             if kind & _Listing.DIR or (kind == _Listing.LINK and not image_named[name])):
        if listing.entries[sub] == _Listing.LINK:  # a folder link to nothing
            refused(sub, listing.path(sub), _dangling_problem(listing.path(sub)))
            continue
        inside = _Listing.or_asked(root / sub)
        try:
            image, mask = inside.first("image"), inside.first("mask") or inside.dangling("mask")
        except OSError as exc:
            if not partial:
                raise
            problem = (f"{root / sub}: cannot read the image's folder ({exc.strerror or exc}); the rest of the "
                       "dataset opens")
            items.append(DatasetItem(sub, listing.path(sub), None, problem))
            continue
        if image is not None:
            items.append(DatasetItem(sub, inside.path(image), None if mask is None else inside.path(mask)))
        elif (link := inside.dangling("image")) is not None:
            refused(sub, inside.path(link), _dangling_problem(inside.path(link)))
        elif mask is not None and inside.exists(mask):  # (not a link to nothing)
            refused(sub, inside.path(mask), f"{inside.path(mask)}: a mask without its image beside it (image.png or "
                                            f"another image suffix); add the image or remove the folder")
    flat = [name for name, kind in entries if kind & (_Listing.FILE | _Listing.LINK) and image_named[name]
            and not kind & _Listing.DIR and not _is_mask_file(name) and not _is_export(listing, name)]
    for name in natural_order(flat):
        stem = stem_suffix(name)[0]
        if listing.entries[name] == _Listing.LINK:
            refused(stem, listing.path(name), _dangling_problem(listing.path(name)))
            continue
        mask = listing.first(stem + MASK_SUFFIX) or listing.dangling(stem + MASK_SUFFIX)
        mask = None if mask is None or _is_export(listing, mask) else mask
        items.append(DatasetItem(stem, listing.path(name), None if mask is None else listing.path(mask)))
        _collect_young(len(items))
    return items


def _dangling_problem(path: str) -> str:
    try:
        target = f" to {os.readlink(path)}"
    except OSError:
        target = ""
    return f"{path}: a symbolic link{target}, which does not exist; restore its target or remove the link"


class Dataset:
    """A folder of slides; per-image ROIs persist in its sidecar."""

    def __init__(self, root: Path, items: list[DatasetItem], default_roi: Roi | None = None,
                 max_pixels: int = DEFAULT_MAX_PIXELS, truth: str = AUTO):
        self.root = root
        self.items = items  # (never reordered: `item` finds an id's position through `_index`)
        self.ids = [item.id for item in items]  # (made here, on the thread that lists: a view needs no pass of its own)
        self._index = {item_id: n for n, item_id in enumerate(self.ids)}
        self.max_pixels = max_pixels
        self.truth_choice = check_choice(truth)  # which truth file each image is scored against (truth.py)
        #: How the model that scores the dataset reads its masks (set once it is known: a card's truth_values);
        #: None: masks are read as stored, and scorers hold them to the conventions (`masks.mask_to_labels`).
        self.mask_rule: MaskRule | None = None
        self.sidecar_path = root / SIDECAR_NAME
        self._warned: set[str] = set()  # the mask issues already reported for this dataset
        sidecar = self._read_sidecar()
        stored_default = sidecar.get("default_roi")
        self.default_roi = default_roi or (self._roi_field(stored_default, "default_roi") if stored_default
                                           else Roi(*ORIGINAL_DEFAULT_ROI))
        self._rois = self._rois_of(sidecar)
        self._disk_rois = dict(self._rois)  # the sidecar's ROIs as last read or written (`_save_sidecar`)
        #: The sidecar as this dataset last wrote it: its file's stamp and its document (a save reads it again only
        #: when another writer replaced it since).
        self._written: tuple[Stamp, dict] | None = None
        self._moved: dict[str, Roi | None] = {}  # ROIs this session set (None: reset) not yet in the sidecar

    def _rois_of(self, sidecar: dict) -> dict[str, Roi]:
        return {key: self._roi_field(value, f"rois.{key}") for key, value in sidecar.get("rois", {}).items()}

    @classmethod
    def open(cls, root: Path, default_roi: Roi | None = None, max_pixels: int = DEFAULT_MAX_PIXELS,
             truth: str = AUTO, partial: bool = False) -> Dataset:
        """The dataset in `root`; `partial` (the viewer): an image folder that cannot be read is an item whose
        `problem` says why, and the rest opens (else it refuses the dataset, as `eval` must)."""
        root = Path(root).expanduser().resolve()
        if not root.is_dir():
            raise not_wanted(root, dataset_folder()) if root.exists() else SegScopeError(
                f"{root}: dataset folder not found")
        try:
            items = discover(root, partial)
        except OSError as exc:
            raise SegScopeError(f"{exc.filename or root}: cannot read the dataset folder ({exc.strerror})") from None
        if not any(not item.problem for item in items):
            raise SegScopeError(f"{root}: no images found (it is {what_is(root)}): expected {dataset_folder()}")
        return cls(root, items, default_roi, max_pixels, truth)

    def _read_sidecar(self) -> dict:
        if not self.sidecar_path.exists():
            return {}
        data = read_json(self.sidecar_path, "ROI sidecar")
        if not isinstance(data, dict) or not isinstance(data.get("rois", {}), dict):
            raise SegScopeError(f"{self.sidecar_path}: expected {{\"rois\": {{\"<id>\": [x0, y0, x1, y1]}}}}")
        return data

    def _roi_field(self, value: object, field: str) -> Roi:
        if not (isinstance(value, list) and len(value) == 4 and all(type(v) is int for v in value)):
            raise SegScopeError(f"{self.sidecar_path}: {field} must be [x0, y0, x1, y1] integers, got {value!r}")
        roi = Roi(*value)
        roi.validate(f"{self.sidecar_path}: {field}")
        return roi

    def __len__(self) -> int:
        return len(self.items)

    def item(self, item_id: str) -> DatasetItem:
        index = self._index.get(item_id)
        if index is None:
            raise SegScopeError(f"{self.root}: no image with id {item_id!r}")
        return self.items[index]

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._index

    @property
    def positions(self) -> Mapping[str, int]:
        """Each image id's position in `items` (read-only)."""
        return self._index

    def image_size(self, item: DatasetItem) -> tuple[int, int]:
        """Level 0's size from the file's header or directories (a slide's reader), never a full decode."""
        return slide_size(item.image_path, self.max_pixels)

    def stored_roi(self, item: DatasetItem) -> Roi | None:
        return self._rois.get(item.id)

    def default_roi_for(self, image_size: tuple[int, int]) -> Roi:
        return self.default_roi if self.default_roi.fits(*image_size) else Roi.whole(*image_size)

    def roi_for(self, item: DatasetItem, image_size: tuple[int, int] | None = None) -> Roi:
        """The ROI to crop: the one picked for this image, else the default rule."""
        return self._rois.get(item.id) or self.default_roi_for(image_size or self.image_size(item))

    def set_roi(self, item: DatasetItem, roi: Roi) -> list[str]:
        """Remember `roi` for `item` and save the sidecar (`_save_sidecar`); returns its warnings."""
        roi.validate(f"ROI of {item.id}")
        self._rois[item.id] = self._moved[item.id] = roi
        return self._save_sidecar()

    def reset_roi(self, item: DatasetItem) -> list[str]:
        if self._rois.pop(item.id, None) is None:
            return []
        self._moved[item.id] = None
        return self._save_sidecar()

    def _save_sidecar(self) -> list[str]:
        """Write this session's ROI moves into the sidecar as it is now on disk, merged per image under a short
        lock: another viewer's ROIs of other images survive (read-modify-write); a move of an image another
        viewer moved too since it was read is this session's, said in a warning (returned). A sidecar that cannot be
        written or read keeps the moves for this session (and a later save) and says so."""
        error = gone(self.root, "the ROI is kept for this session only")
        if error is not None:
            raise error
        try:
            with short_lock(self.root, SIDECAR_LOCK, "ROI sidecar writer"):
                written = self._written
                if written is not None and written[0].same(Stamp.of(self.sidecar_path)):
                    disk, rois = written[1], dict(self._disk_rois)  # (as this dataset wrote it: not parsed again)
                else:
                    disk = self._read_sidecar()
                    rois = self._rois_of(disk)
                both = [key for key, roi in self._moved.items() if rois.get(key) != self._disk_rois.get(key)
                        and rois.get(key) != roi]
                for key, roi in self._moved.items():
                    if roi is None:
                        rois.pop(key, None)
                    else:
                        rois[key] = roi
                data = {**disk, "version": 1, "default_roi": disk.get("default_roi",
                                                                       list(self.default_roi.as_tuple())),
                        "rois": {key: list(roi.as_tuple()) for key, roi in sorted(rois.items())}}
                atomic_write_bytes(self.sidecar_path, (json.dumps(data, indent=2) + "\n").encode(), overwrite=True)
                self._written = (Stamp.of(self.sidecar_path), data)
        except OSError as exc:
            raise SegScopeError(f"{self.sidecar_path}: cannot save ROIs ({exc.strerror}); "
                                "the ROI is kept for this session only") from None
        except SegScopeError as exc:
            raise SegScopeError(f"{exc}; the ROI is kept for this session only") from None
        self._moved.clear()
        self._disk_rois = rois
        return [f"{self.sidecar_path}: the ROI of {key} was also moved by another viewer since this one read it; "
                "this viewer's move is saved" for key in both]

    def adopt_mask(self, item: DatasetItem, written: Path) -> DatasetItem:
        """The item after a mask was saved to `written`: an image that had none now points at it."""
        if item.mask_file is not None or written != default_mask_path(item.image_path):
            return item  # a correction beside the original is found through `truth_path`
        updated = dataclasses.replace(item, mask_file=str(written))
        self.items[self._index[item.id]] = updated
        return updated

    def truth(self, item: DatasetItem) -> Truth | None:
        """The truth file `item` is scored against by the dataset's choice (`truth_choice`), None without one."""
        return truth_for(item, self.truth_choice)

    def truth_count(self) -> int:
        """How many images have a truth (`truth` not None). Under `auto` and `original` an image with an original
        mask has one whatever lies beside it, so only the others are looked for on disk: 100,000 masked images
        are counted without a `stat` each."""
        if self.truth_choice == CORRECTED:
            return sum(self.truth(item) is not None for item in self.items)
        return sum(item.mask_file is not None or self.truth(item) is not None for item in self.items)

    def rule_for(self, truth: Truth) -> MaskRule | None:
        """How `truth` is read: by the model's `mask_rule`, except that a saved correction holds SegScope's own
        convention (0/255 or class indices) whatever values a card declares for the originals."""
        rule = self.mask_rule
        return MaskRule(rule.num_classes) if rule is not None and truth.kind == CORRECTED else rule

    def load_mask(self, item: DatasetItem) -> np.ndarray | None:
        """The item's ground truth (`truth`), or None; with a `mask_rule`, checked and in SegScope's convention."""
        truth = self.truth(item)
        if truth is None:
            return None
        read, rule = read_truth(truth.path, self.max_pixels), self.rule_for(truth)  # through the decoded-input cache
        return relabelled(read.whole(), rule.canonical_table(read.counts, str(truth.path)) if rule else None)

    def open_mask(self, item: DatasetItem, num_classes: int | None = None) -> MaskReader | None:
        """The item's ground truth (`truth`) opened for region reads (a tiled TIFF mask is never decoded whole), or
        None. Read by the dataset's rule (`rule_for`); without one yet, by a `num_classes` model's conventions
        when given."""
        truth = self.truth(item)
        if truth is None:
            return None
        rule = self.rule_for(truth) or (MaskRule(num_classes) if num_classes is not None else None)
        return MaskReader(truth.path, self.max_pixels, rule)

    def check_mask(self, item: DatasetItem, mask: np.ndarray, num_classes: int) -> None:
        """Refuse (one line naming the truth file and its values) mask values, as read by this dataset, that are no
        convention for a `num_classes` model (`core.dataset.masks`)."""
        truth = self.truth(item)
        MaskRule(num_classes).check(histogram(mask), str(truth.path if truth else item.image_path))

    def warn_once(self, path: Path, note: str) -> None:
        """Log `note` about `path` once per dataset for its kind (the text before any parenthesis)."""
        kind = note.split("(", 1)[0]
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("%s: %s (reported once for the dataset %s)", path, note, self.root)
