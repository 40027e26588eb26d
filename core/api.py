"""SegScope as a Python library (`import segscope`): a dataset and a model opened as `segscope eval` opens them,
driven through the viewer's own session (`core.session.Session`: its commands, jobs and events, run here in the
caller's thread), so a script, the viewer and `eval` read the same masks by the same rule and give the same
numbers.

    s = segscope.open("data", model="models/unet_hw960_bs1.json")
    s.run_all()
    rows = s.metrics()          # one dict per image: `segscope eval --json`'s "images"
    s.export("out", kinds=["mask", "heatmap"])

`open` takes `segscope eval`'s options by their Python names (`backend="auto"`, `devices="0,1"`, `truth=...`,
`metrics="all"`, ...), read by eval's own parser. The session is `Analysis.session` for what this module does not
wrap.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from .backend_spec import BackendSpec, opening_notes, spec_from_args
from .cli import OptionValue, command_options
from .cli.cache import apply_cache_options
from .cli.options import refuse_remote_only_options
from .dataset.dataset import Dataset
from .dataset.truth import choice_note
from .editing.document import MaskDocument
from .editing.files import SaveMode
from .errors import SegScopeError
from .export.job import ROI_KINDS, Exportable, ExportChoices
from .export.names import DEFAULT_KINDS
from .export.plan import check_kinds
from .quality.options import metric_spec
from .result import InferenceResult
from .roi import Roi
from .session.backend_state import BackendState
from .session.events import Message
from .session.inference import Inference
from .session.jobs import Progress, run_backend_job, run_here
from .session.session import Session
from .stream.input import StreamInput

__all__ = ["Analysis", "open"]

LOG = logging.getLogger("segscope")
#: `segscope eval` options a script gives otherwise: the export is `Analysis.export`, one image's ROI
#: `Analysis.set_roi`; whole slides in tiles and precision variants are `eval`'s only.
_NOT_HERE = {"export": "call .export(folder, kinds=[...])", "export_kinds": "call .export(folder, kinds=[...])",
             "overwrite": "call .export(folder, overwrite=True)", "json": "call .metrics()",
             "roi": "call .set_roi(roi, image) (kept in the dataset's sidecar, as the viewer keeps it)",
             "tile": "run `segscope eval --tile`", "precision": "run `segscope eval --precision`"}


def open(dataset: str | os.PathLike[str], model: str | os.PathLike[str] | None = None, *,
         backend: str = "auto", persist: bool = False, **options: OptionValue) -> Analysis:
    """Open the dataset folder `dataset` and the model card (or pipeline, or project folder) `model` (None: the
    shipped demo stream) on `backend`, as `segscope eval --dataset DATASET --model MODEL --backend BACKEND` would:
    `options` are eval's other options by their Python names (`pipeline=`, `truth="original"`, `devices="0,1"`,
    `metrics="all"`, `max_pixels=`, ...). Each truth is checked by the model's mask rule (a refused mask is that
    image's error, in `messages`). `persist`: keep each image's newest result on disk for the viewer's next
    session. Close it (or use `with`) to close the backend."""
    given = {name: value for name, value in options.items() if value is not None}
    refused = next((name for name in given if name in _NOT_HERE), None)
    if refused is not None:
        raise SegScopeError(f"{refused}: not an option of segscope.open; {_NOT_HERE[refused]}")
    args = command_options("eval", {"dataset": Path(dataset), "model": model, "backend": backend, **given})
    refuse_remote_only_options(args)
    apply_cache_options(args)
    quality = metric_spec(args)
    spec = spec_from_args(args)
    stream = StreamInput.of(spec.pipeline)
    opened = Dataset.open(args.dataset, max_pixels=args.max_pixels, truth=args.truth)
    analysis = Analysis(Session(persist=persist, backend=BackendState(spec)), stream)
    analysis._note(choice_note(opened.items, opened.truth_choice))
    run_here(analysis.session.open_dataset(opened))
    analysis.session.set_quality_spec(quality)
    analysis.open_backend(spec)
    return analysis


class Analysis:
    """A dataset and a model open for scripting (`open`): runs, metrics, export, the current image, its ROI and
    its mask edits, all through `session`. `messages` holds what the session said (also logged to `segscope`)."""

    def __init__(self, session: Session, stream: StreamInput) -> None:
        self.session = session
        self.messages: list[Message] = []
        self._stream = stream
        self._inference = Inference()  # the open backend (this thread owns it)
        session.events.message.connect(self._said)

    def _said(self, message: Message) -> None:
        self.messages.append(message)
        LOG.log({"error": logging.ERROR, "warning": logging.WARNING}.get(message.level, logging.INFO), message.text)

    def _note(self, text: str | None) -> None:
        """Say `text` as the session's messages are said (nothing for None or "")."""
        if text:
            self._said(Message("info", text))

    def open_backend(self, spec: BackendSpec) -> None:
        """Open `spec` (the one open before is closed), as the viewer opens its choice: the truths are read by its
        model's rule and checked."""
        capabilities = self._inference.open(spec)
        for line in opening_notes(capabilities):
            self._note(line)
        state = self.session.backend
        assert state is not None  # made by `open`
        state.opened(capabilities)
        check = self.session.truths_by_model()
        if check is not None:
            run_here(check)

    def close(self) -> None:
        """Close the backend (the session's results stay readable)."""
        self._inference.close()
        self.session.flush()

    def __enter__(self) -> Analysis:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------ images
    @property
    def dataset(self) -> Dataset:
        dataset = self.session.dataset
        assert dataset is not None  # opened by `open`
        return dataset

    @property
    def images(self) -> list[str]:
        """Every image's id, in dataset order."""
        return [item.id for item in self.dataset.items]

    @property
    def current(self) -> str | None:
        """The current image's id (`select`)."""
        return self.session.current.id if self.session.current is not None else None

    def select(self, image: str) -> None:
        """Make `image` the current one: its size and mask are read (for `roi`, `mask` and the edits)."""
        run_here(self.session.select(image))

    @property
    def roi(self) -> Roi | None:
        """The current image's ROI (None before `select`)."""
        return self.session.roi

    def set_roi(self, roi: Roi | str | Sequence[int], image: str | None = None) -> Roi:
        """Move an image's ROI (the current one by default; `"x0,y0,x1,y1"`, a 4-tuple or a `Roi`), clamped into
        the image and kept in the dataset's sidecar as the viewer keeps it; returns the ROI set."""
        if isinstance(roi, str):
            roi = Roi.parse(roi, "roi")
        elif not isinstance(roi, Roi):
            roi = Roi(*roi)
            roi.validate("roi")
        return self.session.set_roi(roi, image)

    def undo_roi(self) -> str | None:
        """Undo the last ROI move; returns that image's id (None: nothing to undo)."""
        return self.session.undo_roi()

    # ------------------------------------------------------------------------------------------- runs
    def run(self, images: Iterable[str], progress: Progress | None = None) -> None:
        """Run these images on their ROIs now; `progress(done, total)` after each (None: a tqdm bar when tqdm is
        installed). An image that fails is that image's error in `messages`; the others run."""
        ids = list(images)
        backend = self._inference.backend
        if backend is None:
            raise SegScopeError("the backend is closed: open the dataset again")
        job = self.session.run(ids, stream=self._stream)
        bar = _tqdm_bar(len(ids)) if progress is None else None
        try:
            run_backend_job(job, backend, progress or (bar.update if bar is not None else _nothing))
        finally:
            if bar is not None:
                bar.close()

    def run_all(self, progress: Progress | None = None) -> None:
        """Run every image (`run`)."""
        self.run(self.images, progress)

    def result(self, image: str) -> InferenceResult | None:
        """What answers for the image: its run's probabilities, classes and ROI (None: not run)."""
        return self.session.result(image)

    def metrics(self) -> list[dict[str, object]]:
        """One dict per image with a result, in dataset order, with the keys and values of `segscope eval --json`'s
        "images" (the time keys measure this run); scored again first where its truth or result changed."""
        return self.session.metrics_table()[0]

    def summary(self) -> dict[str, object]:
        """The means over those images (`segscope eval --json`'s "summary", without the QA metrics' summary)."""
        return self.session.metrics_table()[1]

    # ------------------------------------------------------------------------------------------ export
    def export(self, folder: str | os.PathLike[str], kinds: Sequence[str] = DEFAULT_KINDS, *,
               images: Iterable[str] | None = None, metrics: bool = True, overwrite: bool = False) -> list[Path]:
        """Write `kinds` (eval's `--export-kinds`: a list, or one string as the option takes it, "mask,heatmap") of
        every image with a result (or of `images`: ids, or one id) and the metric tables into `folder`, all or
        nothing, as the viewer's Export and `eval --export` write them; the files written."""
        if isinstance(kinds, str):  # not its letters
            kinds = kinds.split(",")
        check_kinds(kinds, ROI_KINDS)
        if isinstance(images, str):
            images = (images,)
        ids = tuple(images) if images is not None else Exportable(self.session).ids(stitched=False)
        choices = ExportChoices(tuple(k for k in ROI_KINDS if k in kinds), metrics, Path(folder), "all", ids,
                                overwrite)
        written: tuple[Path, ...] = ()
        work = self.session.start_export(choices)
        try:
            for step in work():
                self._note(" ".join(step.notes))
                written = step.written or written
        finally:
            self.session.export_ended()
        return list(written)

    # ---------------------------------------------------------------------------------------- mask edits
    @property
    def mask(self) -> np.ndarray | None:
        """The current image's ground truth, with its unsaved edits (None: none, or no image selected)."""
        document = self.session.document
        return document.mask if document is not None else None

    def _editing(self) -> tuple[MaskDocument, InferenceResult]:
        """The current image's mask document and its result (edits stay inside the result's ROI)."""
        document, image = self.session.document, self.current
        if document is None or image is None:
            raise SegScopeError("no image is selected: call .select(image) first")
        result = self.session.result(image)
        if result is None:
            raise SegScopeError(f"{image}: run it first (edits are made within its result's ROI)")
        return document, result

    def paint_polygon(self, points: Sequence[tuple[float, float]], class_index: int = 1) -> None:
        """Fill the polygon through `points` (x, y slide pixels) with the class (0: erase), within the ROI."""
        document, result = self._editing()
        document.polygon(result, points, class_index)

    def fill(self, seed: tuple[int, int], class_index: int = 1) -> None:
        """Flood-fill the region of the pixel `seed` (x, y) with the class, within the ROI."""
        document, result = self._editing()
        document.fill(result, seed, class_index)

    def accept_prediction(self, threshold: float | None = None) -> None:
        """The ROI's mask becomes the prediction (the argmax, or the defect class where P >= threshold)."""
        document, result = self._editing()
        document.accept_prediction(result, threshold)

    def undo_edit(self) -> None:
        """Undo the last mask edit."""
        if self.session.document is not None:
            self.session.document.undo()

    def save_mask(self, mode: SaveMode = "corrected") -> None:
        """Save the edits: "corrected" writes mask_corrected.png beside the mask (the truth from then on, as in
        the viewer and eval), "replace" replaces the mask (its original kept as a backup). SegScopeError: nothing
        to save, the file could not be written, or another writer changed it since it was read (the edits stay,
        unsaved)."""
        said = len(self.messages)
        run_here(self.session.save_job(mode))
        problem = next((m.text for m in self.messages[said:] if m.level != "info"), None)  # (failed, or a conflict)
        if problem is not None:
            raise SegScopeError(problem)

    def discard_edits(self) -> None:
        """Forget the unsaved edits: the mask on disk is the truth again."""
        self.session.discard()


def _nothing(done: int, total: int) -> None:
    return None


class _Bar:
    """A tqdm bar that follows `progress(done, total)` calls."""

    def __init__(self, bar: Any) -> None:
        self._bar, self._done = bar, 0

    def update(self, done: int, total: int) -> None:
        self._bar.update(done - self._done)
        self._done = done

    def close(self) -> None:
        self._bar.close()


def _tqdm_bar(total: int) -> _Bar | None:
    """A progress bar of `total` images when tqdm is installed (a notebook's own bar under Jupyter)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return _Bar(tqdm(total=total, unit="image"))
