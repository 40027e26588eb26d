"""Exports that say where they came from: masks in PNG, TIFF or NPY plus a JSON provenance sidecar.

Masks are single-channel uint8 with no colour table (0/255 for binary models, the class index otherwise),
named after the dataset item (`<id>_mask.png` at ROI size, `<id>_mask_full.png` slide-sized), so the
slide-sized one re-opens as that image's ground truth unchanged. `<id>_provenance.json` records the source
image, the ROI in slide pixels, the model file and its SHA-256, the backend, the threshold, the time, the
SegScope version and every file written with its own hash.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import numpy as np

from .annotation import prediction_labels
from .backends.base import InferenceResult
from .errors import SegScopeError
from .export import EXPORT_KINDS, _refuse_existing, mask_image
from .fileio import atomic_write_bytes, encode_image
from .roi import Roi

#: Mask file formats: name -> suffix. All are lossless and keep the values as they are.
MASK_FORMATS = {"png": ".png", "tiff": ".tif", "npy": ".npy"}
PROVENANCE_NAME = "{id}_provenance.json"


def segscope_version() -> str:
    try:
        return metadata.version("segscope")
    except metadata.PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=32)
def _sha256_cached(path: Path, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file; remembered while the file's size and modification time stay the same."""
    path = Path(path).resolve()
    try:
        stat = path.stat()
    except OSError as exc:
        raise SegScopeError(f"{path}: cannot hash ({exc.strerror})") from None
    return _sha256_cached(path, stat.st_size, stat.st_mtime_ns)


def encode_mask(mask: np.ndarray, fmt: str) -> bytes:
    """A 2-D uint8 mask as PNG/TIFF (grayscale, no palette) or NPY bytes."""
    if fmt not in MASK_FORMATS:
        raise SegScopeError(f"mask format {fmt!r}: choose from {', '.join(MASK_FORMATS)}")
    if mask.ndim != 2 or mask.dtype != np.uint8:
        raise SegScopeError(f"a mask to export must be 2-D uint8, got {mask.dtype} {mask.shape}")
    if fmt == "npy":
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(mask), allow_pickle=False)
        return buffer.getvalue()
    return encode_image(mask, MASK_FORMATS[fmt])


def slide_canvas(values: np.ndarray, roi: Roi, image_size: tuple[int, int]) -> np.ndarray:
    """ROI-sized mask values pasted into a zero slide-sized (`image_size` = width, height) mask."""
    canvas = np.zeros(image_size[::-1], np.uint8)
    canvas[roi.y0 : roi.y1, roi.x0 : roi.x1] = values
    return canvas


@dataclass(frozen=True)
class Source:
    """What an export is made from: the dataset item, the model and the settings."""

    item_id: str
    image: Path
    model: Path | None = None  # the model file the backend ran (local path, or as the remote host named it)
    model_sha256: str | None = None  # None: hashed here when `model` is a local file
    backend: str = ""
    threshold: float | None = None  # None: argmax
    class_index: int = 1  # the class the threshold applies to


def provenance(source: Source, result: InferenceResult, files: dict[Path, str]) -> dict[str, object]:
    """The sidecar document for `files` (path -> kind) exported from `result`."""
    model_hash = source.model_sha256
    if model_hash is None and source.model is not None and Path(source.model).is_file():
        model_hash = sha256_file(source.model)
    return {
        "segscope_version": segscope_version(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "image_id": source.item_id,
        "source_image": str(Path(source.image).resolve()),
        "image_size": list(result.image_size),
        "roi": list(result.roi.as_tuple()),
        "roi_units": "slide pixels, [x0, y0, x1, y1) with x1, y1 exclusive",
        "model": {"file": str(source.model) if source.model else None, "sha256": model_hash},
        "backend": source.backend or result.backend,
        "threshold": source.threshold,
        "class_index": source.class_index if source.threshold is not None else None,
        "mask_values": "0 background, 255 foreground" if result.num_classes == 2 else "class index",
        "files": [{"name": path.name, "kind": kind, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
                  for path, kind in files.items()],
    }


def export_prediction(result: InferenceResult, out_dir: Path, source: Source, formats: tuple[str, ...] = ("png",),
                      overwrite: bool = False) -> list[Path]:
    """Write the predicted mask at ROI size and slide size in each format, then the provenance sidecar.

    Every target is checked first, so nothing is written when one exists and `overwrite` is not set.
    """
    unknown = set(formats) - set(MASK_FORMATS)
    if unknown:
        raise SegScopeError(f"export: unknown format(s) {sorted(unknown)}; choose from {', '.join(MASK_FORMATS)}")
    out_dir = Path(out_dir)
    values = mask_image(prediction_labels(result, source.threshold, source.class_index), result.num_classes)
    masks = {"mask": values, "canvas": slide_canvas(values, result.roi, result.image_size)}
    targets = {out_dir / Path(EXPORT_KINDS[kind].format(id=source.item_id)).with_suffix(MASK_FORMATS[fmt]): (kind, fmt)
               for kind in masks for fmt in formats}
    sidecar = out_dir / PROVENANCE_NAME.format(id=source.item_id)
    _refuse_existing([*targets, sidecar], overwrite)
    for path, (kind, fmt) in targets.items():
        atomic_write_bytes(path, encode_mask(masks[kind], fmt), overwrite=True)
    document = json.dumps(provenance(source, result, {path: kind for path, (kind, _) in targets.items()}), indent=2)
    return [*targets, atomic_write_bytes(sidecar, (document + "\n").encode(), overwrite=True)]
