"""Masks as COCO instance segmentations, the prediction and the truth, so pycocotools' `COCOeval` scores a run
(and CVAT or any COCO tool imports it); written only (a truth is read from mask files, never from COCO).

Every 8-connected component of a class (≥ 1) is one instance, `iscrowd` 0, its mask COCO's compressed
column-major RLE on the full image (pycocotools encodes it; its `area` and `bbox` come from the same library),
so `pycocotools.mask.decode` gives back exactly that component's pixels. Per run (`CocoDocument.files`):

- `annotations.coco.json`: a COCO dataset of the prediction: `images` (path relative to the dataset, full size,
  `segscope_id`), `categories` from the card (id = class index), one annotation per predicted instance with its
  `score`: the mean probability of its class over its pixels (at ROI resolution, as the mask was decided);
- `truth.coco.json`: a COCO dataset of the ground truth of the images that have one (same image and category
  ids), one annotation per true instance, of the truth inside each image's scored ROI only;
- `predictions.coco.json`: COCO results (a list of `{image_id, category_id, segmentation, score}`) of those same
  images, so that `cocoGt = COCO("truth.coco.json"); COCOeval(cocoGt, cocoGt.loadRes("predictions.coco.json"),
  "segm")` evaluates the run (images without a truth are in neither of the two: they are no known negatives).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import cv2
import numpy as np
from pycocotools import mask as coco_mask

from ..export.names import COCO_EVALUATION, RUN_KINDS
from ..result import InferenceResult
from ..roi import Roi
from ..wording import class_name

ANNOTATIONS, (TRUTH, PREDICTIONS) = RUN_KINDS["coco"], COCO_EVALUATION


def instance_rle(component: np.ndarray, roi: Roi, image_size: tuple[int, int]) -> dict[str, Any]:
    """COCO compressed RLE of a bool ROI-sized mask placed at `roi` on an image of `image_size` (width, height),
    made from the pixels' column-major positions (no full-image canvas)."""
    width, height = image_size
    ys, xs = np.nonzero(component)
    positions = np.sort((xs.astype(np.int64) + roi.x0) * height + ys + roi.y0)
    breaks = np.flatnonzero(np.diff(positions) != 1) + 1
    starts, ends = positions[np.r_[0, breaks]], positions[np.r_[breaks - 1, positions.size - 1]] + 1
    edges = np.stack([starts, ends], axis=1).ravel()  # alternating 0 -> 1 and 1 -> 0 positions
    counts = np.diff(np.r_[0, edges, width * height]).tolist()
    rle = coco_mask.frPyObjects({"size": [height, width], "counts": counts}, height, width)
    return rle  # type: ignore[no-any-return]


def instances(labels: np.ndarray, num_classes: int) -> list[tuple[int, np.ndarray]]:
    """(class index, bool component) of every 8-connected component of each class >= 1 of an ROI's labels."""
    found = []
    for index in range(1, num_classes):
        count, components = cv2.connectedComponents((labels == index).view(np.uint8), connectivity=8)
        found += [(index, components == k) for k in range(1, count)]
    return found


def _annotation(rle: dict[str, Any], image_id: int, category: int, score: float | None = None) -> dict[str, Any]:
    x, y, w, h = (float(v) for v in coco_mask.toBbox(rle))
    return {"image_id": image_id, "category_id": category, "iscrowd": 0, "area": int(coco_mask.area(rle)),
            "bbox": [x, y, w, h], **({"score": score} if score is not None else {}),
            "segmentation": {"size": [int(s) for s in rle["size"]], "counts": rle["counts"].decode("ascii")}}


class CocoDocument:
    """A run's images with their predicted and true instances, added one image at a time (any thread)."""

    def __init__(self) -> None:
        self.images: list[dict[str, object]] = []
        self.predicted: list[dict[str, Any]] = []
        self.truth: list[dict[str, Any]] = []
        self.with_truth: set[int] = set()  # ids of the images added with their truth
        self.categories: dict[int, str] = {}
        self._lock = threading.Lock()

    def add(self, item_id: str, file_name: str, labels: np.ndarray, result: InferenceResult,
            class_names: Sequence[str] = (), truth: np.ndarray | None = None) -> None:
        """One image: `labels` are its predicted classes on the result's ROI (0 = background), `truth` the true
        classes there (None: the image has no ground truth)."""
        roi, size = result.roi, result.image_size
        scores = cv2.resize(result.probabilities, (roi.width, roi.height), interpolation=cv2.INTER_LINEAR) \
            if result.probabilities.shape[1::-1] != (roi.width, roi.height) else result.probabilities
        predicted = [(index, component, float(scores[..., index][component].mean()))
                     for index, component in instances(labels, result.num_classes)]
        true = [(index, component) for index, component in instances(truth, result.num_classes)] \
            if truth is not None else []
        with self._lock:
            image_id = len(self.images) + 1
            self.images.append({"id": image_id, "file_name": file_name, "width": size[0], "height": size[1],
                                "segscope_id": item_id})
            for index in range(1, result.num_classes):
                self.categories.setdefault(index, class_name(class_names, index))
            self.predicted += [_annotation(instance_rle(c, roi, size), image_id, i, s) for i, c, s in predicted]
            self.truth += [_annotation(instance_rle(c, roi, size), image_id, i) for i, c in true]
            if truth is not None:
                self.with_truth.add(image_id)

    def __bool__(self) -> bool:
        return bool(self.images)

    def files(self, version: str) -> dict[str, bytes]:
        """The run's COCO files by name: the prediction dataset, and the truth dataset with the results of the
        same images when any image had a truth."""
        info: dict[str, object] = {"version": version,
                                   "date_created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        categories = [{"id": index, "name": name, "supercategory": "segscope"}
                      for index, name in sorted(self.categories.items())]

        def dataset(description: str, images: list[dict[str, object]], annotations: list[dict[str, Any]]) -> bytes:
            numbered = [{"id": k, **annotation} for k, annotation in enumerate(annotations, 1)]
            described: dict[str, object] = {"description": description, **info}
            return _json({"info": described, "licenses": [], "images": images,
                          "annotations": numbered, "categories": categories})

        files = {ANNOTATIONS: dataset("SegScope predictions (one instance per connected component, with its "
                                      "score)", self.images, self.predicted)}
        if self.with_truth:
            scored = [image for image in self.images if image["id"] in self.with_truth]
            files[TRUTH] = dataset("SegScope ground truth (one instance per connected component)", scored, self.truth)
            files[PREDICTIONS] = _json([{key: a[key] for key in ("image_id", "category_id", "segmentation", "score")}
                                        for a in self.predicted if a["image_id"] in self.with_truth])
        return files


def _json(document: object) -> bytes:
    return (json.dumps(document, indent=1) + "\n").encode()
