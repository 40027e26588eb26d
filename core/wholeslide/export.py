"""What a whole-slide (tiled) run exports: its stitched mask, softmax and heatmap (and the image's corrected
mask) with their provenance, as `segscope eval --tile --export` and the viewer's export of a whole-slide run
write them: planned first (`stitched_plan`: names, formats, pixel sizes and bytes), then written."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..backends.base import Capabilities
from ..evaluate import evaluation_row
from ..export.files import ExportFolder, encode_mask, heatmap_image, mask_image, npy_writer
from ..export.names import PNG_MAX_SIDE, PROVENANCE_NAME
from ..export.plan import (
    PlannedFile,
    check_kinds,
    corrected_plan,
    kind_name,
    mask_values,
    npy_bytes_exact,
    ome_tiff_bound,
    png_bound,
)
from ..export.provenance import provenance, source_for
from ..files.atomic_folder import Content, copy_of
from ..files.fileio import encode_image
from ..result import InferenceResult
from ..slides.ome_writer import write_ome_tiff
from .evaluate import TiledEvaluation
from .tiling import Stitched

#: What a tiled run exports (at the output scale); a slide-size canvas is what tiling exists to avoid.
TILED_KINDS = ("mask", "softmax", "heatmap", "corrected")
#: The kinds written as images (PNG or OME-TIFF); the softmax stays a .npy.
_IMAGE_KINDS = ("mask", "heatmap")
#: How each image kind is written as OME-TIFF: compression and how reduced levels are made.
_OME = {"mask": ("zlib", "nearest"), "heatmap": ("jpeg", "area")}  # JPEG and area-averaging suit a colour map


def _export_name(item_id: str, kind: str, ome: bool) -> str:
    return kind_name(item_id, kind, ".tif" if ome and kind in _IMAGE_KINDS else None)


def planned_tiled_files(item_id: str, kinds: list[str], stitched_format: str) -> list[str]:
    """The names a tiled export may write for one item (both image formats under `auto`), sidecar last."""
    formats = {"auto": (False, True), "png": (False,), "ome-tiff": (True,)}[stitched_format]
    names = [_export_name(item_id, k, ome) for k in TILED_KINDS if k in kinds for ome in formats]
    return list(dict.fromkeys(names)) + [PROVENANCE_NAME.format(id=item_id)]


def writes_ome_tiff(stitched: Stitched, stitched_format: str) -> bool:
    """Whether the stitched images are written as pyramidal OME-TIFF (else PNG)."""
    return stitched_format == "ome-tiff" or (stitched_format == "auto" and max(stitched.argmax.shape) > PNG_MAX_SIDE)


def stitched_plan(item_id: str, stitched: Stitched, kinds: list[str], stitched_format: str = "auto",
                  corrected: PlannedFile | None = None) -> list[PlannedFile]:
    """The files a whole-slide run's export of `kinds` writes for one item, without the provenance sidecar
    (`corrected`: the item's saved correction, when it has one)."""
    check_kinds(kinds, TILED_KINDS)
    ome = writes_ome_tiff(stitched, stitched_format)
    h, w, classes = stitched.probabilities.shape
    files = []
    for kind in (k for k in TILED_KINDS if k in kinds):
        name = _export_name(item_id, kind, ome)
        if kind == "softmax":
            files.append(PlannedFile(name, kind, "NumPy .npy", (w, h), classes, "float32", "output scale",
                                     "probabilities", npy_bytes_exact((h, w, classes), "float32"), True))
        elif kind in _IMAGE_KINDS:
            channels = 1 if kind == "mask" else 3
            fmt = f"pyramidal OME-TIFF ({_OME[kind][0]})" if ome else "PNG"
            bound = ome_tiff_bound(w, h, channels) if ome else png_bound(w, h, channels)
            values = mask_values(classes) if kind == "mask" else "colour map"
            files.append(PlannedFile(name, kind, fmt, (w, h), channels, "uint8", "output scale", values, bound))
        elif corrected is not None:
            files.append(corrected)
    return files


def _ome_tiff(image: np.ndarray, kind: str) -> Content:
    """Writes `image` as a tiled pyramidal OME-TIFF (the compression and level reduction of `kind`)."""
    compression, resample = _OME[kind]

    def write(path: Path) -> None:
        write_ome_tiff(path, image, (image.shape[1], image.shape[0]), channels=1 if image.ndim == 2 else 3,
                       compression=compression, resample=resample)
    return write


def export_stitched(folder: ExportFolder, evaluation: TiledEvaluation, capabilities: Capabilities | None,
                    kinds: list[str], stitched_format: str = "auto") -> list[Path]:
    """Write one whole-slide run's stitched `kinds` (of `TILED_KINDS`) with their provenance into `folder`
    (what `eval --tile --export` writes, also the viewer's export of a whole-slide run); the paths written."""
    stitched, item, plan = evaluation.stitched, evaluation.item, evaluation.plan
    source = source_for(item, capabilities, truth=evaluation.truth, root=folder.dataset_root)
    files = stitched_plan(item.id, stitched, kinds, stitched_format, corrected_plan(item.id, source.corrected))
    ome = writes_ome_tiff(stitched, stitched_format)
    contents: list[tuple[PlannedFile, Content]] = []
    for planned in files:
        if planned.kind == "softmax":
            contents.append((planned, npy_writer(stitched.probabilities)))
        elif planned.kind == "corrected":
            contents.append((planned, copy_of(source.corrected)))  # type: ignore[arg-type]
        else:
            image = mask_image(stitched.argmax, stitched.probabilities.shape[-1]) if planned.kind == "mask" \
                else heatmap_image(stitched.probabilities)
            contents.append((planned, _ome_tiff(image, planned.kind) if ome else
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
