"""Writing results to disk: masks, full-slide canvases, softmax tensors, heatmaps, corrected masks, metric
tables, as one export (`ExportFolder`) that `segscope eval --export` and the viewer's Export share.

Besides rasters, a mask can travel as QuPath GeoJSON (`geojson`, per image) and as COCO instances (`coco`:
`annotations.coco.json` for the export, with `truth.coco.json` and `predictions.coco.json` for COCOeval where
images have a ground truth, `write_coco`); see `core/interchange/`. What each kind writes for a result (name,
format, pixel size, bytes) is planned first (`plan.py`), and exactly that is written.

Every export carries provenance: `<id>_provenance.json` beside the files records the source image, the ROI
in slide pixels, the model and its SHA-256, the backend, the threshold and each file's hash (see
`provenance.py`). Masks are single-channel uint8 with no colour table (0/255 for binary models, the class
index otherwise), named after the dataset item; `<id>_mask_full.png` copied to the image's mask name is
its ground truth unchanged (beside its provenance, the dataset reader never takes an export for data).

An export is all or nothing: the folder is replaced as a unit (`core.files.atomic_folder`). Everything is
written into a new version of the folder made beside it (the files already there carried over as hard
links), which takes the folder's place only when the whole export succeeded; until then, and after any
failure, the folder is exactly as it was. Existing files are never replaced unless `overwrite` is set (and
then keep their permissions; an item's files of an earlier export that this one does not write go with
them). Exports into the dataset, or into a folder holding folders, are refused.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import logging
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO, TypeVar

import cv2
import numpy as np

from ..dataset.masks import BINARY_FOREGROUND
from ..editing.annotation import prediction_labels, probability_at_roi
from ..errors import SegScopeError
from ..files.atomic_folder import Content, StagedFolder, copy_of
from ..files.fileio import encode_image, read_bytes, read_json, sha256_file
from ..interchange.coco import CocoDocument
from ..interchange.geojson import mask_geojson
from ..metrics.catalogue import Metric, catalogue_document, csv_row
from ..metrics.document import StreamedDocument
from ..palette import HEATMAP_COLORMAP
from ..result import InferenceResult
from ..review.log import LOG_NAME
from ..roi import Roi
from ..wording import plural
from .names import DEFAULT_KINDS, MASK_FORMATS, METRICS_FILES, PROVENANCE_NAME, REVIEW_LOG, exported_item
from .plan import PlannedFile, corrected_plan, plan_item
from .provenance import Source, provenance, segscope_version

log = logging.getLogger(__name__)



def mask_image(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Labels as a grayscale PNG array: 0/255 when binary, else the class index."""
    return (labels * BINARY_FOREGROUND).astype(np.uint8) if num_classes == 2 else labels.astype(np.uint8)


def heatmap_colours(probability: np.ndarray) -> np.ndarray:
    """One class's probability map (H x W) in the viewer's colours: H x W x 3 uint8 (BGR)."""
    levels = np.round(np.clip(probability, 0.0, 1.0) * 255).astype(np.uint8)
    return cv2.applyColorMap(levels, getattr(cv2, f"COLORMAP_{HEATMAP_COLORMAP.upper()}"))


def heatmap_image(probabilities: np.ndarray, class_index: int = 1) -> np.ndarray:
    """`heatmap_colours` of class `class_index` of H x W x C probabilities (the last class when fewer)."""
    return heatmap_colours(probabilities[..., min(class_index, probabilities.shape[-1] - 1)])


def npy_bytes(array: np.ndarray) -> bytes:
    """`array` as the bytes of a .npy file (C order, no pickles)."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def npy_writer(array: np.ndarray) -> Callable[[Path], None]:
    """Writes `array` as a .npy file straight to its path (a 1 GB tensor is never copied into bytes first)."""
    return lambda path: np.save(path, np.ascontiguousarray(array), allow_pickle=False)


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
    """Raise, naming the first, when any of `paths` exists and `overwrite` is not set (`paths` are looked at one
    at a time: a run's hundreds of thousands of names are never held)."""
    if overwrite:
        return
    existing = (p for p in paths if p.exists())
    first = next(existing, None)
    if first is not None:
        more = sum(1 for _ in existing)
        raise SegScopeError(f"{first} and {plural(more, 'more file')}: each already exists (use --overwrite to "
                            "replace them)" if more else f"{first}: already exists (use --overwrite to replace)")


def described_files(record: Path) -> list[str]:
    """The files an item provenance sidecar `record` lists (only that item's export names; [] for none)."""
    item = exported_item(record.name)
    if record.name != PROVENANCE_NAME.format(id=item) or not record.is_file():
        return []
    try:
        document = read_json(record, "provenance sidecar", follow_symlinks=False)
    except SegScopeError:
        return []
    entries = document.get("files") if isinstance(document, dict) else None
    names = [e.get("name") for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    return [n for n in names if isinstance(n, str) and n == Path(n).name and exported_item(n) == item]


def _roi_contents(result: InferenceResult, source: Source,
                  files: list[PlannedFile]) -> list[tuple[PlannedFile, Content]]:
    """Each planned file of an ROI result with what it is made from (`Content`)."""
    labels = prediction_labels(result, source.threshold, source.class_index)
    values = mask_image(labels, result.num_classes)
    formats = {suffix: fmt for fmt, suffix in MASK_FORMATS.items()}
    made: dict[str, Callable[[PlannedFile], Content]] = {
        "mask": lambda f: encode_mask(values, formats[Path(f.name).suffix]),
        "canvas": lambda f: encode_mask(slide_canvas(values, result.roi, result.image_size),
                                        formats[Path(f.name).suffix]),
        "softmax": lambda f: npy_writer(result.probabilities.astype(np.float32, copy=False)),
        "heatmap": lambda f: encode_image(heatmap_colours(probability_at_roi(
            result, min(source.class_index, result.num_classes - 1)))),
        "geojson": lambda f: mask_geojson(labels, result.roi, result.num_classes, source.class_names),
        "corrected": lambda f: copy_of(source.corrected),  # type: ignore[arg-type]
    }
    return [(f, made[f.kind](f)) for f in files]


class ExportFolder:
    """One export into `out_dir`, all or nothing: use it as a context manager around every write of the export.

    While it is open the folder is locked (a second export into it is refused instead of interleaving) and
    the export is made in a new version of the folder beside it; leftovers of an interrupted export are
    recognised first (`notes` says what was done). Nothing in `out_dir` changes until the block ends without
    an exception: then the new version takes its place in one step (`core.files.atomic_folder`).
    `dataset_root`: an export inside the dataset is refused, as is one into an exported image's own folder,
    so an export is never taken for (or written over) ground truth. `record_written` False: `written` stays empty
    (`eval --export` of 100,000 images writes 200,000 files or more, and says none of them).
    """

    def __init__(self, out_dir: Path, overwrite: bool = False, dataset_root: Path | None = None,
                 record_written: bool = True):
        self.out_dir, self.overwrite = Path(out_dir), overwrite
        self.dataset_root = Path(dataset_root) if dataset_root is not None else None
        self._staged: StagedFolder | None = None
        self.notes: list[str] = []  # what was found and done about an interrupted export's leftovers
        self.written: list[Path] = []  # each file's path in `out_dir`, where it is once the export is published
        self._record_written = record_written
        self.coco = CocoDocument()  # the images exported with kind "coco", for `write_coco`

    def __enter__(self) -> ExportFolder:
        if self.dataset_root is not None:
            self._refuse_inside(self.dataset_root, "the dataset")
        self._staged = StagedFolder(self.out_dir, "export", flat=True).__enter__()
        self.notes = self._staged.notes
        return self

    def __exit__(self, *exc_info: object) -> None:
        staged, self._staged = self._staged, None
        if staged is not None:
            staged.__exit__(*exc_info)

    def _folder(self) -> StagedFolder:
        if self._staged is None:
            raise RuntimeError("ExportFolder used outside its `with` block")
        return self._staged

    def _refuse_inside(self, folder: Path, what: str) -> None:
        out, inside = self.out_dir.resolve(), Path(folder).resolve()
        if out == inside or inside in out.parents:
            raise SegScopeError(f"{self.out_dir}: lies in {what} {inside}; an export there could be read as (or "
                                "replace) ground truth: choose a folder outside it")

    def refuse_existing(self, names: Iterable[str]) -> None:
        """Raise, naming the first, when a file of `names` is in the folder and `overwrite` is not set."""
        folder = self._folder()
        refuse_existing((self.out_dir / n for n in names if folder.exists(n)), self.overwrite)

    def _write(self, files: list[tuple[PlannedFile, Content]], record: Callable[[dict[str, tuple[str, str]]], bytes]
               | None = None, record_name: str = "") -> list[Path]:
        """Write `files`, then (`record`, given each name's kind and SHA-256) the item's provenance sidecar;
        with overwrite, the files an earlier export of the item wrote that this one does not (another mask
        format, PNG before OME-TIFF) are left out of the new version."""
        folder = self._folder()
        names = [f.name for f, _ in files] + ([record_name] if record_name else [])
        refuse_existing([self.out_dir / n for n in names if folder.exists(n)], self.overwrite)
        if self.overwrite and record_name:
            for name in set(described_files(folder.path / record_name)) - set(names):
                folder.remove(name)
        digests: dict[str, tuple[str, str]] = {}
        for planned, content in files:
            path = folder.create(planned.name, content, self.overwrite)
            digest = hashlib.sha256(content).hexdigest() if isinstance(content, bytes) else sha256_file(path)
            digests[planned.name] = (planned.kind, digest)
        if record is not None:
            folder.create(record_name, record(digests), self.overwrite)
        published = [self.out_dir / n for n in names]
        if self._record_written:
            self.written += published
        return published

    def write_item(self, item_id: str, files: list[tuple[PlannedFile, Content]],
                   document: Callable[[dict[str, tuple[str, str]]], dict[str, object]]) -> list[Path]:
        """One item's planned `files` (each with its `Content`), then its provenance sidecar, made by
        `document` from each file's kind and SHA-256. Returns the paths in `out_dir`, sidecar last."""
        def record(digests: dict[str, tuple[str, str]]) -> bytes:
            return (json.dumps(document(digests), indent=2) + "\n").encode()
        return self._write(files, record, PROVENANCE_NAME.format(id=item_id))

    def export_result(self, result: InferenceResult, source: Source, kinds: Iterable[str] = DEFAULT_KINDS,
                      mask_formats: Iterable[str] = ("png",)) -> list[Path]:
        """Write the chosen `kinds` of one ROI result (`plan.plan_item`), masks in each of `mask_formats`,
        then the provenance sidecar; with "coco", its annotations join `self.coco` (written by `write_coco`).

        The masks are `source.threshold`-ed probabilities of `source.class_index`, or the argmax when the
        threshold is None. Returns the paths written, sidecar last.
        """
        kinds = list(kinds)
        files = plan_item(source.item_id, kinds, result, mask_formats=mask_formats,
                          corrected=corrected_plan(source.item_id, source.corrected))
        if Path(source.image).is_file():
            self._refuse_inside(Path(source.image).parent, "the folder of the image")
        published = self.write_item(source.item_id, _roi_contents(result, source, files),
                                    lambda digests: provenance(source, result, digests))
        if "coco" in kinds:
            labels = prediction_labels(result, source.threshold, source.class_index)
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
        return self._write([(PlannedFile(name, "coco", "JSON"), data)
                            for name, data in self.coco.files(segscope_version()).items()])

    def review_log(self) -> Path | None:
        """The dataset's review log (`core.review.log`), when it has one."""
        log = self.dataset_root / LOG_NAME if self.dataset_root is not None else None
        return log if log is not None and log.is_file() else None

    def write_review_log(self) -> list[Path]:
        """The dataset's review log (the decisions behind its corrections) copied as it is; nothing without one."""
        log = self.review_log()
        if log is None:
            return []
        return self._write([(PlannedFile(REVIEW_LOG, "corrected", "JSON lines"), read_bytes(log, "review log"))])

    def metrics_table(self) -> MetricsTable:
        """The metric tables of this export, made row by row (`MetricsTable`)."""
        return MetricsTable(self._write, self._folder().path)

    def write_metrics(self, rows: Iterable[dict[str, object]], summary: Mapping[str, object],
                      ranking: Metric | None = None) -> list[Path]:
        """`METRICS_FILES` of `rows` (`MetricsTable`)."""
        with self.metrics_table() as table:
            for row in rows:
                table.add(row)
            return table.finish(summary, ranking)


class MetricRows:
    """Rows of a metric table (`core.evaluate.evaluation_row`) as a run makes them, kept on disk in an unnamed
    temporary file in `scratch` (the disk the table goes to), never in memory; the CSV's columns are known only once
    every row is (a QA metric or a class first met at the last image). Use it as a context manager (the file goes
    when the block ends)."""

    def __init__(self, scratch: Path):
        self._spool = tempfile.TemporaryFile("w+", encoding="utf-8", dir=scratch)
        self._columns: dict[str, None] = {}  # the CSV's, in the order rows first have them

    def __enter__(self: RowsT) -> RowsT:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._spool.close()

    def add(self, row: Mapping[str, object]) -> None:
        self._columns.update(dict.fromkeys(csv_row(row)))
        self._spool.write(json.dumps(row) + "\n")  # NaN and infinities as JSON extensions: read back as they were

    def rows(self) -> Iterator[dict[str, object]]:
        """The rows added, in order, as they were."""
        self._spool.seek(0)
        return (json.loads(line) for line in self._spool)

    def write_csv(self, file: BinaryIO) -> None:
        """The CSV: a header of every column any row has, then a line per row (per-class lists as a column per
        class, `csv_row`), UTF-8."""
        text = io.TextIOWrapper(file, encoding="utf-8", newline="")
        writer = csv.DictWriter(text, fieldnames=list(self._columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows(csv_row(row) for row in self.rows())
        text.flush()
        text.detach()


RowsT = TypeVar("RowsT", bound=MetricRows)


class MetricsTable(MetricRows):
    """An export's `METRICS_FILES` of the rows added (`add`), written by `finish`: a CSV row per image, and JSON with
    the rows, the dataset means, what each metric is and the one the images are ranked by."""

    def __init__(self, write: Callable[[list[tuple[PlannedFile, Content]]], list[Path]], scratch: Path):
        super().__init__(scratch)
        self._write = write  # the export's files, as `ExportFolder` writes them

    def finish(self, summary: Mapping[str, object], ranking: Metric | None = None) -> list[Path]:
        """Write both files (`ranking`: the metric the images are ranked by, else the default); returns their
        paths in `out_dir`."""
        def write_csv(path: Path) -> None:
            with open(path, "wb") as file:
                self.write_csv(file)

        def write_json(path: Path) -> None:
            with open(path, "w", encoding="utf-8", newline="") as file:
                document = StreamedDocument(file.write, "images")
                for row in self.rows():
                    document.add(row)
                document.close({"summary": dict(summary), **catalogue_document(ranking)})
                file.write("\n")

        csv_name, json_name = METRICS_FILES
        return self._write([(PlannedFile(csv_name, "metrics", "CSV"), write_csv),
                            (PlannedFile(json_name, "metrics", "JSON"), write_json)])


def export_result(result: InferenceResult, out_dir: Path, source: Source, kinds: Iterable[str] = DEFAULT_KINDS,
                  mask_formats: Iterable[str] = ("png",), overwrite: bool = False) -> list[Path]:
    """`ExportFolder.export_result` as an export of its own."""
    with ExportFolder(out_dir, overwrite) as folder:
        return folder.export_result(result, source, kinds, mask_formats)


def write_metrics(rows: Iterable[dict[str, object]], summary: Mapping[str, object], out_dir: Path,
                  overwrite: bool = False, ranking: Metric | None = None) -> list[Path]:
    """`ExportFolder.write_metrics` as an export of its own."""
    with ExportFolder(out_dir, overwrite) as folder:
        return folder.write_metrics(rows, summary, ranking)
