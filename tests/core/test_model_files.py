"""A model's files are checked before anything loads them: `segscope eval` on a model whose weights are a sparse
file (under or over MindX's 4 GB), whose external-data reference asks for 5 GiB or for bytes past the end of its
file, or that ONNX Runtime refuses, ends in one line (exit 2) naming the file, with none of ONNX Runtime's own
log, quickly and without growing (its peak memory measured for that process alone)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from segscope.core.card.model_files import MAX_HOLE_BYTES, check_model_path, hole_bytes
from segscope.core.errors import InputError

#: Peak memory a refused run may reach: importing SegScope and its libraries takes ~120 MB.
PEAK_BYTES = 600 << 20


def externalise(model_path: Path) -> Path:
    """Move the model's weights to `weights.bin` beside it (ONNX external data); the weights file's path."""
    model = onnx.load(str(model_path))
    onnx.save(model, str(model_path), save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.bin", size_threshold=0)
    return model_path.parent / "weights.bin"


def set_reference(model_path: Path, tensor: str, **entries: int) -> None:
    """Rewrite `tensor`'s external-data entries (offset, length) in the model file, its weights left as they are."""
    model = onnx.load(str(model_path), load_external_data=False)
    initializer = next(i for i in model.graph.initializer if i.name == tensor)
    for entry in initializer.external_data:
        if entry.key in entries:
            entry.value = str(entries.pop(entry.key))
    for key, value in entries.items():
        added = initializer.external_data.add()
        added.key, added.value = key, str(value)
    model_path.write_bytes(model.SerializeToString())


#: Runs `segscope ARGS...` and, at its exit, writes its peak resident memory (VmHWM, kB: this process's own,
#: not its parent's as `wait4`'s ru_maxrss may report after a fork) to the file named first.
MEASURED = """import atexit, runpy, sys
out = sys.argv.pop(1)

def peak():
    with open("/proc/self/status") as status, open(out, "w") as f:
        f.write(status.read().split("VmHWM:")[1].split()[0])

atexit.register(peak)
sys.argv[0] = "segscope"
runpy.run_module("segscope.core.cli", run_name="__main__")
"""


def run_eval(small_dataset: Path, pipeline: Path) -> tuple[int, str, int]:
    """(exit code, stderr, peak resident bytes) of `segscope eval` in a process of its own."""
    peak = small_dataset.parent / "peak.txt"
    done = subprocess.run([sys.executable, "-c", MEASURED, str(peak), "eval", "--dataset", str(small_dataset),
                           "--pipeline", str(pipeline)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=300, check=False)
    return done.returncode, done.stderr, int(peak.read_text()) * 1024


def refused(code: int, err: str, peak: int, *parts: str) -> None:
    assert code == 2 and err.count("\n") == 1 and err.startswith("segscope: error: "), (code, err)
    assert "\x1b[" not in err and "onnxruntime_src" not in err  # nothing of ONNX Runtime's own log
    assert all(part in err for part in parts), err
    assert peak < PEAK_BYTES, peak


def sparse_supported(folder: Path) -> bool:
    """Whether files in `folder` can have holes: a file only truncated to 8 MiB takes no disk there."""
    probe = folder / "probe"
    with probe.open("wb") as f:
        f.truncate(8 << 20)
    blocks = probe.stat().st_blocks
    probe.unlink()
    return blocks == 0


def test_sparse_weights_under_the_limit_are_refused(tiny_model_project, small_dataset: Path) -> None:
    weights = externalise(tiny_model_project.onnx)
    if not sparse_supported(weights.parent):
        pytest.skip("this file system does not report holes")
    with weights.open("r+b") as f:
        f.truncate(3 << 30)  # 3 GiB: the tensors' bytes come first, the rest is a hole
    code, err, peak = run_eval(small_dataset, tiny_model_project.pipeline)
    refused(code, err, peak, f"{weights}: the external weight file is a sparse file:",
            f"of its {3 << 30:,} bytes were never written")


def test_sparse_weights_over_the_limit_are_refused(tiny_model_project, small_dataset: Path) -> None:
    weights = externalise(tiny_model_project.onnx)
    with weights.open("r+b") as f:
        f.truncate(5 << 30)
    code, err, peak = run_eval(small_dataset, tiny_model_project.pipeline)
    total = tiny_model_project.onnx.stat().st_size + (5 << 30)
    refused(code, err, peak, f"{tiny_model_project.onnx}: with its external weight file weights.bin "
                             f"({5 << 30:,} bytes) the model and its weights are {total:,} bytes, over the "
                             "4,294,967,296 bytes a MindX model may have")


def test_a_5_gib_reference_is_refused(tiny_model_project, small_dataset: Path) -> None:
    externalise(tiny_model_project.onnx)
    set_reference(tiny_model_project.onnx, "W", length=5 << 30)  # W is 2 x 3 x 1 x 1 float32: 24 bytes
    code, err, peak = run_eval(small_dataset, tiny_model_project.pipeline)
    refused(code, err, peak, f"{tiny_model_project.onnx}: initializer 'W' takes 5,368,709,120 bytes of weights.bin "
                             "for a tensor of 24 bytes")


def test_a_reference_past_the_end_of_its_file_is_refused(tiny_model_project, small_dataset: Path) -> None:
    weights = externalise(tiny_model_project.onnx)
    size = weights.stat().st_size
    set_reference(tiny_model_project.onnx, "W", offset=size - 8, length=24)
    code, err, peak = run_eval(small_dataset, tiny_model_project.pipeline)
    refused(code, err, peak, f"initializer 'W' reads bytes {size - 8:,} to {size + 16:,} of weights.bin, which "
                             f"holds {size:,}")


def test_a_sparse_model_file_is_refused(tiny_model_project, small_dataset: Path) -> None:
    if not sparse_supported(tiny_model_project.root):
        pytest.skip("this file system does not report holes")
    with tiny_model_project.onnx.open("r+b") as f:
        f.truncate(256 << 20)  # zeros after the graph read as empty fields: only the holes tell
    code, err, peak = run_eval(small_dataset, tiny_model_project.pipeline)
    refused(code, err, peak, f"{tiny_model_project.onnx}: the ONNX model is a sparse file")


def test_a_model_onnx_runtime_refuses_is_one_line_without_its_log(tiny_model_project, small_dataset: Path) -> None:
    model = onnx.load(str(tiny_model_project.onnx))
    model.graph.node[0].op_type = "NoSuchOperator"
    tiny_model_project.onnx.write_bytes(model.SerializeToString())
    code, err, peak = run_eval(small_dataset, tiny_model_project.pipeline)
    refused(code, err, peak, f"{tiny_model_project.onnx}: ONNX Runtime cannot load the model", "NoSuchOperator")


def test_holes_are_counted_where_they_are(tmp_path: Path) -> None:
    path = tmp_path / "m.bin"
    with path.open("wb") as f:  # data, a 4 MiB hole, data, a 2 MiB hole up to the end
        f.write(b"\1" * 4096)
        f.seek(4096 + (4 << 20))
        f.write(b"\2" * 4096)
        f.truncate(8192 + (6 << 20))
    if not sparse_supported(tmp_path):
        pytest.skip("this file system does not report holes")
    with path.open("rb") as f:
        assert hole_bytes(f, path.stat().st_size) == 6 << 20
    with pytest.raises(InputError, match=f"{path}: the x is a sparse file: {6 << 20:,} of its"):
        check_model_path(path, "x")
    small = tmp_path / "small.bin"
    with small.open("wb") as f:  # a hole below the tolerance (a file system may keep zeros as holes)
        f.write(b"\1" * 4096)
        f.truncate(4096 + MAX_HOLE_BYTES)
    check_model_path(small, "x")
