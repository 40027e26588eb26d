"""Run history, run comparison against hand-computed numbers and `segscope compare`, timing tables."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from segscope.core.backends.base import Capabilities
from segscope.core.cli import main as cli_main
from segscope.core.errors import SegScopeError
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.core.session.runs import RunHistory, compare_runs, timing_table, write_timing_csv

ROI = Roi(10, 20, 12, 21)


def result(probabilities: list, backend: str = "embedded", roi: Roi = ROI,
           timings: dict | None = None) -> InferenceResult:
    p = np.asarray(probabilities, np.float32)
    return InferenceResult(p, p.argmax(-1).astype(np.uint8), roi, (100, 80), dict(timings or {}), backend)


def test_compare_runs_against_hand_computed_values() -> None:
    history = RunHistory()
    reference = history.add("001", result([[[0.8, 0.2], [0.4, 0.6]]]))
    candidate = history.add("001", result([[[0.3, 0.7], [0.4, 0.6]]], backend="mindx"))
    comparison = compare_runs(reference, candidate)
    m = comparison.metrics
    # a = (.8, .2, .4, .6), b = (.3, .7, .4, .6): |a-b| = (.5, .5, 0, 0), a.b = .9, |a|^2 = 1.2, |b|^2 = 1.1
    assert m["cosine_similarity"] == pytest.approx(0.9 / math.sqrt(1.2 * 1.1))
    assert m["relative_euclidean_distance"] == pytest.approx(math.sqrt(0.5) / math.sqrt(1.2))
    assert m["max_absolute_error"] == pytest.approx(0.5)
    assert m["mean_absolute_error"] == pytest.approx(0.25)
    assert m["root_mean_square_error"] == pytest.approx(math.sqrt(0.5 / 4))
    assert m["max_relative_error"] == pytest.approx(0.5 / 0.2)
    assert m["mean_relative_error"] == pytest.approx((0.5 / 0.8 + 0.5 / 0.2) / 4)
    assert m["cumulative_relative_error"] == pytest.approx(1.0 / 2.0)
    assert m["kl_divergence"] == pytest.approx(0.4 * math.log(0.8 / 0.3) + 0.1 * math.log(0.2 / 0.7), rel=1e-5)
    assert m["std_reference"] == pytest.approx(math.sqrt(0.05))
    assert m["std_candidate"] == pytest.approx(float(np.std([0.3, 0.7, 0.4, 0.6])))
    assert comparison.argmax_disagreement == 0.5  # pixel 0: class 0 vs 1; pixel 1 agrees
    assert comparison.difference.shape == (1, 2)
    assert comparison.difference[0].tolist() == pytest.approx([0.5, 0.0])
    assert compare_runs(reference, reference).argmax_disagreement == 0.0


def test_compare_runs_gives_the_numbers_of_segscope_compare(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(2, 24, 32, 3))
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    history = RunHistory()
    a = history.add("7", result(probabilities[0], roi=Roi(0, 0, 32, 24)))
    b = history.add("7", result(probabilities[1], roi=Roi(0, 0, 32, 24)))
    np.save(tmp_path / "a.npy", a.result.probabilities)
    np.save(tmp_path / "b.npy", b.result.probabilities)
    out = io.StringIO()
    assert cli_main(["compare", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--json"], out=out) == 3
    document = json.loads(out.getvalue())
    assert document.pop("verdict").startswith("FAIL") and document == compare_runs(a, b).metrics


def test_compare_refuses_other_images_rois_and_dropped_arrays() -> None:
    history = RunHistory()
    a = history.add("001", result([[[0.8, 0.2], [0.4, 0.6]]]))
    other_image = history.add("002", result([[[0.8, 0.2], [0.4, 0.6]]]))
    other_roi = history.add("001", result([[[0.8, 0.2], [0.4, 0.6]]], roi=Roi(0, 0, 2, 1)))
    with pytest.raises(SegScopeError, match="same image and ROI"):
        compare_runs(a, other_image)
    with pytest.raises(SegScopeError, match="same image and ROI"):
        compare_runs(a, other_roi)
    a.result = None
    with pytest.raises(SegScopeError, match="dropped"):
        compare_runs(a, a)


def test_history_records_what_ran_and_keeps_arrays_within_budget() -> None:
    caps = Capabilities("embedded", "CPU", (2, 1), ("bg", "fg"), {"model": "/models/unet.onnx"})
    one_run = 4 * 4 + 2  # 1 x 2 x 2 float32 probabilities + 1 x 2 uint8 argmax
    history = RunHistory(max_result_bytes=2 * one_run)
    records = [history.add(f"{i:03}", result([[[0.8, 0.2], [0.4, 0.6]]], backend="", timings={"infer": 0.01}), caps)
               for i in range(4)]
    first = records[0]
    assert (first.id, first.image_id, first.backend, first.model, first.roi) == (1, "000", "embedded",
                                                                                   "/models/unet.onnx", ROI)
    assert first.timings == {"infer": 0.01} and abs(records[-1].time - records[0].time) < 5
    assert [r.result is not None for r in history] == [False, False, True, True]
    assert records[0].timings == {"infer": 0.01}  # timings outlive the arrays
    history.add("000", result([[[0.8, 0.2], [0.4, 0.6]]], backend="mindx"))
    assert len(history) == 5 and [r.id for r in history.for_image("000")] == [1, 5]
    assert [r.image_id for r in history.latest_per_image()] == ["000", "001", "002", "003"]
    assert [r.id for r in history.latest_per_image("embedded")] == [1, 2, 3, 4]
    assert RunHistory(max_result_bytes=1).add("x", result([[[0.8, 0.2], [0.4, 0.6]]])).result is not None


def test_timing_table_mean_p95_order_and_csv(tmp_path: Path) -> None:
    history = RunHistory()
    for i in range(5):  # infer 1..5 ms, decode 10 ms, render only on the last two, an unknown stage once
        timings = {"infer": (i + 1) / 1000, "decode": 0.010}
        if i >= 3:
            timings["render"] = 0.002
        if i == 0:
            timings["custom"] = 0.004
        history.add(f"{i}", result([[[0.8, 0.2], [0.4, 0.6]]], timings=timings))
    table = timing_table(history)
    assert [s.stage for s in table] == ["decode", "infer", "render", "custom", "total"]
    infer = table[1]
    assert infer.runs == 5 and infer.mean == pytest.approx(0.003)
    assert infer.p95 == pytest.approx(0.0048)  # rank 0.95 * 4 = 3.8: 4 ms + 0.8 * (5 - 4) ms
    assert (table[2].runs, table[2].mean) == (2, pytest.approx(0.002))
    totals = [0.010 + 0.001 + 0.004, 0.012, 0.013, 0.016, 0.017]
    assert table[-1].mean == pytest.approx(np.mean(totals)) and table[-1].runs == 5
    assert timing_table([]) == []

    timeline = history.records[3].timeline()
    assert [(s, round(start, 6), round(d, 6)) for s, start, d in timeline] == [
        ("decode", 0.0, 0.010), ("infer", 0.010, 0.004), ("render", 0.014, 0.002)]

    path = write_timing_csv(table, tmp_path / "timings.csv")
    rows = list(csv.DictReader(path.read_text().splitlines()))
    assert rows[1] == {"stage": "infer", "runs": "5", "mean_ms": "3.000", "p95_ms": "4.800"}
    assert [p.name for p in tmp_path.iterdir()] == ["timings.csv"]
    with pytest.raises(SegScopeError, match="already exists"):
        write_timing_csv(table, path)
    write_timing_csv(table[:1], path, overwrite=True)
    assert len(path.read_text().splitlines()) == 2
