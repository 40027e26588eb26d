"""A model card as a value: its outputs (`OutputSpec`) and the whole card (`ModelCard`). `core.card.reader` reads
and checks cards (with `core.card.check` against the ONNX graph), and both name these types; neither is imported
here."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..dataset.masks import TRUTH_VALUES_KEY, format_truth_values
from ..errors import SegScopeError
from ..files.fileio import sha256_file
from ..stream.aipp import AippConfig
from ..stream.preprocess import Preprocess
from .model_files import check_model_path
from .onnx_graph import GraphInfo

#: The threshold of a 1-channel output whose card gives none.
DEFAULT_THRESHOLD = 0.5


@dataclass(frozen=True)
class OutputSpec:
    name: str
    kind: str  # see core.card.reader.OUTPUT_KINDS
    layout: str = "NHWC"
    activation: str = "none"
    threshold: float | None = None  # 1-channel outputs: foreground where p > threshold (default 0.5)
    named: bool = True  # the card gave the name (v1 cards may leave it out)
    threshold_on: str = "probability"  # or "raw": the threshold compares the raw output x (model_card.THRESHOLD_ON)

    def decision_threshold(self) -> float:
        """The threshold on the probabilities SegScope reports (the card's rule at every scale): the card's
        probability threshold; for a raw one, σ(T) after a sigmoid, and 0.5 for activation none (whose
        reported probability is σ(x − T), see `_activate`)."""
        if self.threshold is None:
            return DEFAULT_THRESHOLD
        if self.threshold_on == "probability":
            return self.threshold
        return 1.0 / (1.0 + math.exp(-self.threshold)) if self.activation == "sigmoid" else 0.5


@dataclass(frozen=True)
class ModelCard:
    path: Path
    name: str
    onnx: Path | None
    om: Path | None
    aipp: AippConfig | None
    input_name: str
    input_size: tuple[int, int]  # (width, height)
    preprocess: Preprocess
    outputs: tuple[OutputSpec, ...]
    class_names: tuple[str, ...]  # a 1-channel output's card may name only the foreground
    training: dict[str, Any]
    graph: GraphInfo | None = None
    sha256: dict[str, str] = field(default_factory=dict)  # "onnx"/"om" -> the file's hex SHA-256 when written
    truth_values: tuple[tuple[int, int], ...] = ()  # (mask file value, class index): how its truth masks read

    def truth_details(self) -> dict[str, str]:
        """What a backend's `Capabilities.details` say of the card's ground-truth values (`core.dataset.masks`)."""
        return {TRUTH_VALUES_KEY: format_truth_values(dict(self.truth_values))} if self.truth_values else {}

    @property
    def input_layout(self) -> str:
        return self.preprocess.layout

    @property
    def model(self) -> Path:
        """The model file to name in errors: the ONNX export, else the `.om`, else the card."""
        return self.onnx or self.om or self.path

    def output_index(self, kind: str) -> int | None:
        """Position of the first output of `kind` in the model's output list."""
        return next((i for i, o in enumerate(self.outputs) if o.kind == kind), None)

    def probability_index(self) -> int:
        index = next((i for i, o in enumerate(self.outputs) if o.kind != "argmax"), None)
        if index is None:
            raise SegScopeError(f"{self.path}: outputs: needs a score output (an activation), not only argmax")
        return index

    def check_recorded(self, key: str, path: Path) -> None:
        """`path` is the `key` file ("onnx" or "om") the card was written for, when the card records its SHA-256."""
        recorded = self.sha256.get(key)
        if recorded is None:
            return
        check_model_path(path, "ONNX model" if key == "onnx" else "Ascend model (.om)")  # before reading it whole
        if sha256_file(path) != recorded:
            raise SegScopeError(f"{path}: its SHA-256 differs from the one {self.path.name} records (field "
                                f"sha256.{key}): the card was written for another {path.suffix or 'file'}; write the "
                                "card again for this one (segscope card)")

    def output_error(self, index: int, problem: str) -> SegScopeError:
        spec = self.outputs[index]
        return SegScopeError(f"{self.path}: outputs[{index}] {spec.name!r}: {problem} (model {self.model.name})")
