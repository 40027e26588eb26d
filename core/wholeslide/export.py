"""What a whole-slide (tiled) run exports: its stitched mask, softmax and heatmap (and the image's corrected
mask) with their provenance, as `segscope eval --tile --export` and the viewer's export of a whole-slide run
write them: planned first (`core.export.plan.plan_item`: names, formats, pixel sizes and bytes), then written."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..backends.base import Capabilities
from ..evaluate import evaluation_row
from ..export.files import ExportFolder, encode_mask, heatmap_image, mask_image, npy_writer
from ..export.plan import STITCHED_IMAGES, PlannedFile, corrected_plan, plan_item
from ..export.provenance import provenance, source_for
from ..files.atomic_folder import Content, copy_of
from ..files.fileio import encode_image
from ..result import InferenceResult
from ..slides.ome_writer import write_ome_tiff
from .evaluate import TiledEvaluation


def _ome_tiff(image: np.ndarray, kind: str) -> Content:
    """Writes `image` as a tiled pyramidal OME-TIFF (the compression and level reduction of `kind`)."""
    compression, resample = STITCHED_IMAGES[kind]

    def write(path: Path) -> None:
        write_ome_tiff(path, image, (image.shape[1], image.shape[0]), channels=1 if image.ndim == 2 else 3,
                       compression=compression, resample=resample)
    return write


def export_stitched(folder: ExportFolder, evaluation: TiledEvaluation, capabilities: Capabilities | None,
                    kinds: list[str], stitched_format: str = "auto") -> list[Path]:
    """Write one whole-slide run's stitched `kinds` (of `core.export.plan.TILED_KINDS`) with their provenance into
    `folder` (what `eval --tile --export` writes, also the viewer's export of a whole-slide run); the paths written."""
    stitched, item, plan = evaluation.stitched, evaluation.item, evaluation.plan
    source = source_for(item, capabilities, truth=evaluation.truth, root=folder.dataset_root)
    files = plan_item(item.id, kinds, stitched, tiled=True, stitched_format=stitched_format,
                      corrected=corrected_plan(item.id, source.corrected))
    contents: list[tuple[PlannedFile, Content]] = []
    for planned in files:
        if planned.kind == "softmax":
            contents.append((planned, npy_writer(stitched.probabilities)))
        elif planned.kind == "corrected":
            contents.append((planned, copy_of(source.corrected)))  # type: ignore[arg-type]
        else:
            image = mask_image(stitched.argmax, stitched.probabilities.shape[-1]) if planned.kind == "mask" \
                else heatmap_image(stitched.probabilities)
            contents.append((planned, _ome_tiff(image, planned.kind) if planned.name.endswith(".tif") else
                             encode_mask(image, "png") if planned.kind == "mask" else encode_image(image)))
    result = InferenceResult(stitched.probabilities, stitched.argmax, stitched.region, stitched.slide_size,
                             backend=capabilities.name if capabilities else "", threshold=stitched.threshold)

    def document(digests: dict[str, tuple[str, str]]) -> dict[str, object]:
        record = provenance(source, result, digests)
        record["tiling"] = {**({"tile": list(plan.tile), "overlap": plan.overlap, "margin": plan.margin,
                                   "blend": plan.blend}
                               if plan is not None else {}),
                            "tiles": evaluation.tiles, "output_scale": stitched.scale,
                            "output_units": "output pixel (i, j) covers slide pixels x0 + j / output_scale ..."}
        return record
    return folder.write_item(item.id, contents, document)


def tiled_row(evaluation: TiledEvaluation, root: Path | None = None) -> dict[str, object]:
    """One whole-slide run's row of the metrics table (its region, the truth it was scored against named relative
    to the dataset `root`, slide metrics, time and tile count)."""
    return {**evaluation_row(evaluation.item, evaluation.stitched.region, evaluation.metrics,
                             {"tiled": evaluation.seconds}, truth=evaluation.truth, root=root),
            "tiles": evaluation.tiles}
