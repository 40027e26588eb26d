"""What SegScope checks of a model's files before anything loads or hashes them (ONNX Runtime, the MindX SDK,
ais_bench, a card's SHA-256): regular files, within the size a MindX model may have, written in full, and an
ONNX model's external data (its weights in other files) inside the model's folder, where its references
say and of the size the tensors need.

A file with holes (a sparse file: regions never written, as an unfinished download or copy, or `truncate`,
leaves them) reads as zeros of any length without using the disk; loaded, it costs memory and time for
nothing and gives a model that computes nonsense. Each refusal is one line naming the file and what to do.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..errors import InputError
from ..files.fileio import open_regular

#: The largest model (file and external weights together) SegScope loads: MindX's limit for an .om (4 GB).
MAX_MODEL_BYTES = 4 << 30
#: Bytes of holes a model file may have: a file system may store a few blocks of zeros as holes.
MAX_HOLE_BYTES = 1 << 20
#: Holes counted at most per file (a file of many small holes is still read in a bounded time).
MAX_HOLES = 10_000
#: Bytes per element of the ONNX TensorProto data types of fixed size.
ELEMENT_BYTES = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 14: 8, 15: 16, 16: 2}


@dataclass(frozen=True)
class ExternalData:
    """An initializer whose bytes lie in another file, as the model records it (ONNX external data)."""

    tensor: str
    location: str
    offset: str | None  # as written in the model: text
    length: str | None
    nbytes: int | None  # what the tensor's type and shape take (None: a type of no fixed size)


def hole_bytes(handle: BinaryIO, size: int) -> int:
    """Bytes of the open file that lie in holes (SEEK_HOLE/SEEK_DATA), over its first `MAX_HOLES` holes (0
    where the system or file system cannot tell: the file is then taken as written)."""
    if not hasattr(os, "SEEK_HOLE"):
        return 0
    fd, holes, position = handle.fileno(), 0, 0
    try:
        for _ in range(MAX_HOLES):
            if position >= size:
                break
            hole = os.lseek(fd, position, os.SEEK_HOLE)
            if hole >= size:
                break
            try:
                position = os.lseek(fd, hole, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
                position = size  # a hole up to the end
            holes += position - hole
    except OSError:
        return 0
    finally:
        os.lseek(fd, 0, os.SEEK_SET)
    return holes


def check_model_file(handle: BinaryIO, path: Path, what: str, model: Path | None = None, before: int = 0) -> int:
    """The size of the open model file `path`, once it is known to be written in full and to keep the model
    within `MAX_MODEL_BYTES`; for an external weight file of `model`, with the `before` bytes of its other files."""
    size = os.fstat(handle.fileno()).st_size
    if before + size > MAX_MODEL_BYTES:
        limit = f"over the {MAX_MODEL_BYTES:,} bytes a MindX model may have (mxpi_tensorinfer's modelPath limit)"
        if model is None:
            raise InputError(path, f"the {what} is {size:,} bytes, {limit}")
        raise InputError(model, f"with its {what} {path.name} ({size:,} bytes) the model and its weights are "
                                f"{before + size:,} bytes, {limit}")
    holes = hole_bytes(handle, size)
    if holes > MAX_HOLE_BYTES:
        raise InputError(path, f"the {what} is a sparse file: {holes:,} of its {size:,} bytes were never written "
                               "(an unfinished download or copy?); copy the complete file here")
    return size


def check_model_path(path: Path, what: str) -> None:
    """`check_model_file` of the file at `path` (a regular file)."""
    with open_regular(path, what) as handle:
        check_model_file(handle, path, what)


def _byte_count(text: str | None, model: Path, item: ExternalData, key: str) -> int | None:
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 20:
        raise InputError(model, f"initializer {item.tensor!r}: its external data {key} {text!r} is not a byte count; "
                                "the model is damaged: export it again")
    return int(text)


def check_external_data(model: Path, model_bytes: int, external: tuple[ExternalData, ...]) -> None:
    """Every external weight file lies inside the model's folder, is a regular file written in full, the model
    with its weights stays within `MAX_MODEL_BYTES`, and each tensor's bytes are where its reference says,
    as many as its type and shape take."""
    sizes: dict[str, int] = {}
    for item in external:
        name = item.location
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise InputError(model, f"its external weight file {name!r} is not a file beside the model")
        if name not in sizes:
            weights = model.parent / name
            with open_regular(weights, "external weight file", inside=model.parent) as handle:
                sizes[name] = check_model_file(handle, weights, "external weight file", model,
                                               model_bytes + sum(sizes.values()))
        offset = _byte_count(item.offset, model, item, "offset") or 0
        length = _byte_count(item.length, model, item, "length")
        if length is not None and item.nbytes is not None and length != item.nbytes:
            raise InputError(model, f"initializer {item.tensor!r} takes {length:,} bytes of {name} for a tensor of "
                                    f"{item.nbytes:,} bytes (its type and shape); the model is damaged: export it "
                                    "again")
        needed = length if length is not None else item.nbytes
        if needed is not None and offset + needed > sizes[name]:
            raise InputError(model, f"initializer {item.tensor!r} reads bytes {offset:,} to {offset + needed:,} of "
                                    f"{name}, which holds {sizes[name]:,}: the weights file is short or another "
                                    "model's; copy it again with the model")
