"""Writing results to disk: masks, full-slide canvases, softmax tensors, heatmaps, metric tables.

Besides rasters, a mask can travel as QuPath GeoJSON (`geojson`, per image) and as COCO instances (`coco`:
`annotations.coco.json` for the export, with `truth.coco.json` and `predictions.coco.json` for COCOeval where
images have a ground truth, `write_coco`); see `core/interchange/`.

Every export carries provenance: `<id>_provenance.json` beside the files records the source image, the ROI
in slide pixels, the model and its SHA-256, the backend, the threshold and each file's hash (see
`provenance.py`). Masks are single-channel uint8 with no colour table (0/255 for binary models, the class
index otherwise), named after the dataset item; `<id>_mask_full.png` copied to the image's mask name is
its ground truth unchanged (beside its provenance, the dataset reader never takes an export for data).

An export is one unit (`ExportFolder`): its folder is locked while it runs, so two exports into one folder
never interleave; every file is written to a temporary file and moved into place, so none is ever partial;
existing files are never replaced unless `overwrite` is set (and then keep their permissions), and an
item's targets are all checked before its first write. Exports into the dataset are refused.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

import cv2
import numpy as np

from ..dataset.masks import BINARY_FOREGROUND
from ..editing.annotation import prediction_labels
from ..errors import SegScopeError
from ..files.file_group import publish_group, recover
from ..files.fileio import TEMP_NAME, encode_image, read_json, remove_stale_staging, write_temp
from ..files.folder_lock import FolderLock
from ..interchange.coco import CocoDocument
from ..interchange.geojson import mask_geojson
from ..metrics.catalogue import Metric, catalogue_document, csv_row
from ..metrics.numbers import json_safe
from ..palette import HEATMAP_COLORMAP
from ..result import InferenceResult
from ..roi import Roi
from .names import (
    COCO_EVALUATION,
    DEFAULT_KINDS,
    EXPORT_KINDS,
    MASK_FORMATS,
    MASK_KINDS,
    METRICS_FILES,
    PROVENANCE_NAME,
    RUN_KINDS,
    exported_item,
    is_export_name,
)
from .provenance import Source, provenance, segscope_version

log = logging.getLogger(__name__)

#: Held in the export folder while an export writes there.
LOCK_NAME = ".segscope-export.lock"


def mask_image(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Labels as a grayscale PNG array: 0/255 when binary, else the class index."""
    return (labels * BINARY_FOREGROUND).astype(np.uint8) if num_classes == 2 else labels.astype(np.uint8)


def heatmap_image(probabilities: np.ndarray, class_index: int = 1) -> np.ndarray:
    p = probabilities[..., min(class_index, probabilities.shape[-1] - 1)]
    levels = np.round(np.clip(p, 0.0, 1.0) * 255).astype(np.uint8)
    return cv2.applyColorMap(levels, getattr(cv2, f"COLORMAP_{HEATMAP_COLORMAP.upper()}"))  # the viewer's colours


def npy_bytes(array: np.ndarray) -> bytes:
    """`array` as the bytes of a .npy file (C order, no pickles)."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def encode_mask(mask: np.ndarray, fmt: str) -> bytes:
    """A 2-D uint8 mask as PNG/TIFF (grayscale, no palette) or NPY bytes."""
    if fmt not in MASK_FORMATS:
        raise SegScopeError(f"mask format {fmt!r}: choose from {', '.join(MASK_FORMATS)}")
    if mask.ndim != 2 or mask.dtype != np.uint8:
        raise SegScopeError(f"a mask to export must be 2-D uint8, got {mask.dtype} {mask.shape}")
    return npy_bytes(mask) if fmt == "npy" else encode_image(mask, MASK_FORMATS[fmt])


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


def planned_files(item_id: str, kinds: Iterable[str] = DEFAULT_KINDS,
                  mask_formats: Iterable[str] = ("png",)) -> list[str]:
    """The names `export_result` writes for one item, its provenance sidecar last (the run's files of
    `RUN_KINDS` are `run_files`)."""
    kinds, mask_formats = list(kinds), list(mask_formats)
    unknown = set(kinds) - set(EXPORT_KINDS) - set(RUN_KINDS) or set(mask_formats) - set(MASK_FORMATS)
    if unknown:
        raise SegScopeError(f"export: unknown kind(s) or format(s) {sorted(unknown)}; kinds: "
                            f"{', '.join([*EXPORT_KINDS, *RUN_KINDS])}; mask formats: {', '.join(MASK_FORMATS)}")
    names = []
    for kind in (k for k in EXPORT_KINDS if k in kinds):
        name = EXPORT_KINDS[kind].format(id=item_id)
        formats = mask_formats if kind in MASK_KINDS else [None]
        names += [str(Path(name).with_suffix(MASK_FORMATS[f])) if f else name for f in formats]
    return [*names, PROVENANCE_NAME.format(id=item_id)]


def run_files(kinds: Iterable[str]) -> list[str]:
    """The names an export of `kinds` may write once for the run, besides the metric tables."""
    kinds = list(kinds)
    return [RUN_KINDS[kind] for kind in RUN_KINDS if kind in kinds] + (list(COCO_EVALUATION) if "coco" in kinds else [])


def _payloads(result: InferenceResult, source: Source, kinds: list[str], mask_formats: list[str],
              labels: np.ndarray) -> dict[str, tuple[str, bytes]]:
    """File name -> (kind, bytes) of one result whose predicted classes are `labels`, in `planned_files` order
    (without the sidecar)."""
    payloads: dict[str, tuple[str, bytes]] = {}
    values = None
    for kind in (k for k in EXPORT_KINDS if k in kinds):
        name = EXPORT_KINDS[kind].format(id=source.item_id)
        if kind in MASK_KINDS:
            if values is None:
                values = mask_image(labels, result.num_classes)
            mask = values if kind == "mask" else slide_canvas(values, result.roi, result.image_size)
            for fmt in mask_formats:
                payloads[str(Path(name).with_suffix(MASK_FORMATS[fmt]))] = (kind, encode_mask(mask, fmt))
        elif kind == "softmax":
            payloads[name] = (kind, npy_bytes(result.probabilities.astype(np.float32, copy=False)))
        elif kind == "geojson":
            payloads[name] = (kind, mask_geojson(labels, result.roi, result.num_classes, source.class_names))
        else:
            payloads[name] = (kind, encode_image(heatmap_image(result.probabilities, source.class_index)))
    return payloads


class ExportFolder:
    """An export into `out_dir` as one unit: use it as a context manager around every write of the export.

    While it is open the folder is locked (`LOCK_NAME`), so a second export into it is refused instead of
    interleaving with this one; temporary files an interrupted export left are removed first (and logged).
    Each item's files are all written to temporary files, then moved into place with no-clobber moves (or
    replacing, with `overwrite`), its provenance sidecar last: a sidecar only ever describes files that are
    complete and exactly those it hashes. `dataset_root`: an export inside the dataset is refused, as is one
    into an exported image's own folder, so an export is never taken for (or written over) ground truth.
    """

    def __init__(self, out_dir: Path, overwrite: bool = False, dataset_root: Path | None = None):
        self.out_dir, self.overwrite = Path(out_dir), overwrite
        self.dataset_root = Path(dataset_root) if dataset_root is not None else None
        self._lock: FolderLock | None = None
        self.written: list[Path] = []
        self.coco = CocoDocument()  # the images exported with kind "coco", for `write_coco`

    def __enter__(self) -> ExportFolder:
        if self.dataset_root is not None:
            self._refuse_inside(self.dataset_root, "the dataset")
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            what = "a file of that name is in the way" if self.out_dir.is_file() else exc.strerror
            raise SegScopeError(f"{self.out_dir}: cannot write here ({what}); choose another folder") from None
        self._lock = FolderLock(self.out_dir / LOCK_NAME).acquire()
        try:
            self._remove_leftovers()
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _refuse_inside(self, folder: Path, what: str) -> None:
        out, inside = self.out_dir.resolve(), Path(folder).resolve()
        if out == inside or inside in out.parents:
            raise SegScopeError(f"{self.out_dir}: lies in {what} {inside}; an export there could be read as (or "
                                "replace) ground truth: choose a folder outside it")

    def _remove_leftovers(self) -> None:
        """What a killed export left here (while the lock is held, nobody else is writing): its interrupted
        replacement is completed first, then its temporary files and staging folders are removed."""
        recover(self.out_dir)
        remove_stale_staging(self.out_dir)
        for path in self.out_dir.iterdir():
            match = TEMP_NAME.match(path.name)
            if match and is_export_name(match["target"]) and path.is_file():
                path.unlink(missing_ok=True)
                log.warning("%s: removed a temporary file left by an interrupted export", path)

    def _publish_all(self, files: dict[str, bytes]) -> list[Path]:
        """Write every file to a temp file, then publish them as one unit, the last one (an item's provenance)
        last (`core.files.file_group`); with overwrite, the files an earlier export of the item wrote that this
        one does not (another mask format, PNG before OME-TIFF) are removed with it."""
        if self._lock is None:
            raise RuntimeError("ExportFolder used outside its `with` block")
        targets = [self.out_dir / name for name in files]
        refuse_existing(targets, self.overwrite)
        temps: dict[Path, Path] = {}
        try:
            for name, data in files.items():
                temps[self.out_dir / name] = write_temp(self.out_dir / name, data)
        except BaseException:
            for tmp in temps.values():
                tmp.unlink(missing_ok=True)
            raise
        earlier = self._described_files(targets[-1]) if self.overwrite else []
        published = publish_group(self.out_dir, temps, self.overwrite, earlier)
        self.written += published
        return published

    def _described_files(self, record: Path) -> list[Path]:
        """The files an earlier item provenance `record` here lists (only that item's export names)."""
        item = exported_item(record.name)
        if record.name != PROVENANCE_NAME.format(id=item) or not record.is_file():
            return []
        try:
            document = read_json(record, "provenance sidecar", follow_symlinks=False)
        except SegScopeError:
            return []
        entries = document.get("files") if isinstance(document, dict) else None
        names = [e.get("name") for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
        return [self.out_dir / n for n in names if isinstance(n, str) and n == Path(n).name and
                exported_item(n) == item]

    def publish_files(self, files: dict[str, bytes]) -> list[Path]:
        """Write files shaped elsewhere (a tiled run's stitched output) as one unit, sidecar last."""
        return self._publish_all(files)

    def export_result(self, result: InferenceResult, source: Source, kinds: Iterable[str] = DEFAULT_KINDS,
                      mask_formats: Iterable[str] = ("png",)) -> list[Path]:
        """Write the chosen `kinds` of one result, masks in each of `mask_formats`, then the provenance sidecar;
        with "coco", its annotations join `self.coco` (written by `write_coco`).

        The masks are `source.threshold`-ed probabilities of `source.class_index`, or the argmax when the
        threshold is None. Returns the paths written, sidecar last.
        """
        kinds, mask_formats = list(kinds), list(mask_formats)
        planned_files(source.item_id, kinds, mask_formats)  # refuses unknown kinds and formats
        if Path(source.image).is_file():
            self._refuse_inside(Path(source.image).parent, "the folder of the image")
        labels = prediction_labels(result, source.threshold, source.class_index)
        payloads = _payloads(result, source, kinds, mask_formats, labels)
        document = provenance(source, result, {name: (kind, data) for name, (kind, data) in payloads.items()})
        files = {name: data for name, (_, data) in payloads.items()}
        files[PROVENANCE_NAME.format(id=source.item_id)] = (json.dumps(document, indent=2) + "\n").encode()
        published = self._publish_all(files)
        if "coco" in kinds:
            self.coco.add(source.item_id, self._relative_name(Path(source.image)), labels, result,
                          source.class_names, source.truth_labels)
        return published

    def _relative_name(self, image: Path) -> str:
        """An image's path as COCO's `file_name`: relative to the dataset when it lies inside it."""
        if self.dataset_root is not None:
            with contextlib.suppress(ValueError):
                return Path(image).resolve().relative_to(self.dataset_root.resolve()).as_posix()
        return Path(image).name

    def write_coco(self) -> list[Path]:
        """The COCO files of every image exported with kind "coco" so far (`CocoDocument.files`; nothing when none
        was)."""
        if not self.coco:
            return []
        return self._publish_all(self.coco.files(segscope_version()))

    def write_metrics(self, rows: list[dict[str, object]], summary: Mapping[str, object],
                      ranking: Metric | None = None) -> list[Path]:
        """`METRICS_FILES`: a CSV row per image, and JSON with the rows, the dataset means, what each metric is
        and the one the images are ranked by (`ranking`, else the default)."""
        flat = [csv_row(row) for row in rows]
        columns = list(dict.fromkeys(key for row in flat for key in row))
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(flat)
        document = json.dumps(json_safe({"images": rows, "summary": dict(summary), **catalogue_document(ranking)}),
                              indent=2, allow_nan=False)
        csv_name, json_name = METRICS_FILES
        return self._publish_all({csv_name: text.getvalue().encode(), json_name: (document + "\n").encode()})


def export_result(result: InferenceResult, out_dir: Path, source: Source, kinds: Iterable[str] = DEFAULT_KINDS,
                  mask_formats: Iterable[str] = ("png",), overwrite: bool = False) -> list[Path]:
    """`ExportFolder.export_result` as an export of its own."""
    with ExportFolder(out_dir, overwrite) as folder:
        return folder.export_result(result, source, kinds, mask_formats)


def write_metrics(rows: list[dict[str, object]], summary: Mapping[str, object], out_dir: Path,
                  overwrite: bool = False, ranking: Metric | None = None) -> list[Path]:
    """`ExportFolder.write_metrics` as an export of its own."""
    with ExportFolder(out_dir, overwrite) as folder:
        return folder.write_metrics(rows, summary, ranking)
