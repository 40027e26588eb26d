"""`--precision`: a faster variant of the embedded backend's model, and the fp32 check it owes.

`PrecisionBackend` runs the network through the faster session (core.backends.precision) and, for the first images
of a run, through the backend's own fp32 session too, on the same tensors; `AccuracyCheck` scores those fp32
results against the masks and ends the run with one line: the variant's foreground Dice beside fp32's.
"""

from __future__ import annotations

import argparse
import math
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import onnxruntime as ort

from ..cache.outputs import KeptOutputs
from ..cache.settings import INT8, OPENVINO, kept_folder
from ..dataset.dataset import Dataset
from ..errors import SegScopeError
from ..evaluate import ImageEvaluation, evaluation_request
from ..metrics.scores import argmax_at_roi, hard_metrics
from ..roi import Roi
from ..stream.input import StreamInput
from .base import Backend, ImageSource, InferenceRequest, InferenceResult, read_ahead
from .embedded import EmbeddedBackend, ModelSession, _Prepared
from .precision import FastSession, fast_session, spread
from .precision_options import DEFAULT_CHECKS, DEFAULT_PRECISION

#: The foreground Dice change (mean over the checked images) a faster variant may cost: the issue's goal.
DICE_BOUND = 0.002


class PrecisionBackend(Backend):
    """`inner`'s stream with its network run by `session`; the first `checks` images also run in fp32."""

    def __init__(self, inner: EmbeddedBackend, precision: str, fast: FastSession, checks: int = 0):
        self.inner, self.precision, self.runs_on = inner, precision, fast.runs_on
        self._session: ModelSession | None = fast.session
        self._fp32: ModelSession | None = None  # the fp32 check's session, its outputs kept (made when first used)
        self._checks_left = checks
        self._references: deque[InferenceResult] = deque()
        # the calibration's requests as prepared: taken by the run's requests for the same file and ROI
        self._prepared = {key: p for key, p in ((_key(r), p) for r, p in fast.prepared) if key is not None}
        caps = inner.capabilities
        self.capabilities = replace(caps, device=f"CPU ({fast.runs_on})",
                                    details={**caps.details, "precision": f"{precision}: {fast.runs_on}"})

    def infer(self, image: ImageSource, roi: Roi | None = None) -> InferenceResult:
        return self._run(self._prepare(InferenceRequest(image, roi)))

    def infer_many(self, requests: Iterable[InferenceRequest]) -> Iterator[InferenceResult]:
        """As `EmbeddedBackend.infer_many`: the next image prepared on a thread while this one runs."""
        return read_ahead(requests, self._prepare, self._run, self.inner.read_ahead, "segscope-prepare")

    def _prepare(self, request: InferenceRequest) -> _Prepared:
        key = _key(request)
        found = self._prepared.pop(key, None) if key is not None else None
        return found if found is not None else self.inner.prepare(request.image, request.roi)

    def _run(self, prepared: _Prepared) -> InferenceResult:
        if self._session is None:
            raise SegScopeError("the embedded backend is closed; open a new one")
        result = self.inner.run(prepared, self._session)
        if self._checks_left > 0:
            self._checks_left -= 1
            self._references.append(self.inner.run(prepared, self._reference_session()))
        return result

    def _reference_session(self) -> ModelSession:
        """The backend's fp32 session, its outputs kept in the cache: a repeat run checks against them without
        running fp32 again."""
        if self._fp32 is None:
            session, model = self.inner.session, self.inner.stream.card.onnx
            if session is None or model is None:
                raise SegScopeError("the embedded backend is closed; open a new one")
            threads = session.get_session_options().intra_op_num_threads
            self._fp32 = KeptOutputs(session, model, f"onnxruntime-{ort.__version__}-{threads}-threads")
        return self._fp32

    def take_reference(self) -> InferenceResult | None:
        """The fp32 result of the oldest checked image not taken yet (results come in request order)."""
        return self._references.popleft() if self._references else None

    def close(self) -> None:
        self._session = None
        self._references.clear()
        self._prepared.clear()
        self.inner.close()


def _key(request: InferenceRequest) -> tuple[Path, Roi | None] | None:
    """What a request for a file asks for (None: not a file; such requests are not reused)."""
    return (request.image, request.roi) if isinstance(request.image, Path) and request.placement is None else None


class AccuracyCheck:
    """Foreground Dice of the faster variant and of fp32 on the images run both ways (no-op for fp32)."""

    def __init__(self, backend: Backend):
        self.backend = backend if isinstance(backend, PrecisionBackend) else None
        self.fast: list[float] = []
        self.fp32: list[float] = []
        self.checked = 0  # images run both ways
        self.without_mask = 0  # of those, without a truth mask: not compared
        self.without_foreground = 0  # with a mask but no foreground in it or in either prediction: not compared

    def add(self, evaluation: ImageEvaluation) -> None:
        """Called for every evaluation of the run, in order."""
        reference = self.backend.take_reference() if self.backend else None
        if reference is None:
            return
        self.checked += 1
        if evaluation.metrics is None or evaluation.truth_labels is None:
            self.without_mask += 1
            return
        # fp32 scored against the very truth the fast result was (its labels, not the mask read again)
        fp32_dice = float(hard_metrics(argmax_at_roi(reference), evaluation.truth_labels,  # type: ignore[arg-type]
                                       reference.num_classes)["foreground_dice"])
        fast_dice = evaluation.metrics.foreground_dice
        if math.isnan(fast_dice) and math.isnan(fp32_dice):
            self.without_foreground += 1
            return  # no foreground either way: nothing to compare
        # n/a on one side only: that side agrees with a truth without foreground, where the other found some
        self.fast.append(1.0 if math.isnan(fast_dice) else fast_dice)
        self.fp32.append(1.0 if math.isnan(fp32_dice) else fp32_dice)

    def summary(self) -> dict[str, object] | None:
        if self.backend is None:
            return None
        images = len(self.fast)
        fast = sum(self.fast) / images if images else None
        fp32 = sum(self.fp32) / images if images else None
        change = fast - fp32 if fast is not None and fp32 is not None else None
        return {"precision": self.backend.precision, "runs_on": self.backend.runs_on,
                "foreground_dice": fast, "fp32_foreground_dice": fp32, "change": change,
                "images": images, "checked": self.checked, "without_foreground": self.without_foreground,
                "without_mask": self.without_mask, "bound": DICE_BOUND,
                "within_bound": None if change is None else abs(change) <= DICE_BOUND}

    def lines(self) -> tuple[str, str | None]:
        """(the result line, a warning when the change exceeds the bound); call once the run is over."""
        summary = self.summary()
        assert summary is not None and self.backend is not None
        name = self.backend.precision
        if summary["change"] is None:
            return (f"{name}: its foreground Dice change vs fp32 is unknown: none of the {self.checked} images "
                    f"run in fp32 too has a mask ({self.backend.runs_on})", None)
        left_out = "; ".join(part for part in (
            f"{self.without_foreground} without foreground in its mask and either prediction"
            if self.without_foreground else "",
            f"{self.without_mask} without a mask" if self.without_mask else "") if part)
        line = (f"{name}: foreground Dice {summary['foreground_dice']:.6f} vs fp32 "
                f"{summary['fp32_foreground_dice']:.6f} ({summary['change']:+.6f}) compared on {summary['images']} "
                f"of the {self.checked} images run both ways ({self.backend.runs_on})"
                + (f"; not compared: {left_out}" if left_out else ""))
        warning = None if summary["within_bound"] else (
            f"{name} changed the foreground Dice by {summary['change']:+.4f} vs fp32, more than {DICE_BOUND}: "
            "check its results or run with --precision fp32")
        return line, warning


def with_precision(backend: Backend, args: argparse.Namespace, dataset: Dataset,
                   roi: Roi | None = None, stream: StreamInput | None = None) -> tuple[Backend, list[str]]:
    """`backend` itself for fp32, else its faster variant calibrated on a few of the run's own requests (the
    dataset's images at `roi` or their own ROIs), and notes to print."""
    if args.precision == DEFAULT_PRECISION:
        return backend, []
    if not isinstance(backend, EmbeddedBackend):
        raise SegScopeError(f"--precision {args.precision}: the {backend.capabilities.name} backend has no faster "
                            "variants; use --backend embedded or --precision fp32")
    requests = [evaluation_request(dataset, item, roi, stream=stream) for item in spread(dataset.items)]
    kept = args.precision_cache or kept_folder(INT8)  # the cache's int8/ unless --no-cache: made once, reused
    fast = fast_session(backend, args.precision, requests, kept, kept_folder(OPENVINO))
    checks = DEFAULT_CHECKS if args.precision_check is None else args.precision_check
    return PrecisionBackend(backend, args.precision, fast, checks), fast.notes
