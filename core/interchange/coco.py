"""Masks as COCO annotations for COCO-based pipelines and CVAT: `annotations.coco.json` for a run.

`images` name each exported image (its path relative to the dataset, its full size and SegScope's id),
`categories` the card's foreground classes (id = class index), and each image has one annotation per class it
holds: `iscrowd` 1 with the class's full-image mask as COCO's compressed column-major RLE, encoded by
pycocotools (COCO's reference implementation), with its `area` and `bbox` from the same library. Decoding an
annotation (`pycocotools.mask.decode`) gives the exported full-size mask of that class exactly.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np
from pycocotools import mask as coco_mask

from ..roi import Roi


def class_rle(labels: np.ndarray, roi: Roi, image_size: tuple[int, int], index: int) -> dict[str, Any]:
    """COCO RLE of where an ROI's `labels` are `index`, on an image of `image_size` (width, height)."""
    width, height = image_size
    canvas = np.zeros((height, width), np.uint8, order="F")
    canvas[roi.y0 : roi.y1, roi.x0 : roi.x1] = labels == index
    return coco_mask.encode(canvas)


class CocoDocument:
    """A run's images and annotations, added one image at a time (from any one thread at a time)."""

    def __init__(self) -> None:
        self.images: list[dict[str, object]] = []
        self.annotations: list[dict[str, object]] = []
        self.categories: dict[int, str] = {}
        self._lock = threading.Lock()

    def add(self, item_id: str, file_name: str, labels: np.ndarray, roi: Roi, image_size: tuple[int, int],
            num_classes: int, class_names: Sequence[str] = ()) -> None:
        """One image: `labels` are its predicted classes on `roi` (0 = background)."""
        with self._lock:
            image_id = len(self.images) + 1
            self.images.append({"id": image_id, "file_name": file_name, "width": image_size[0],
                                "height": image_size[1], "segscope_id": item_id})
            for index in range(1, num_classes):
                self.categories.setdefault(index, class_names[index] if index < len(class_names)
                                           else f"class {index}")
                if not (labels == index).any():
                    continue
                rle = class_rle(labels, roi, image_size, index)
                x, y, w, h = (float(v) for v in coco_mask.toBbox(rle))
                self.annotations.append({
                    "id": len(self.annotations) + 1, "image_id": image_id, "category_id": index, "iscrowd": 1,
                    "area": int(coco_mask.area(rle)), "bbox": [x, y, w, h],
                    "segmentation": {"size": [int(s) for s in rle["size"]], "counts": rle["counts"].decode("ascii")},
                })

    def __bool__(self) -> bool:
        return bool(self.images)

    def to_bytes(self, version: str) -> bytes:
        document = {
            "info": {"description": "SegScope predictions", "version": version,
                     "date_created": datetime.now(timezone.utc).isoformat(timespec="seconds")},
            "licenses": [],
            "images": self.images,
            "annotations": self.annotations,
            "categories": [{"id": index, "name": name, "supercategory": "segscope"}
                           for index, name in sorted(self.categories.items())],
        }
        return (json.dumps(document, indent=1) + "\n").encode()
