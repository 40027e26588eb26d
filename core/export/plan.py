"""What an export will write, known before it writes: each file's name, kind, format, pixel size, channels,
dtype and size in bytes, derived from the result itself (an ROI run or a whole-slide run). The writers write
exactly these files, and the viewer's Export dialog names and sizes what it offers from them.

Sizes are exact where the format stores the values as they are (NumPy `.npy` tensors, a copied file) and an
upper bound where it compresses (PNG, TIFF, OME-TIFF: at most the uncompressed pixels plus the format's own
overhead; masks usually compress 20-100 times). GeoJSON, COCO, metric tables and provenance grow with their
content (outlines, images, metadata) and are not estimated; they are small beside the rasters. The viewer
asks before an export whose estimate reaches `CONFIRM_BYTES`.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import SegScopeError
from ..files.fileio import image_size
from ..result import InferenceResult
from ..review.log import LOG_NAME
from ..slides.base import pyramid_sizes
from .names import (
    COCO_EVALUATION,
    EXPORT_KINDS,
    MASK_FORMATS,
    MASK_KINDS,
    METRICS_FILES,
    PNG_MAX_SIDE,
    REVIEW_LOG,
    RUN_KINDS,
)

if TYPE_CHECKING:
    from ..wholeslide.tiling import Stitched

#: The viewer asks before writing an export estimated at this many bytes or more (1 GB).
CONFIRM_BYTES = 1_000_000_000
#: Tile side of the pyramidal OME-TIFFs (`core.slides.ome_writer`'s default).
OME_TILE = 512
#: What a whole-slide (tiled) run exports, at the output scale; a slide-size canvas is what tiling exists to avoid.
TILED_KINDS = ("mask", "softmax", "heatmap", "corrected")
#: The stitched kinds written as images (PNG or pyramidal OME-TIFF, the softmax stays a .npy), with how each is
#: written as OME-TIFF: its compression and how reduced levels are made (JPEG and area-averaging suit a colour map).
STITCHED_IMAGES = {"mask": ("zlib", "nearest"), "heatmap": ("jpeg", "area")}

#: What each kind is, as the viewer offers it (the details come from `PlannedFile.details`).
TITLES = {
    "mask": "Mask: the predicted classes",
    "canvas": "Mask pasted into a canvas of the whole slide",
    "softmax": "Softmax probabilities",
    "heatmap": "Heatmap: class {class_index} probability in colours",
    "geojson": "GeoJSON annotations for QuPath (one polygon per defect)",
    "corrected": "Corrected masks: the saved corrections, copied as they are",
    "coco": "COCO annotations, RLE (one file for all images)",
}


@dataclass(frozen=True)
class PlannedFile:
    """One file an export will write."""

    name: str
    kind: str
    format: str = ""  # "PNG", "NumPy .npy", "pyramidal OME-TIFF (zlib)", ...; "": by name only (before a run)
    size: tuple[int, int] | None = None  # (width, height) of a raster
    channels: int = 0
    dtype: str = ""  # of a raster's values: "uint8", "float32"
    grid: str = ""  # what the pixel size is: "ROI size", "model resolution", "slide size", "output scale"
    values: str = ""  # what the values mean: "0/255", "class index", "colour map"
    bytes: int | None = None  # None: not estimated (grows with the content)
    exact: bool = False  # `bytes` is the file's size; otherwise at most it

    def details(self) -> str:
        """`PNG 2302×2101 (ROI size), uint8, 0/255`: format, pixels and values as written."""
        return summary([self])


def summary(files: Sequence[PlannedFile]) -> str:
    """What files of one kind are, as written: `PNG 960×960 to 2302×2101 (ROI size), uint8, 0/255`."""
    first = files[0]
    formats = " or ".join(dict.fromkeys(f.format for f in files))
    if first.size is None:
        return formats
    sizes = sorted({f.size for f in files if f.size}, key=lambda s: (s[0] * s[1], s))
    pixels = " to ".join(f"{w}×{h}" for w, h in dict.fromkeys([sizes[0], sizes[-1]]))
    pixels += f"×{first.channels}" if first.channels > 1 else ""
    grid = f" ({first.grid})" if first.grid else ""
    values = ", ".join(v for v in (first.dtype, first.values) if v)
    return f"{formats} {pixels}{grid}" + (f", {values}" if values else "")


def format_bytes(count: float) -> str:
    """`1.09 GB`, `4.9 MB`, `812 KB`, `96 bytes` (decimal units, as file managers show them)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if count >= size:
            value = count / size
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{int(count)} bytes"


@dataclass(frozen=True)
class Estimate:
    """The bytes of several planned files: `bytes` in all, of which `exact_bytes` exactly (the rest are upper
    bounds), and how many files are not estimated."""

    bytes: int = 0
    exact_bytes: int = 0
    unknown: int = 0

    @classmethod
    def of(cls, files: Iterable[PlannedFile]) -> Estimate:
        files = list(files)
        return cls(sum(f.bytes or 0 for f in files), sum(f.bytes or 0 for f in files if f.exact),
                   sum(f.bytes is None for f in files))

    def text(self) -> str:
        """`1.09 GB`, `up to 4.9 MB`, `up to 4.9 MB + GeoJSON` ... as the dialog shows it."""
        if not self.bytes:
            return "size grows with the outlines (small)" if self.unknown else "nothing"
        known = format_bytes(self.bytes) if self.bytes == self.exact_bytes else f"up to {format_bytes(self.bytes)}"
        return known + (" + small files" if self.unknown else "")


# ------------------------------------------------------------------------------------------ sizes
def npy_bytes_exact(shape: Sequence[int], dtype: str) -> int:
    """The size `np.save` gives an array of `shape` and `dtype` (C order): its header as NumPy writes it, then
    the values."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                                  "fortran_order": False, "shape": tuple(shape)})
    return len(header.getvalue()) + math.prod(shape) * np.dtype(dtype).itemsize


def png_bound(width: int, height: int, channels: int) -> int:
    """At most this many bytes for an 8-bit PNG: the filtered rows (a filter byte each), deflate's worst case
    (stored blocks: 5 bytes per 64 KiB) and the chunks' overhead (12 bytes per 8 KiB IDAT chunk), rounded up."""
    raw = height * (width * channels + 1)
    return raw + raw // 256 + 4096


def tiff_bound(width: int, height: int, channels: int) -> int:
    """At most this many bytes for an 8-bit TIFF OpenCV writes (LZW: at most 12 bits per byte, plus strips)."""
    return width * height * channels * 3 // 2 + 64 * height + 4096


def ome_tiff_bound(width: int, height: int, channels: int, tile: int = OME_TILE) -> int:
    """At most this many bytes for a tiled pyramidal OME-TIFF of 8-bit pixels: every level's tiles padded to
    full tiles, each no larger than compressed as stored (plus deflate's worst case), their offsets and the
    OME-XML. JPEG tiles of a colour map compress far below this."""
    total = 65536
    for w, h in pyramid_sizes(width, height, tile):
        tiles = -(-w // tile) * -(-h // tile)
        raw = tiles * tile * tile * channels
        total += raw + raw // 256 + 64 * tiles
    return total


def mask_values(num_classes: int) -> str:
    return "0/255" if num_classes == 2 else "class index"


# ------------------------------------------------------------------------------------------ names
def check_kinds(kinds: Iterable[str], allowed: Iterable[str], mask_formats: Iterable[str] = ("png",)) -> None:
    """Refuse, in one line, a kind (or mask format) this export does not write."""
    allowed = list(allowed)
    unknown = sorted(set(kinds) - set(allowed) or set(mask_formats) - set(MASK_FORMATS))
    if unknown:
        raise SegScopeError(f"export: unknown kind(s) or format(s) {unknown}; kinds: {', '.join(allowed)}; mask "
                            f"formats: {', '.join(MASK_FORMATS)}")


def kind_name(item_id: str, kind: str, suffix: str | None = None) -> str:
    """The file name of `kind` for an item (`suffix`: another format's, for masks and stitched images)."""
    name = EXPORT_KINDS[kind].format(id=item_id)
    return str(Path(name).with_suffix(suffix)) if suffix else name


def exports_review_log(kinds: Iterable[str], dataset_root: Path | None) -> bool:
    """Whether an export of `kinds` copies the dataset's review log (`core.review.log`): with the corrected masks,
    where the dataset has one."""
    return "corrected" in kinds and dataset_root is not None and (Path(dataset_root) / LOG_NAME).is_file()


def plan_run(kinds: Iterable[str], truths: bool = True, metrics: bool = True,
             review_log: bool = False) -> list[PlannedFile]:
    """What an export of `kinds` writes once for the run, after every image's files: the run's kinds (COCO, with
    its evaluation pair where images have `truths`; with "corrected", the dataset's `review_log` where it has
    one), then the metric tables (`metrics`)."""
    kinds = list(kinds)
    files = [PlannedFile(RUN_KINDS[k], k, "JSON") for k in RUN_KINDS if k in kinds]
    if "coco" in kinds and truths:
        files += [PlannedFile(name, "coco", "JSON") for name in COCO_EVALUATION]  # the truth and the scored images
    if "corrected" in kinds and review_log:
        files.append(PlannedFile(REVIEW_LOG, "corrected", "JSON lines"))  # the decisions behind the corrections
    return files + [PlannedFile(name, "metrics", name.rsplit(".", 1)[-1].upper()) for name in METRICS_FILES
                    if metrics]


# ------------------------------------------------------------------------------------------ each image
def plan_item(item_id: str, kinds: Iterable[str], output: InferenceResult | Stitched | None = None, *,
              tiled: bool = False, mask_formats: Iterable[str] = ("png",), stitched_format: str = "auto",
              corrected: PlannedFile | None = None) -> list[PlannedFile]:
    """The one plan of what an export of `kinds` writes for one image, in writing order, without its provenance
    sidecar (`PROVENANCE_NAME`, written after them): of its ROI run (`InferenceResult`: masks in each of
    `mask_formats`) or, `tiled`, of its whole-slide run (`Stitched`, at the output scale: mask and heatmap as PNG
    or pyramidal OME-TIFF by `stitched_format`). With the run's `output`, each file's format, pixel size and
    bytes (`corrected`: the image's saved correction, `corrected_plan`, when it has one). Without it, before the
    run: every name the export may write (both image formats under `auto`, the correction's always)."""
    kinds, mask_formats = list(kinds), list(mask_formats)
    check_kinds(kinds, TILED_KINDS if tiled else [*EXPORT_KINDS, *RUN_KINDS], mask_formats)
    if output is None:
        return _names(item_id, kinds, tiled, mask_formats, stitched_format)
    if tiled:
        return _stitched_files(item_id, output, kinds, stitched_format, corrected)  # type: ignore[arg-type]
    return _roi_files(item_id, output, kinds, mask_formats, corrected)  # type: ignore[arg-type]


def _names(item_id: str, kinds: list[str], tiled: bool, mask_formats: list[str],
           stitched_format: str) -> list[PlannedFile]:
    """Every file an export of `kinds` may write for one image, by name only (sizes come with a run)."""
    suffixes: dict[str, list[str | None]]
    if tiled:
        ome = {"auto": (False, True), "png": (False,), "ome-tiff": (True,)}[stitched_format]
        suffixes = {kind: [".tif" if tif else None for tif in ome] if kind in STITCHED_IMAGES else [None]
                    for kind in TILED_KINDS}
    else:
        suffixes = {kind: [*(MASK_FORMATS[f] for f in mask_formats)] if kind in MASK_KINDS else [None]
                    for kind in EXPORT_KINDS}
    return [PlannedFile(kind_name(item_id, kind, suffix), kind) for kind in suffixes if kind in kinds
            for suffix in suffixes[kind]]


def _roi_files(item_id: str, result: InferenceResult, kinds: list[str], mask_formats: list[str],
               corrected: PlannedFile | None) -> list[PlannedFile]:
    roi, classes = (result.roi.width, result.roi.height), result.num_classes
    sizes = {"mask": (roi, "ROI size"), "canvas": (result.image_size, "slide size")}
    files = []
    for kind in (k for k in EXPORT_KINDS if k in kinds):
        if kind in MASK_KINDS:
            (w, h), grid = sizes[kind]
            for fmt in mask_formats:
                bound = {"png": png_bound(w, h, 1), "tiff": tiff_bound(w, h, 1),
                         "npy": npy_bytes_exact((h, w), "uint8")}[fmt]
                files.append(PlannedFile(kind_name(item_id, kind, MASK_FORMATS[fmt]), kind,
                                         {"png": "PNG", "tiff": "TIFF", "npy": "NumPy .npy"}[fmt], (w, h), 1,
                                         "uint8", grid, mask_values(classes), bound, fmt == "npy"))
        elif kind == "softmax":
            h, w, c = result.probabilities.shape
            files.append(PlannedFile(kind_name(item_id, kind), kind, "NumPy .npy", (w, h), c, "float32",
                                     "model resolution", "probabilities", npy_bytes_exact((h, w, c), "float32"), True))
        elif kind == "heatmap":
            files.append(PlannedFile(kind_name(item_id, kind), kind, "PNG", roi, 3, "uint8", "ROI size",
                                     "colour map", png_bound(*roi, 3)))
        elif kind == "geojson":
            files.append(PlannedFile(kind_name(item_id, kind), kind, "GeoJSON (slide pixels)"))
        elif kind == "corrected" and corrected is not None:
            files.append(corrected)
    return files


def writes_ome_tiff(size: tuple[int, int], stitched_format: str) -> bool:
    """Whether stitched images of `size` (width, height) are written as pyramidal OME-TIFF (else PNG)."""
    return stitched_format == "ome-tiff" or (stitched_format == "auto" and max(size) > PNG_MAX_SIDE)


def _stitched_files(item_id: str, stitched: Stitched, kinds: list[str], stitched_format: str,
                    corrected: PlannedFile | None) -> list[PlannedFile]:
    h, w, classes = stitched.probabilities.shape
    ome = writes_ome_tiff((w, h), stitched_format)
    files = []
    for kind in (k for k in TILED_KINDS if k in kinds):
        name = kind_name(item_id, kind, ".tif" if ome and kind in STITCHED_IMAGES else None)
        if kind == "softmax":
            files.append(PlannedFile(name, kind, "NumPy .npy", (w, h), classes, "float32", "output scale",
                                     "probabilities", npy_bytes_exact((h, w, classes), "float32"), True))
        elif kind in STITCHED_IMAGES:
            channels = 1 if kind == "mask" else 3
            fmt = f"pyramidal OME-TIFF ({STITCHED_IMAGES[kind][0]})" if ome else "PNG"
            bound = ome_tiff_bound(w, h, channels) if ome else png_bound(w, h, channels)
            values = mask_values(classes) if kind == "mask" else "colour map"
            files.append(PlannedFile(name, kind, fmt, (w, h), channels, "uint8", "output scale", values, bound))
        elif corrected is not None:
            files.append(corrected)
    return files


def corrected_plan(item_id: str, path: Path | None) -> PlannedFile | None:
    """The copy of an item's saved correction `path` (None: it has none), its size read from the header."""
    if path is None:
        return None
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise SegScopeError(f"{path}: cannot read the saved correction ({exc.strerror})") from None
    return PlannedFile(kind_name(item_id, "corrected"), "corrected", "PNG", image_size(path), 1, "", "slide size",
                       "as saved", size, True)
