"""The dataset listing rule as SegScope applied it before it listed each folder once: a `Path.exists` (`stat`) per
candidate suffix and per entry. Kept as the reference the one-listing `core.dataset.dataset.discover` must agree
with (tests/core/test_dataset_listing.py) and as the baseline bench/bench_dataset_open.py times it against."""

from __future__ import annotations

import re
from pathlib import Path

from segscope.core.dataset.dataset import BACKUP_SUFFIX, DatasetItem
from segscope.core.dataset.truth import CORRECTED_SUFFIX, MASK_SUFFIX
from segscope.core.errors import SegScopeError
from segscope.core.export.names import PROVENANCE_NAME, exported_item
from segscope.core.files.image_types import IMAGE_SUFFIXES


def _natural_key(text: str) -> list[object]:
    return [int(part) if part.isdecimal() else part.lower() for part in re.split(r"(\d+)", text)]


def _is_mask_file(path: Path) -> bool:
    stem = path.stem.removesuffix(BACKUP_SUFFIX).removesuffix(CORRECTED_SUFFIX)
    return stem.endswith(MASK_SUFFIX)


def _is_export(path: Path) -> bool:
    item = exported_item(path.name)
    return item is not None and (path.parent / PROVENANCE_NAME.format(id=item)).is_file()


def _first_image(folder: Path, stem: str) -> Path | None:
    return next((p for s in IMAGE_SUFFIXES if (p := folder / f"{stem}{s}").exists()), None)


def _dangling(folder: Path, stem: str) -> Path | None:
    return next((p for s in IMAGE_SUFFIXES if (p := folder / f"{stem}{s}").is_symlink() and not p.exists()), None)


def _item(item_id: str, image: Path, mask: Path | None, problem: str = "") -> DatasetItem:
    return DatasetItem(item_id, str(image), None if mask is None else str(mask), problem)


def discover_by_stat(root: Path, partial: bool = False) -> list[DatasetItem]:
    """The dataset's images in natural order, found by asking the file system about every candidate name. An image
    (or its folder) that is a symbolic link to nothing, or a folder with a mask but no image, raises SegScopeError,
    or (`partial`) is an item whose problem says so; a mask that is such a link is kept as the mask."""
    items = []

    def broken(item_id: str, path: Path) -> None:
        if not partial:
            raise SegScopeError(f"{path}: cannot be used")
        items.append(_item(item_id, path, None, "cannot be used"))

    dangling = [p for p in root.iterdir() if p.is_symlink() and not p.exists()]
    subs = [p for p in root.iterdir() if p.is_dir()] + [p for p in dangling if p.suffix.lower() not in IMAGE_SUFFIXES]
    for sub in sorted(subs, key=lambda p: _natural_key(p.name)):
        if not sub.exists():
            broken(sub.name, sub)
            continue
        image = _first_image(sub, "image")
        if image is not None:
            items.append(_item(sub.name, image, _first_image(sub, "mask") or _dangling(sub, "mask")))
        elif (link := _dangling(sub, "image")) is not None:
            broken(sub.name, link)
        elif (mask := _first_image(sub, "mask")) is not None:  # a mask without its image
            broken(sub.name, mask)
    flat = [p for p in root.iterdir() if (p.is_file() or p in dangling) and p.suffix.lower() in IMAGE_SUFFIXES
            and not _is_mask_file(p) and not _is_export(p)]
    for image in sorted(flat, key=lambda p: _natural_key(p.name)):
        if image in dangling:
            broken(image.stem, image)
            continue
        mask = _first_image(root, image.stem + MASK_SUFFIX) or _dangling(root, image.stem + MASK_SUFFIX)
        items.append(_item(image.stem, image, None if mask is None or _is_export(mask) else mask))
    return items
