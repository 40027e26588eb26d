"""Writing results to disk: masks, full-slide canvases, softmax tensors, heatmaps and metric tables.

Every file is written atomically (temp file + rename), so none is ever partial. Existing files are never
replaced unless `overwrite` is set, and all targets are checked before the first write, so a name clash
stops an export before it writes anything.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from pathlib import Path

import cv2
import numpy as np

from .backends.base import InferenceResult
from .errors import SegScopeError
from .fileio import atomic_write_bytes, encode_image
from .metrics import argmax_at_roi

#: What `export_result` can write, with each file's name pattern.
EXPORT_KINDS = {
    "mask": "{id}_mask.png",  # argmax at ROI size: 0/255 for binary models, class index otherwise
    "canvas": "{id}_mask_full.png",  # the same mask pasted into a slide-size canvas
    "softmax": "{id}_softmax.npy",  # probabilities, float32 H x W x C at model resolution
    "heatmap": "{id}_heatmap.png",  # foreground probability as an 8-bit colour map, viewable anywhere
}
#: The metric tables `write_metrics` writes (one row per image; rows + dataset means).
METRICS_FILES = ("metrics.csv", "metrics.json")


def mask_image(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Labels as a grayscale PNG array: 0/255 when binary, else the class index."""
    return (labels * 255).astype(np.uint8) if num_classes == 2 else labels.astype(np.uint8)


def heatmap_image(probabilities: np.ndarray, class_index: int = 1) -> np.ndarray:
    p = probabilities[..., min(class_index, probabilities.shape[-1] - 1)]
    levels = np.round(np.clip(p, 0.0, 1.0) * 255).astype(np.uint8)
    return cv2.applyColorMap(levels, cv2.COLORMAP_VIRIDIS)  # the viewer's heatmap colours


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _refuse_existing(paths: Iterable[Path], overwrite: bool) -> None:
    existing = [p for p in paths if p.exists()]
    if existing and not overwrite:
        more = f" and {len(existing) - 1} more" if len(existing) > 1 else ""
        raise SegScopeError(f"{existing[0]}{more}: already exists (use --overwrite to replace)")


def export_result(result: InferenceResult, out_dir: Path, item_id: str, kinds: Iterable[str] = tuple(EXPORT_KINDS),
                  overwrite: bool = False) -> list[Path]:
    """Write the chosen `kinds` of one result into `out_dir`; returns the paths written."""
    unknown = set(kinds) - set(EXPORT_KINDS)
    if unknown:
        raise SegScopeError(f"export: unknown kind(s) {sorted(unknown)}; choose from {', '.join(EXPORT_KINDS)}")
    targets = {kind: Path(out_dir) / EXPORT_KINDS[kind].format(id=item_id) for kind in EXPORT_KINDS if kind in kinds}
    _refuse_existing(targets.values(), overwrite)
    labels = argmax_at_roi(result) if {"mask", "canvas"} & targets.keys() else None
    payloads: dict[str, bytes] = {}
    if "mask" in targets:
        payloads["mask"] = encode_image(mask_image(labels, result.num_classes))
    if "canvas" in targets:
        canvas = np.zeros(result.image_size[::-1], np.uint8)
        roi = result.roi
        canvas[roi.y0 : roi.y1, roi.x0 : roi.x1] = mask_image(labels, result.num_classes)
        payloads["canvas"] = encode_image(canvas)
    if "softmax" in targets:
        payloads["softmax"] = _npy_bytes(result.probabilities.astype(np.float32, copy=False))
    if "heatmap" in targets:
        payloads["heatmap"] = encode_image(heatmap_image(result.probabilities))
    return [atomic_write_bytes(targets[kind], payloads[kind], overwrite=True) for kind in targets]


def _json_safe(value: object) -> object:
    """NaN (a mean over no masks) becomes null: JSON has no NaN."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def write_metrics(rows: list[dict[str, object]], summary: dict[str, object], out_dir: Path,
                  overwrite: bool = False) -> list[Path]:
    """`METRICS_FILES` in `out_dir`: a CSV row per image, and JSON with the rows and the dataset means."""
    csv_path, json_path = (Path(out_dir) / name for name in METRICS_FILES)
    _refuse_existing([csv_path, json_path], overwrite)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    document = json.dumps(_json_safe({"images": rows, "summary": summary}), indent=2, allow_nan=False)
    return [atomic_write_bytes(csv_path, text.getvalue().encode(), overwrite=True),
            atomic_write_bytes(json_path, (document + "\n").encode(), overwrite=True)]
