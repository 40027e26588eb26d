"""`eval` at dataset scale keeps nothing per image but compact values (the summary's: test_metric_catalogue): the
`--json` document and the export's metric tables go out row by row, each text byte for byte what the whole document
written at once is. Expected values are by hand or from `json.dumps` /
`csv` over the whole rows (what the command wrote before it streamed)."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import threading
import time

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from segscope.core import cli
from segscope.core.dataset.dataset import Dataset
from segscope.core.export.files import ExportFolder
from segscope.core.metrics import catalogue
from segscope.core.metrics.document import StreamedDocument
from segscope.core.metrics.numbers import json_safe

from helpers import run_cli

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                 max_size=3), max_leaves=12)


@given(rows=st.lists(_json, max_size=4), rest=st.dictionaries(st.text(min_size=1, max_size=5), _json, max_size=3))
def test_a_streamed_document_is_the_whole_document_dumped(rows, rest):
    rest.pop("images", None)
    out = io.StringIO()
    document = StreamedDocument(out.write, "images")
    for row in rows:
        document.add(row)
    document.close(rest)
    assert out.getvalue() == json.dumps(json_safe({"images": rows, **rest}), indent=2, allow_nan=False)


def test_metric_tables_written_row_by_row_are_the_tables_of_all_rows(tmp_path):
    rows = [{"id": "a", "image": "a.png", "dice": [0.5, None], "hd95": math.inf, "note": "x,\n\"y\""},
            {"id": "b", "image": "b.png", "dice": [1.0, 0.25, 0.125], "time_read_ms": 1.5},
            {"id": "c", "image": "c.png", "roi_note": "only the last row has it", "hd95": -math.inf}]
    summary = {"soft_dice": 0.5, "aggregates": {"hd95": {"mean": math.nan}}}
    with ExportFolder(tmp_path / "out") as folder:
        with folder.metrics_table() as table:
            for row in rows:
                table.add(row)
            table.finish(summary)
    flat = [catalogue.csv_row(row) for row in rows]
    expected = io.StringIO()
    writer = csv.DictWriter(expected, fieldnames=["id", "image", "dice_0", "dice_1", "hd95", "note", "dice_2",
                                                  "time_read_ms", "roi_note"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat)
    assert (tmp_path / "out" / "metrics.csv").read_bytes() == expected.getvalue().encode()
    whole = {"images": rows, "summary": summary, **catalogue.catalogue_document()}
    assert (tmp_path / "out" / "metrics.json").read_text() == json.dumps(json_safe(whole), indent=2,
                                                                         allow_nan=False) + "\n"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["metrics.csv", "metrics.json"]  # no spool left


def test_an_export_that_says_none_of_its_files_keeps_none(tmp_path):
    with ExportFolder(tmp_path / "out", record_written=False) as folder:
        folder.write_metrics([{"id": "a"}], {})
    assert folder.written == [] and (tmp_path / "out" / "metrics.csv").is_file()


def test_eval_json_goes_out_row_by_row_as_the_whole_document_did(tiny_model_project, small_dataset):
    writes: list[str] = []

    class Recorder(io.StringIO):
        def write(self, text: str) -> int:
            writes.append(text)
            return super().write(text)

    out = Recorder()
    assert cli.main(["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline),
                     "--json"], out) == 0
    text = out.getvalue()
    document = json.loads(text)
    assert text == json.dumps(document, indent=2) + "\n"  # the layout of the document dumped whole
    ids = ["1", "2", "3", "10"]
    assert [row["id"] for row in document["images"]] == ids
    assert writes[0].startswith('{\n  "images": [\n') and all(w.startswith(",\n") for w in writes[1:len(ids)])
    for write, item in zip(writes, ids):  # each row its own write, in order, before the summary
        assert json.loads(write.removeprefix('{\n  "images": [\n').removeprefix(",\n"))["id"] == item
    assert "summary" in writes[len(ids)] and document["summary"]["images_with_masks"] == 3


def test_a_run_that_fails_mid_way_leaves_the_rows_so_far_and_says_why(tiny_model_project, small_dataset, capsys):
    """With --json the rows go out as they come: an image that cannot be read stops the run after the ones before
    it (exit 2, one error line), as the lines do."""
    image = small_dataset / "2" / "image.png"
    data = image.read_bytes()
    image.write_bytes(data[: len(data) // 2])  # the header whole, the pixels cut short
    code, out = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--json")
    assert code == 2
    assert out.startswith('{\n  "images": [\n    {\n      "id": "1",') and '"id": "2"' not in out
    assert capsys.readouterr().err.count("segscope: error: ") == 1


def test_truths_are_checked_a_few_ahead_not_all_submitted_at_once(tmp_path, write_png):
    from segscope.core.dataset.preflight import prepare_truths

    workers = os.cpu_count() or 1
    images = 4 * workers + 8
    for n in range(images):
        write_png(tmp_path / f"{n}" / "image.png", np.zeros((4, 4, 3), np.uint8))
        write_png(tmp_path / f"{n}" / "mask.png", np.zeros((4, 4), np.uint8))
    dataset = Dataset.open(tmp_path)
    asked, seen, lock = [], [], threading.Lock()
    truth = dataset.truth

    def counted(item):
        with lock:
            asked.append(item.id)
        return truth(item)

    def counts(found):
        if found.path.parent.name == "0":
            time.sleep(0.2)  # the first check is slow: the others wait behind it, a few at most
            with lock:
                seen.append(len(asked))
        return np.bincount(np.zeros(16, np.int64), minlength=256)

    dataset.truth = counted  # type: ignore[method-assign]
    prepare_truths(dataset, ("background", "defect"), counts=counts)
    assert len(asked) == images and seen == [2 * workers + 1]  # those in flight when the first check ended
