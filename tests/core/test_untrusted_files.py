"""Every file SegScope reads from outside goes through one reader (core.files.fileio, core.files.untrusted_json): each
hostile variant of each kind of file is one line on stderr and exit 2, naming the file, never a hang, a
traceback or a page of output.

The table crosses the readers (a model card, a pipeline, an AIPP config, the ROI sidecar, a Chrome-trace
profile, an msprof CSV, a msit compare CSV, a tensor) with the faults that apply to each.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from segscope.core import cli
from segscope.core.errors import SegScopeError, one_line
from segscope.core.files.fileio import read_bytes, read_csv
from segscope.core.files.untrusted_json import json_depth, parse_json

from helpers import without_cache_note

CHROME_TRACE = {"traceEvents": [{"ph": "X", "name": "conv", "ts": 0, "dur": 10, "pid": 1, "tid": 1, "args": {}}]}
OP_SUMMARY = "Op Name,OP Type,Task Duration(us)\nconv,Conv2D,10\n"
DRIFT = "Index,OpType,NPUDump,GroundTruth,CosineSimilarity\n0,Conv,conv,Conv_1,0.999\n"


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def oversized(limit: int) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        with open(path, "r+b") as f:
            f.truncate(limit + 1)  # sparse: no disk used, refused by its size before a byte is read
    return make


def replace_text(old: str, new: str) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        text = path.read_text(encoding="utf-8")
        assert old in text, (old, text[:200])
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return make


def prepend(data: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(data + path.read_bytes())


DEEP = "[" * 100_000 + "]" * 100_000
HUGE_CELL = "x" * 200_000

#: fault -> (make it, what the one line says)
COMMON = {
    "FIFO": (fifo, "named pipe (FIFO)"),
    "folder": (folder, "is a folder"),
}
TEXT = {**COMMON, "not UTF-8": (prepend(b"\xff\xfe"), "not UTF-8")}
JSON_VALUE = '"name": "tiny test model"'  # a card field every JSON table below replaces
JSON_FAULTS = {
    "100k-deep nesting": (lambda key: replace_text(key, f'"deep": {DEEP}, {key}'), "levels deep, over the limit"),
    "5000-digit integer": (lambda key: replace_text(key, f'"big": {"9" * 5000}, {key}'), "5,000 digits"),
    "Infinity": (lambda key: replace_text(key, f'"x": Infinity, {key}'), "Infinity is not a JSON number"),
    "NaN": (lambda key: replace_text(key, f'"x": [NaN], {key}'), "NaN is not a JSON number"),
    "1e999": (lambda key: replace_text(key, f'"x": 1e999, {key}'), "1e999 is out of range"),
    "truncated": (lambda key: lambda p: p.write_bytes(p.read_bytes()[:-3]), "invalid JSON"),
}


def _case(reader: str, fault: str, make: Callable[[Path], None], expected: str) -> object:
    return pytest.param(reader, make, expected, id=f"{reader}: {fault}")


def cases() -> list[object]:
    found = []
    for name, (make, expected) in TEXT.items():
        for reader in ("card", "pipeline", "aipp", "sidecar", "trace", "op_summary", "drift"):
            if reader in ("op_summary", "drift") and name == "not UTF-8":
                continue  # CSVs are read with bad bytes replaced: tools write local encodings into names
            found.append(_case(reader, name, make, expected))
    found.append(_case("tensor", "FIFO", fifo, "named pipe (FIFO)"))
    found.append(_case("tensor", "folder", folder, "is a folder"))
    for reader, key in (("card", '"name": "tiny test model"'), ("pipeline", '"stream_config"'),
                        ("sidecar", '"version": 1'), ("trace", '"traceEvents"')):
        for name, (make, expected) in JSON_FAULTS.items():
            found.append(_case(reader, name, make(key), expected))
    for reader, limit in (("card", 1 << 20), ("pipeline", 10 * 1024 * 1024 - 1), ("aipp", 1 << 20),
                          ("trace", 512 << 20)):
        found.append(_case(reader, "over its size limit", oversized(limit), "over the limit"))
    for reader in ("op_summary", "drift"):
        found.append(_case(reader, "200k-character cell", lambda p: p.write_text(p.read_text() + f'"{HUGE_CELL}"\n'),
                           "not a CSV row"))
    found.append(_case("pipeline", "UTF-8 byte-order mark", prepend(b"\xef\xbb\xbf"), ""))  # accepted, as MindX does
    return found


@pytest.fixture
def files(tiny_model_project, small_dataset, tmp_path) -> dict[str, tuple[Path, list[str]]]:
    """reader -> (the file to damage, the command that reads it)."""
    sidecar = small_dataset / "segscope.json"
    sidecar.write_text(json.dumps({"version": 1, "rois": {}}), encoding="utf-8")
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(CHROME_TRACE))
    (tmp_path / "op_summary_0_1.csv").write_text(OP_SUMMARY)
    (tmp_path / "result_1.csv").write_text(DRIFT)
    for name in ("a.npy", "b.npy"):
        np.save(tmp_path / name, np.ones(3, np.float32))
    evaluate = ["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline)]
    return {
        "card": (tiny_model_project.card, evaluate),
        "pipeline": (tiny_model_project.pipeline, evaluate),
        "aipp": (tiny_model_project.root / "models" / "aipp_unet_simple_opencv.cfg", evaluate),
        "sidecar": (sidecar, evaluate),
        "trace": (trace, ["profile", "--import", str(trace)]),
        "op_summary": (tmp_path / "op_summary_0_1.csv", ["profile", "--import", str(tmp_path / "op_summary_0_1.csv")]),
        "drift": (tmp_path / "result_1.csv", ["drift", str(tmp_path / "result_1.csv")]),
        "tensor": (tmp_path / "b.npy", ["compare", str(tmp_path / "a.npy"), str(tmp_path / "b.npy")]),
    }


@pytest.mark.parametrize(("reader", "make", "expected"), cases())
def test_each_hostile_file_is_one_line_naming_it(files, capsys, reader, make, expected):
    path, argv = files[reader]
    make(path)
    out = io.StringIO()
    code = cli.main(argv, out)
    err = without_cache_note(capsys.readouterr().err)
    if not expected:  # a variant MindX accepts: the run is the plain one
        assert code == 0 and err == "", err
        return
    assert code == 2, (code, err)
    assert err.count("\n") == 1 and err.startswith("segscope: error: "), err
    assert str(path) in err and expected in err, err
    assert len(err) < 1000 and out.getvalue() == ""


def test_the_depth_measure_skips_brackets_in_strings_and_escapes():
    assert json_depth('{"a": "[[[", "b": ["\\\\", ["\\"]]"]]}') == 3
    assert json_depth("") == 0 and json_depth('"[["') == 0
    assert parse_json('\ufeff{"x": [1, 2.5, -3e2]}', "s") == {"x": [1, 2.5, -300.0]}
    value = json.loads("[" * 64 + "]" * 64)
    assert parse_json(json.dumps(value), "s") == value  # the limit itself is accepted


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links")
def test_the_symbolic_link_policy(tmp_path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"secret")
    inside = tmp_path / "models"
    inside.mkdir()
    (inside / "weights.bin").symlink_to(outside)
    assert read_bytes(inside / "weights.bin") == b"secret"  # a path the user typed: followed
    with pytest.raises(SegScopeError, match="is a symbolic link"):
        read_bytes(inside / "weights.bin", follow_symlinks=False)  # a folder SegScope writes: refused
    with pytest.raises(SegScopeError, match="lies outside"):
        read_bytes(inside / "weights.bin", inside=inside)  # a file another file names: must stay inside


def test_csv_rows_keep_their_line_numbers(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('a,b\n1,"two\nlines"\n\n3,4\n')
    assert read_csv(path) == [(1, ["a", "b"]), (2, ["1", "two\nlines"]), (4, []), (5, ["3", "4"])]


def test_messages_stay_one_readable_line():
    message = one_line("card: input.color: got '" + "x" * 1_000_000 + "'\nand a second line\x00")
    assert "\n" not in message and "\x00" not in message and len(message) < 400
    assert "1,000,002 characters" in message and message.endswith("and a second line")
    assert str(SegScopeError("a\nb")) == "a b"
