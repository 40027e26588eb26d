"""What a whole-slide (tiled) run exports: its stitched mask, softmax and heatmap with their provenance, as
`segscope eval --tile --export` and the viewer's export of a whole-slide run write them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..backends.base import Capabilities
from ..evaluate import evaluation_row
from ..export.files import ExportFolder, encode_mask, heatmap_image, mask_image, npy_bytes
from ..export.names import EXPORT_KINDS, PROVENANCE_NAME
from ..export.provenance import provenance, source_for
from ..files.fileio import encode_image, staging_folder
from ..result import InferenceResult
from ..slides.ome_writer import write_ome_tiff
from .evaluate import TiledEvaluation

#: What a tiled run exports (at the output scale); a slide-size canvas is what tiling exists to avoid.
TILED_KINDS = ("mask", "softmax", "heatmap")
#: How the stitched mask and heatmap are written; `auto`: PNG up to `PNG_MAX_SIDE`, pyramidal OME-TIFF beyond.
STITCHED_FORMATS = ("auto", "png", "ome-tiff")
#: Longest side (output pixels) up to which `--stitched-format auto` writes PNG.
PNG_MAX_SIDE = 8192
#: The kinds written as images (PNG or OME-TIFF); the softmax stays a .npy.
_IMAGE_KINDS = ("mask", "heatmap")


def _export_name(item_id: str, kind: str, ome: bool) -> str:
    name = EXPORT_KINDS[kind].format(id=item_id)
    return str(Path(name).with_suffix(".tif")) if ome and kind in _IMAGE_KINDS else name


def planned_tiled_files(item_id: str, kinds: list[str], stitched_format: str) -> list[str]:
    """The names a tiled export may write for one item (both image formats under `auto`), sidecar last."""
    formats = {"auto": (False, True), "png": (False,), "ome-tiff": (True,)}[stitched_format]
    names = [_export_name(item_id, k, ome) for k in TILED_KINDS if k in kinds for ome in formats]
    return list(dict.fromkeys(names)) + [PROVENANCE_NAME.format(id=item_id)]


def _ome_tiff_bytes(image: np.ndarray, compression: str, resample: str, folder: Path) -> bytes:
    """`image` as a tiled pyramidal OME-TIFF, made in a staging folder of the export `folder` (locked, so a
    killed run's scratch goes with the next run there) and handed over as bytes so the export publishes it
    with the item's other files as one unit."""
    with staging_folder(folder) as scratch:
        path = scratch / "stitched.tif"
        write_ome_tiff(path, image, (image.shape[1], image.shape[0]), channels=1 if image.ndim == 2 else 3,
                       compression=compression, resample=resample)
        return path.read_bytes()


def export_stitched(folder: ExportFolder, evaluation: TiledEvaluation, capabilities: Capabilities | None,
                    kinds: list[str], stitched_format: str = "auto") -> list[Path]:
    """Write one whole-slide run's stitched `kinds` (of `TILED_KINDS`) with their provenance into `folder`
    (what `eval --tile --export` writes, also the viewer's export of a whole-slide run); the paths written."""
    stitched, item, plan = evaluation.stitched, evaluation.item, evaluation.plan
    classes = stitched.probabilities.shape[-1]
    ome = stitched_format == "ome-tiff" or (stitched_format == "auto" and max(stitched.argmax.shape) > PNG_MAX_SIDE)
    files: dict[str, tuple[str, bytes]] = {}
    for kind in (k for k in TILED_KINDS if k in kinds):
        name = _export_name(item.id, kind, ome)
        if kind == "softmax":
            files[name] = (kind, npy_bytes(stitched.probabilities))
        elif kind == "mask":
            mask = mask_image(stitched.argmax, classes)
            files[name] = (kind, _ome_tiff_bytes(mask, "zlib", "nearest", folder.out_dir) if ome
                           else encode_mask(mask, "png"))
        else:  # a colour map: JPEG tiles and area-averaged levels suit it (never a mask)
            heatmap = heatmap_image(stitched.probabilities)
            files[name] = (kind, _ome_tiff_bytes(heatmap, "jpeg", "area", folder.out_dir) if ome
                           else encode_image(heatmap))
    result = InferenceResult(stitched.probabilities, stitched.argmax, stitched.region, stitched.slide_size,
                             backend=capabilities.name if capabilities else "", threshold=stitched.threshold)
    document = provenance(source_for(item, capabilities), result, files)
    document["tiling"] = {**({"tile": list(plan.tile), "overlap": plan.overlap, "margin": plan.margin,
                                 "blend": plan.blend}
                             if plan is not None else {}),
                          "tiles": evaluation.tiles, "output_scale": stitched.scale,
                          "output_units": "output pixel (i, j) covers slide pixels x0 + j / output_scale ..."}
    payload = {name: data for name, (_, data) in files.items()}
    payload[PROVENANCE_NAME.format(id=item.id)] = (json.dumps(document, indent=2) + "\n").encode()
    return folder.publish_files(payload)


def tiled_row(evaluation: TiledEvaluation) -> dict[str, object]:
    """One whole-slide run's row of the metrics table (its region, slide metrics, time and tile count)."""
    return {**evaluation_row(evaluation.item, evaluation.stitched.region, evaluation.metrics,
                             {"tiled": evaluation.seconds}), "tiles": evaluation.tiles}
