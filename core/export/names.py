"""The names `core.export.files` gives the files it writes, in one place: the exporter writes them, and the dataset
reader uses them so an export is never taken for an image or for ground truth."""

from __future__ import annotations

import re
from pathlib import Path

#: What `export_result` can write, with each file's name pattern (masks take their format's suffix).
EXPORT_KINDS = {
    "mask": "{id}_mask.png",  # predicted classes at ROI size
    "canvas": "{id}_mask_full.png",  # the same mask pasted into a slide-size canvas
    "softmax": "{id}_softmax.npy",  # probabilities, float32 H x W x C at model resolution
    "heatmap": "{id}_heatmap.png",  # foreground probability as an 8-bit colour map, viewable anywhere
    "geojson": "{id}_mask.geojson",  # the predicted classes as QuPath annotations (core/interchange/geojson.py)
    "corrected": "{id}_corrected_truth.png",  # the item's saved correction (mask_corrected.png), copied as it is
}
#: What an export writes when no kinds are named (`--export-kinds`' default).
DEFAULT_KINDS = ("mask", "canvas", "softmax", "heatmap")
#: What an export writes once for the whole run, with the file's name.
RUN_KINDS = {"coco": "annotations.coco.json"}  # every image's predicted instances as COCO (interchange/coco.py)
#: What "coco" also writes when images have a ground truth: it as a COCO dataset, and the prediction of those
#: images as COCO results, for pycocotools' COCOeval.
COCO_EVALUATION = ("truth.coco.json", "predictions.coco.json")
#: What "corrected" also writes when the dataset has a review log (`core.review.log`): the decisions behind the
#: corrections, copied as they are.
REVIEW_LOG = "review_log.jsonl"
MASK_KINDS = ("mask", "canvas")
#: Mask file formats: all lossless, values kept as they are.
MASK_FORMATS = {"png": ".png", "tiff": ".tif", "npy": ".npy"}
PROVENANCE_NAME = "{id}_provenance.json"
#: How a tiled run writes its stitched mask and heatmap (`core.wholeslide.export`); `auto`: PNG up to
#: `PNG_MAX_SIDE`, pyramidal OME-TIFF beyond.
STITCHED_FORMATS = ("auto", "png", "ome-tiff")
#: Longest side (output pixels) up to which `--stitched-format auto` writes PNG.
PNG_MAX_SIDE = 8192
#: The metric tables `write_metrics` writes (one row per image; rows + dataset means).
METRICS_FILES = ("metrics.csv", "metrics.json")

#: Stems of per-item exports (any suffix), each capturing the item id.
_ITEM_STEMS = [re.compile("^" + re.escape(Path(p).stem).replace(re.escape("{id}"), "(.+)") + "$")
               for p in [*EXPORT_KINDS.values(), PROVENANCE_NAME]]


def stem_suffix(name: str) -> tuple[str, str]:
    """A file name's `Path(name).stem` and `.suffix` (`a.png` -> `a`, `.png`; `.png` -> `.png`, ``) without making
    a `Path`: the dataset reader tests every name of a folder (200,000 in one of 100,000 images)."""
    dot = name.rfind(".")
    return (name[:dot], name[dot:]) if 0 < dot < len(name) - 1 else (name, "")


def exported_item(name: str) -> str | None:
    """The item id of a file named like one of an item's exports (`a_mask.tif` -> "a"), else None."""
    stem = stem_suffix(name)[0]
    return next((m.group(1) for pattern in _ITEM_STEMS if (m := pattern.match(stem))), None)
