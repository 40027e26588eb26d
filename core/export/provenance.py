"""Provenance of exports: what a file was made from, recorded in the JSON sidecar `export.py` writes.

The document holds the source image, the ROI in slide pixels, the model file and its SHA-256, the backend,
the threshold, the truth the image was scored against (kind, file relative to the dataset, SHA-256), the time,
the SegScope version and every file written with its own hash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..backends.base import Capabilities
from ..dataset.dataset import DatasetItem
from ..dataset.masks import BINARY_FOREGROUND
from ..dataset.truth import CORRECTED, Truth, truth_for
from ..files.fileio import sha256_file
from ..result import InferenceResult
from ..version import segscope_version


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
    class_names: tuple[str, ...] = ()  # the model's (GeoJSON classifications, COCO categories)
    truth: dict[str, str] | None = None  # the truth scored against, `Truth.describe` (None: none, or not scored)
    #: The true classes under the ROI, as scored (ROI-sized; None without a truth): the COCO export's truth side.
    truth_labels: np.ndarray | None = field(default=None, compare=False, repr=False)
    corrected: Path | None = None  # the item's saved correction (mask_corrected.png), if it has one


def source_for(item: DatasetItem, capabilities: Capabilities | None, threshold: float | None = None,
               truth: Truth | None = None, root: Path | None = None, truth_labels: np.ndarray | None = None) -> Source:
    """The provenance source of a dataset item run by a backend (its `details["model"]` names the model);
    with no backend at hand the result's own backend name is recorded. `truth`: what the item was scored
    against, its file named relative to the dataset `root`; `truth_labels`: its classes under the ROI."""
    model = capabilities.details.get("model") if capabilities else None
    saved = truth_for(item, CORRECTED)
    return Source(item.id, item.image_path, Path(model) if model else None,
                  backend=capabilities.name if capabilities else "", threshold=threshold,
                  class_names=tuple(capabilities.class_names) if capabilities else (),
                  truth=truth.describe(root) if truth is not None else None, truth_labels=truth_labels,
                  corrected=saved.path if saved is not None else None)


def mask_rule(source: Source, result: InferenceResult) -> str:
    """How the exported masks' classes were decided, in words."""
    if source.threshold is not None:
        return f"class {source.class_index} where its probability >= {source.threshold:g} (this export's threshold)"
    rule = "the most probable class" if result.threshold is None else \
        f"class 1 where its probability > {result.threshold:.9g} (the model card's threshold)"
    return f"{rule}, decided on the probabilities at the mask's resolution (resized bilinearly, then thresholded)"


def provenance(source: Source, result: InferenceResult, files: dict[str, tuple[str, str]]) -> dict[str, object]:
    """The sidecar document for `files` (name -> kind and the SHA-256 of what was written) exported from
    `result`."""
    model_hash = source.model_sha256
    if model_hash is None and source.model is not None and Path(source.model).is_file():
        model_hash = sha256_file(source.model)
    return {
        "segscope_version": segscope_version(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "image_id": source.item_id,
        "source_image": str(Path(source.image).resolve()),
        "image_size": list(result.image_size),
        "roi": list(result.roi.as_tuple()),
        "roi_units": "slide pixels, [x0, y0, x1, y1) with x1, y1 exclusive",
        **({"roi_note": result.roi_note} if result.roi_note else {}),
        "model": {"file": str(source.model) if source.model else None, "sha256": model_hash},
        "backend": source.backend or result.backend,
        "threshold": source.threshold,
        "class_index": source.class_index if source.threshold is not None else None,
        "mask_rule": mask_rule(source, result),
        "mask_values": f"0 background, {BINARY_FOREGROUND} foreground" if result.num_classes == 2 else "class index",
        "truth": source.truth,
        **({"corrected_source": str(Path(source.corrected).resolve())}
           if source.corrected is not None and any(kind == "corrected" for kind, _ in files.values()) else {}),
        "files": [{"name": name, "kind": kind, "sha256": digest} for name, (kind, digest) in files.items()],
    }
