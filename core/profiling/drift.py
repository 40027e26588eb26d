"""Drift triage: the accuracy-comparison CSV `ait/msit debug compare` writes, ranked, with its first failure.

`result_{timestamp}.csv` has one row per compared tensor in execution order with the documented columns
Index, OpType, NPUDump, DataType, Address, GroundTruth, DataType, TensorIndex, Shape, OverFlow,
CosineSimilarity, MaxAbsoluteError, AccumulatedRelativeError, RelativeEuclideanDistance,
KullbackLeiblerDivergence, StandardDeviation, MeanAbsoluteError, RootMeanSquareError, MaxRelativeError,
MeanRelativeError, CompareFailReason (CANN / msit compare docs; DataType appears twice, NPU then ground
truth). Like msit's own analyser, empty and NaN cells are not judged (the summary counts the rows left
unjudged; a file with nothing to judge is refused), an infinite value fails, and the first operator past a
threshold is where the port starts to drift: the operators after it inherit its error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SegScopeError
from ..files.fileio import read_csv


@dataclass(frozen=True)
class Thresholds:
    """The alarm levels users apply (msit compare's analyser): cosine < 0.99, rel. Euclidean > 0.05, KL > 0.005."""

    cosine: float = 0.99
    relative_euclidean: float = 0.05
    kl: float = 0.005

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not math.isfinite(value):
                raise SegScopeError(f"threshold {name} is {value}: thresholds must be finite numbers")

    def failures(self, cosine: float | None, relative_euclidean: float | None, kl: float | None) -> list[str]:
        """What is past its threshold, e.g. ["cosine 0.95 < 0.99"]; a value that is NaN or infinite fails
        too (no comparison can pass it); None is a value not given (not judged)."""
        found = []
        for label, value, limit, past in (("cosine", cosine, self.cosine, lambda v, t: v < t),
                                          ("relative Euclidean", relative_euclidean, self.relative_euclidean,
                                           lambda v, t: v > t), ("KL", kl, self.kl, lambda v, t: v > t)):
            if value is not None and not math.isfinite(value):
                found.append(f"{label} is {value} (not a finite number)")
            elif value is not None and past(value, limit):
                found.append(f"{label} {value:.6g} {'<' if label == 'cosine' else '>'} {limit:g}")
        return found

    def verdict(self, cosine: float, relative_euclidean: float, kl: float, problems: tuple[str, ...] = ()) -> str:
        """One line: "PASS (cosine >= 0.99, ...)" or "FAIL: cosine 0.95 < 0.99; ..."; `problems` (e.g. NaN in
        an input) are failures of their own."""
        failures = [*problems, *self.failures(cosine, relative_euclidean, kl)]
        if failures:
            return "FAIL: " + "; ".join(failures)
        return (f"PASS (cosine >= {self.cosine:g}, relative Euclidean <= {self.relative_euclidean:g}, "
                f"KL <= {self.kl:g})")


#: Our field -> the msit column it comes from.
METRIC_COLUMNS = {
    "cosine": "CosineSimilarity", "relative_euclidean": "RelativeEuclideanDistance",
    "kl": "KullbackLeiblerDivergence", "max_abs": "MaxAbsoluteError", "mean_abs": "MeanAbsoluteError",
    "rmse": "RootMeanSquareError", "max_rel": "MaxRelativeError", "mean_rel": "MeanRelativeError",
}
REQUIRED = ("NPUDump", "GroundTruth", "CosineSimilarity")
#: The metrics the thresholds judge; a row's empty or NaN cell is not judged, as msit's analyser skips it.
JUDGED = ("cosine", "relative_euclidean", "kl")
#: A compare result has a row per tensor of a model run: tens of megabytes at most.
MAX_CSV_BYTES = 512 << 20


@dataclass(frozen=True)
class DriftRow:
    line: int  # in the CSV file
    index: str
    op_type: str
    npu: str  # NPUDump: the .om operator
    truth: str  # GroundTruth: the ONNX node(s)
    tensor: str  # TensorIndex, e.g. "Conv_1:output:0"
    shape: str
    metrics: dict[str, float]  # METRIC_COLUMNS keys; NaN where the cell is empty or NaN
    reason: str  # CompareFailReason
    failures: tuple[str, ...] = ()


@dataclass(frozen=True)
class DriftReport:
    source: str
    rows: tuple[DriftRow, ...]  # file (execution) order
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def first_failure(self) -> DriftRow | None:
        return next((r for r in self.rows if r.failures), None)

    @property
    def unjudged(self) -> int:
        """Rows with no cosine, relative Euclidean distance or KL to judge (empty or NaN cells)."""
        return sum(all(math.isnan(r.metrics[k]) for k in JUDGED) for r in self.rows)

    def ranked(self) -> list[DriftRow]:
        """Worst first: by cosine similarity (NaN last), then by relative Euclidean distance."""
        def key(row: DriftRow) -> tuple[bool, float, float]:
            cosine, red = row.metrics["cosine"], row.metrics["relative_euclidean"]
            return (math.isnan(cosine), cosine if not math.isnan(cosine) else 0.0, -red if not math.isnan(red) else 0.0)
        return sorted(self.rows, key=key)


def _number(text: str, path: Path, line: int, column: str) -> float:
    text = text.strip()
    if text in ("", "NaN", "nan", "N/A", "NA", "-"):
        return math.nan
    try:
        return float(text)
    except ValueError:
        raise SegScopeError(f"{path}:{line}: column {column} holds {text!r}, not a number; is this the "
                            "result_*.csv that msit/ait debug compare wrote, unedited?") from None


def load_drift_csv(path: Path, thresholds: Thresholds | None = None) -> DriftReport:
    """Read a msit/ait compare result CSV; errors name the file, the line and the column."""
    thresholds = thresholds or Thresholds()
    rows_read = read_csv(path, "compare result CSV", MAX_CSV_BYTES)
    header = rows_read[0][1] if rows_read else None
    if not header:
        raise SegScopeError(f"{path}: empty file; expected the result_*.csv that msit/ait debug compare writes")
    header = [h.strip() for h in header]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise SegScopeError(f"{path}:1: header has no column {', '.join(missing)} (found {', '.join(header[:8])}"
                            f"{', ...' if len(header) > 8 else ''}); give the result_*.csv of msit/ait debug compare")
    col = {name: header.index(name) for name in header}  # first occurrence: NPUDump's DataType

    def cell(values: list[str], name: str) -> str:
        i = col.get(name)
        return values[i].strip() if i is not None and i < len(values) else ""

    rows = []
    for line, values in rows_read[1:]:
        if not any(v.strip() for v in values):
            continue
        if len(values) < len(header) and len(values) <= col["CosineSimilarity"]:
            raise SegScopeError(f"{path}:{line}: {len(values)} cells, the header has {len(header)}: the file is "
                                "truncated or was edited; rerun msit debug compare")
        metrics = {key: _number(cell(values, column), path, line, column) if column in col else math.nan
                   for key, column in METRIC_COLUMNS.items()}
        failures = thresholds.failures(*(None if math.isnan(metrics[k]) else metrics[k] for k in JUDGED))
        rows.append(DriftRow(line, cell(values, "Index"), cell(values, "OpType"), cell(values, "NPUDump"),
                             cell(values, "GroundTruth"), cell(values, "TensorIndex"), cell(values, "Shape"),
                             metrics, cell(values, "CompareFailReason"), tuple(failures)))
    if not rows:
        raise SegScopeError(f"{path}: header only, no compared tensors: msit matched no operator pair; convert the "
                            ".om with fusion off or give compare the fusion rule JSON (-fr), as ait's example "
                            "05_aipp_model_compare does")
    report = DriftReport(str(path), tuple(rows), thresholds)
    if report.unjudged == len(rows):
        raise SegScopeError(f"{path}: none of its {len(rows)} rows has a CosineSimilarity, RelativeEuclideanDistance "
                            "or KullbackLeiblerDivergence to judge (all empty or NaN): see their CompareFailReason")
    return report
