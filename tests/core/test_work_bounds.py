"""Work is bounded before it starts: a slide's tiles and canvas, a TIFF's declared tiles, a pipeline's streams
and elements (MindX's own limits), a model's weights; what the bound refuses is one line naming the number and
the flag that raises it, and `check` stays linear in a pipeline's size."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import tifffile

from segscope.core.stream.loader import MAX_ELEMENTS, MAX_STREAMS, load_pipeline
from segscope.core.stream.pipeline import PipelineError, Stream

from helpers import run_cli


def one_line(capsys, code: int, *parts: str) -> None:
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("segscope: error: "), (code, err)
    assert all(part in err for part in parts), err


def tiled_tiff(path: Path, width: int = 256, height: int = 192) -> Path:
    image = np.random.default_rng(3).integers(0, 255, (height, width, 3), np.uint8)
    tifffile.imwrite(path, image, tile=(64, 64), photometric="rgb", compression="zlib")
    return path


def patch_tag(path: Path, tag: str, value: int) -> None:
    """Overwrite one tag's value in the file (the header a damaged or hostile writer leaves)."""
    with tifffile.TiffFile(path) as tif:
        found = tif.pages.first.tags[tag]
        offset, dtype, count = found.valueoffset, found.dtype, found.count
    data = bytearray(path.read_bytes())
    fmt = {3: "<H", 4: "<I", 16: "<Q"}[int(dtype)]
    for i in range(count):
        struct.pack_into(fmt, data, offset + i * struct.calcsize(fmt), value)
    path.write_bytes(bytes(data))


def corrupt_tile_data(path: Path) -> None:
    with tifffile.TiffFile(path) as tif:
        offset = tif.pages.first.dataoffsets[0]
    data = bytearray(path.read_bytes())
    data[offset:offset + 40] = b"\xde\xad" * 20
    path.write_bytes(bytes(data))


TIFF_FAULTS = {
    "declares 10^6 x 10^6 pixels": (lambda p: (patch_tag(p, "ImageWidth", 10**6), patch_tag(p, "ImageLength", 10**6)),
                                    "its directory lists 12 tiles where a 1000000x1000000 image"),
    "declares 2^30-pixel tiles": (lambda p: (patch_tag(p, "TileWidth", 1 << 15), patch_tag(p, "TileLength", 1 << 15)),
                                  "over 268,435,456 bytes each"),
    "tile offsets past the end": (lambda p: patch_tag(p, "TileOffsets", 10**9), "past the end of the"),
    "garbage tile data": (corrupt_tile_data, "tile 0 cannot be decoded"),
}


@pytest.mark.parametrize("fault", list(TIFF_FAULTS))
def test_a_hostile_tiled_tiff_is_one_line(tiny_model_project, tmp_path, capsys, fault):
    dataset = tmp_path / "slides"
    dataset.mkdir()
    slide = tiled_tiff(dataset / "s.tif")
    change, expected = TIFF_FAULTS[fault]
    change(slide)
    code, out = run_cli("eval", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--tile", "64")
    one_line(capsys, code, str(slide), expected)


def test_tiles_of_one_pixel_are_refused_before_any_is_read(tiny_model_project, tmp_path, capsys, write_png):
    """The issue's case: `--tile 1` on a 256x192 image made 49,152 tiles and ran 43 s at 4.7 GB."""
    write_png(tmp_path / "d" / "1" / "image.png", np.zeros((192, 256, 3), np.uint8))
    code, _ = run_cli("eval", "--dataset", tmp_path / "d", "--pipeline", tiny_model_project.pipeline, "--tile", "1",
                      "--output-scale", "1")
    one_line(capsys, code, "256x192 slide pixels in 1x1 tiles are 49,152 tiles, over the limit of 20,000",
             "--max-tiles")


def write_pipeline(path: Path, streams: dict) -> Path:
    path.write_text(json.dumps(streams))
    return path


def chain(count: int) -> dict:
    """appsrc0 -> `count` queues -> appsink0."""
    stream = {"appsrc0": {"factory": "appsrc", "next": "q0"}, "appsink0": {"factory": "appsink"}}
    for i in range(count):
        stream[f"q{i}"] = {"factory": "queue", "next": f"q{i + 1}" if i + 1 < count else "appsink0"}
    return stream


@pytest.mark.parametrize(("streams", "expected"), [
    ({"s": chain(MAX_ELEMENTS)}, f"has {MAX_ELEMENTS + 2:,} entries; MindX refuses more than {MAX_ELEMENTS:,}"),
    ({f"s{i}": chain(1) for i in range(MAX_STREAMS + 1)}, f"has {MAX_STREAMS + 1} streams; MindX refuses more"),
    ({"s": {"stream_config": {"deviceId": "01"}, **chain(1)}}, "deviceId must be a string of digits"),
    ({"s": {"stream_config": {"deviceId": "99999999999"}, **chain(1)}}, "deviceId must be a string of digits"),
    ({"s": {"stream_config": {"deviceId": "٣"}, **chain(1)}}, "deviceId must be a string of digits"),
    ({"s": {**chain(1), "r": {"factory": "mxpi_imageresize", "props": {"resizeHeight": "²"}}}},
     "resizeHeight must be an integer"),
    ({"s": {**chain(1), "m": {"factory": "mxpi_tensorinfer", "props": {"modelPath": "models/a\u0000.om"}}}},
     "prop 'modelPath' holds a NUL byte"),
], ids=["elements", "streams", "deviceId 01", "deviceId past int", "deviceId Arabic-Indic", "resize ²", "NUL"])
def test_mindx_limits_and_rules(tmp_path, streams, expected):
    path = write_pipeline(tmp_path / "p.pipeline", streams)
    with pytest.raises(PipelineError) as info:
        load_pipeline(path)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_device_ids_mindx_reads(tmp_path):
    for device in ("", "0", "7", "2147483647"):
        pipeline = load_pipeline(write_pipeline(tmp_path / "p.pipeline",
                                                {"s": {"stream_config": {"deviceId": device}, **chain(1)}}))
        assert pipeline.stream.config["deviceId"] == device


def test_check_is_linear_in_the_streams_size(tmp_path, monkeypatch, capsys):
    """16,000 queue elements (four streams of 4,000): reachability is computed a fixed number of times, not once
    per element (which took check from 1 s at 1,000 elements to minutes at 16,000)."""
    path = write_pipeline(tmp_path / "q.pipeline", {f"s{i}": chain(4000) for i in range(4)})
    calls = {"downstream": 0, "upstream": 0}
    for name in calls:
        real = getattr(Stream, name)

        def counted(self, start, real=real, name=name):
            calls[name] += 1
            return real(self, start)

        monkeypatch.setattr(Stream, name, counted)
    code, out = run_cli("check", path)
    assert code == 0 and "valid for MindX" in out, capsys.readouterr().err
    assert sum(calls.values()) < 50, calls


def test_a_sparse_5_gib_weight_file_is_refused_before_loading(tmp_path, capsys, byo):
    onnx = pytest.importorskip("onnx")
    model = onnx.load(str(byo.Net(size=64).save(tmp_path / "m.onnx")))
    onnx.save(model, str(tmp_path / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.bin", size_threshold=0)
    with open(tmp_path / "m.bin", "r+b") as f:
        f.truncate(5 << 30)  # sparse: no disk used
    code, _ = run_cli("card", tmp_path / "m.onnx", "--out", tmp_path / "p", "--scale", "1/255")
    one_line(capsys, code, "m.onnx", "over the 4,294,967,296 bytes a MindX model may have")
