"""Writing results to disk: masks, full-slide canvases, softmax tensors, heatmaps, metric tables.

Every export carries provenance: `<id>_provenance.json` beside the files records the source image, the ROI
in slide pixels, the model and its SHA-256, the backend, the threshold and each file's hash (see
`provenance.py`). Masks are single-channel uint8 with no colour table (0/255 for binary models, the class
index otherwise), named after the dataset item, so `<id>_mask_full.png` re-opens as that image's ground
truth unchanged.

Every file is written atomically (temp file + rename), so none is ever partial. Existing files are never
replaced unless `overwrite` is set, and all targets are checked before the first write, so a name clash
stops an export before it writes anything.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import cv2
import numpy as np

from .annotation import prediction_labels
from .errors import SegScopeError
from .fileio import atomic_write_bytes, encode_image
from .metrics import BINARY_FOREGROUND
from .provenance import Source, provenance
from .result import InferenceResult
from .roi import Roi

#: What `export_result` can write, with each file's name pattern (masks take their format's suffix).
EXPORT_KINDS = {
    "mask": "{id}_mask.png",  # predicted classes at ROI size
    "canvas": "{id}_mask_full.png",  # the same mask pasted into a slide-size canvas
    "softmax": "{id}_softmax.npy",  # probabilities, float32 H x W x C at model resolution
    "heatmap": "{id}_heatmap.png",  # foreground probability as an 8-bit colour map, viewable anywhere
}
MASK_KINDS = ("mask", "canvas")
#: Mask file formats: all lossless, values kept as they are.
MASK_FORMATS = {"png": ".png", "tiff": ".tif", "npy": ".npy"}
PROVENANCE_NAME = "{id}_provenance.json"
#: The metric tables `write_metrics` writes (one row per image; rows + dataset means).
METRICS_FILES = ("metrics.csv", "metrics.json")


def mask_image(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Labels as a grayscale PNG array: 0/255 when binary, else the class index."""
    return (labels * BINARY_FOREGROUND).astype(np.uint8) if num_classes == 2 else labels.astype(np.uint8)


def heatmap_image(probabilities: np.ndarray, class_index: int = 1) -> np.ndarray:
    p = probabilities[..., min(class_index, probabilities.shape[-1] - 1)]
    levels = np.round(np.clip(p, 0.0, 1.0) * 255).astype(np.uint8)
    return cv2.applyColorMap(levels, cv2.COLORMAP_VIRIDIS)  # the viewer's heatmap colours


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def encode_mask(mask: np.ndarray, fmt: str) -> bytes:
    """A 2-D uint8 mask as PNG/TIFF (grayscale, no palette) or NPY bytes."""
    if fmt not in MASK_FORMATS:
        raise SegScopeError(f"mask format {fmt!r}: choose from {', '.join(MASK_FORMATS)}")
    if mask.ndim != 2 or mask.dtype != np.uint8:
        raise SegScopeError(f"a mask to export must be 2-D uint8, got {mask.dtype} {mask.shape}")
    return _npy_bytes(mask) if fmt == "npy" else encode_image(mask, MASK_FORMATS[fmt])


def slide_canvas(values: np.ndarray, roi: Roi, image_size: tuple[int, int]) -> np.ndarray:
    """ROI-sized mask values pasted into a zero slide-sized (`image_size` = width, height) mask."""
    canvas = np.zeros(image_size[::-1], np.uint8)
    canvas[roi.y0 : roi.y1, roi.x0 : roi.x1] = values
    return canvas


def refuse_existing(paths: Iterable[Path], overwrite: bool) -> None:
    """Raise, naming the first, when any of `paths` exists and `overwrite` is not set."""
    existing = [p for p in paths if p.exists()]
    if existing and not overwrite:
        more = f" and {len(existing) - 1} more" if len(existing) > 1 else ""
        raise SegScopeError(f"{existing[0]}{more}: already exists (use --overwrite to replace)")


def export_result(result: InferenceResult, out_dir: Path, source: Source, kinds: Iterable[str] = tuple(EXPORT_KINDS),
                  mask_formats: Iterable[str] = ("png",), overwrite: bool = False) -> list[Path]:
    """Write the chosen `kinds` of one result, masks in each of `mask_formats`, then the provenance sidecar.

    The masks are `source.threshold`-ed probabilities of `source.class_index`, or the argmax when the
    threshold is None. Returns the paths written, sidecar last.
    """
    kinds, mask_formats = list(kinds), list(mask_formats)
    unknown = set(kinds) - set(EXPORT_KINDS) or set(mask_formats) - set(MASK_FORMATS)
    if unknown:
        raise SegScopeError(f"export: unknown kind(s) or format(s) {sorted(unknown)}; kinds: "
                            f"{', '.join(EXPORT_KINDS)}; mask formats: {', '.join(MASK_FORMATS)}")
    out_dir = Path(out_dir)
    payloads: dict[Path, tuple[str, bytes]] = {}  # path -> (kind, bytes), in EXPORT_KINDS order
    values = None
    for kind in (k for k in EXPORT_KINDS if k in kinds):
        name = EXPORT_KINDS[kind].format(id=source.item_id)
        if kind in MASK_KINDS:
            if values is None:
                values = mask_image(prediction_labels(result, source.threshold, source.class_index), result.num_classes)
            mask = values if kind == "mask" else slide_canvas(values, result.roi, result.image_size)
            for fmt in mask_formats:
                payloads[out_dir / Path(name).with_suffix(MASK_FORMATS[fmt])] = (kind, encode_mask(mask, fmt))
        elif kind == "softmax":
            payloads[out_dir / name] = (kind, _npy_bytes(result.probabilities.astype(np.float32, copy=False)))
        else:
            payloads[out_dir / name] = (kind, encode_image(heatmap_image(result.probabilities, source.class_index)))
    sidecar = out_dir / PROVENANCE_NAME.format(id=source.item_id)
    refuse_existing([*payloads, sidecar], overwrite)
    written = [atomic_write_bytes(path, data, overwrite=True) for path, (_, data) in payloads.items()]
    document = provenance(source, result, {path: kind for path, (kind, _) in payloads.items()})
    return [*written, atomic_write_bytes(sidecar, (json.dumps(document, indent=2) + "\n").encode(), overwrite=True)]


def json_safe(value: object) -> object:
    """NaN (a mean over no masks) becomes null: JSON has no NaN."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _csv_row(row: dict[str, object]) -> dict[str, object]:
    """A per-class tuple (`dice`, `iou`) becomes one column per class: `dice_0`, `dice_1`, ..."""
    flat: dict[str, object] = {}
    for key, value in row.items():
        if isinstance(value, (list, tuple)):
            flat.update({f"{key}_{index}": v for index, v in enumerate(value)})
        else:
            flat[key] = value
    return flat


def write_metrics(rows: list[dict[str, object]], summary: Mapping[str, object], out_dir: Path,
                  overwrite: bool = False) -> list[Path]:
    """`METRICS_FILES` in `out_dir`: a CSV row per image, and JSON with the rows and the dataset means."""
    csv_path, json_path = (Path(out_dir) / name for name in METRICS_FILES)
    refuse_existing([csv_path, json_path], overwrite)
    flat = [_csv_row(row) for row in rows]
    columns = list(dict.fromkeys(key for row in flat for key in row))
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat)
    document = json.dumps(json_safe({"images": rows, "summary": summary}), indent=2, allow_nan=False)
    return [atomic_write_bytes(csv_path, text.getvalue().encode(), overwrite=True),
            atomic_write_bytes(json_path, (document + "\n").encode(), overwrite=True)]
