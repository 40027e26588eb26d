"""What a model card is checked against: an ONNX file's inputs, outputs and the op that makes each output.

ONNX files are protobuf; this reads the few fields it needs straight from the wire format (a memory map,
large initializers skipped by length, never copied), so it needs neither the `onnx` package nor an ONNX
Runtime session: card validation stays cheap and runs wherever SegScope's core runs, the Ascend host's
worker included (which has only NumPy, OpenCV and the SDK or ONNX Runtime).
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from ..errors import SegScopeError
from ..files.fileio import open_regular
from .model_files import ELEMENT_BYTES, ExternalData, check_external_data, check_model_file

#: A tensor dimension: a size, a symbolic name (dynamic) or None (unknown).
Dim = Union[int, str, None]

#: ONNX TensorProto.DataType codes SegScope meets, by name.
ELEM_TYPES = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
              10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16"}
INTEGER_TYPES = frozenset({2, 3, 5, 6, 7, 12, 13})

#: Ops that move or retype values without changing them: looked through to find an output's real source.
_PASS_THROUGH = frozenset({"Identity", "Cast", "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten",
                           "Resize", "Upsample", "Slice"})


@dataclass(frozen=True)
class TensorInfo:
    name: str
    elem_type: int  # ONNX TensorProto.DataType (0 = unknown)
    dims: tuple[Dim, ...] | None  # None: no shape recorded

    @property
    def type_name(self) -> str:
        return ELEM_TYPES.get(self.elem_type, f"type {self.elem_type}")

    def shape_text(self) -> str:
        if self.dims is None:
            return "[?]"
        return "[" + ",".join("?" if d is None else str(d) for d in self.dims) + "]"


@dataclass(frozen=True)
class GraphInfo:
    path: Path
    inputs: tuple[TensorInfo, ...]  # graph inputs that are not initializers
    outputs: tuple[TensorInfo, ...]
    source_ops: tuple[str, ...]  # per output: the op that computes it, looking through _PASS_THROUGH ops
    external: tuple[ExternalData, ...] = ()  # initializers whose bytes lie in other files

    @property
    def external_files(self) -> tuple[str, ...]:
        """The weight files beside the model (external data), relative paths."""
        return tuple(sorted({item.location for item in self.external}))

    def final_op(self, index: int) -> str:
        return self.source_ops[index]


class _WireError(ValueError):
    pass


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _WireError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(data: memoryview) -> Iterator[tuple[int, int | memoryview]]:
    """(field number, varint value or length-delimited bytes) of one message; fixed-size fields skipped."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, value
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise _WireError("truncated field")
            yield number, data[pos:pos + length]
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise _WireError(f"unsupported wire type {wire}")


def _text(value: int | memoryview) -> str:
    return bytes(value).decode("utf-8", "replace") if isinstance(value, memoryview) else ""


def _value_info(data: memoryview) -> TensorInfo:
    name, elem_type, dims = "", 0, None
    for number, value in _fields(data):
        if number == 1:
            name = _text(value)
        elif number == 2 and isinstance(value, memoryview):  # TypeProto
            for type_number, tensor in _fields(value):
                if type_number != 1 or not isinstance(tensor, memoryview):  # TypeProto.tensor_type
                    continue
                for field, item in _fields(tensor):
                    if field == 1 and isinstance(item, int):
                        elem_type = item
                    elif field == 2 and isinstance(item, memoryview):  # TensorShapeProto
                        dims = tuple(_dim(d) for n, d in _fields(item) if n == 1 and isinstance(d, memoryview))
    return TensorInfo(name, elem_type, dims)


def _dim(data: memoryview) -> Dim:
    for number, value in _fields(data):
        if number == 1 and isinstance(value, int):
            return value if value < 1 << 63 else None
        if number == 2:
            return _text(value) or None
    return None


def _parse(data: memoryview, path: Path) -> GraphInfo:
    graph = next((v for n, v in _fields(data) if n == 7 and isinstance(v, memoryview)), None)
    if graph is None:
        raise _WireError("no graph")
    producers: dict[str, tuple[str, tuple[str, ...]]] = {}  # output name -> (op type, node inputs)
    initializers: set[str] = set()
    external: list[ExternalData] = []
    declared_inputs: list[TensorInfo] = []
    outputs: list[TensorInfo] = []
    for number, value in _fields(graph):
        if not isinstance(value, memoryview):
            continue
        if number == 1:  # NodeProto
            node_inputs, node_outputs, op = [], [], ""
            for field, item in _fields(value):
                if field == 1:
                    node_inputs.append(_text(item))
                elif field == 2:
                    node_outputs.append(_text(item))
                elif field == 4:
                    op = _text(item)
            for name in node_outputs:
                producers[name] = (op, tuple(node_inputs))
        elif number == 5:  # TensorProto initializer
            name, reference = _initializer(value)
            initializers.add(name)
            if reference is not None:
                external.append(reference)
        elif number == 11:
            declared_inputs.append(_value_info(value))
        elif number == 12:
            outputs.append(_value_info(value))

    def source(name: str) -> str:
        for _ in range(len(producers) + 1):
            op, node_inputs = producers.get(name, ("graph input", ()))
            if op not in _PASS_THROUGH or not node_inputs:
                return op
            name = node_inputs[0]
        return "graph input"

    inputs = tuple(i for i in declared_inputs if i.name not in initializers)
    return GraphInfo(path, inputs, tuple(outputs), tuple(source(o.name) for o in outputs), tuple(external))


def _initializer(data: memoryview) -> tuple[str, ExternalData | None]:
    """The name of a TensorProto initializer and, where its bytes lie in another file, where and how many."""
    name, dims, elem_type, entries = "", [], 0, {}
    for field, item in _fields(data):
        if field == 1:  # dims: int64, one by one or packed
            dims += [item] if isinstance(item, int) else list(_varints(item))
        elif field == 2 and isinstance(item, int):
            elem_type = item
        elif field == 8:
            name = _text(item)
        elif field == 13 and isinstance(item, memoryview):  # StringStringEntryProto key (1) / value (2)
            entry = {n: _text(v) for n, v in _fields(item)}
            entries[entry.get(1, "")] = entry.get(2, "")
    if not entries.get("location"):
        return name, None
    nbytes = None
    if elem_type in ELEMENT_BYTES and all(d < 1 << 40 for d in dims):
        nbytes = ELEMENT_BYTES[elem_type]
        for dim in dims:
            nbytes *= dim
    return name, ExternalData(name, entries["location"], entries.get("offset"), entries.get("length"), nbytes)


def _varints(data: memoryview) -> Iterator[int]:
    """The varints of a packed repeated field."""
    position = 0
    while position < len(data):
        value, position = _varint(data, position)
        yield value


def read_graph(path: Path) -> GraphInfo:
    """Inputs, outputs and output source ops of an ONNX file, the file and its external weights checked first
    (`core.card.model_files`); a one-line SegScopeError when unreadable."""
    path = Path(path)
    with open_regular(path, "ONNX model") as handle:
        size = check_model_file(handle, path, "ONNX model")
        try:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:  # ValueError: an empty file cannot be mapped
            raise SegScopeError(f"{path}: cannot read the ONNX model ({exc})") from None
    problem = ""
    try:
        graph = _parse(memoryview(mapped), path)
    except _WireError as exc:
        problem = str(exc)
    finally:
        try:
            mapped.close()
        except BufferError:  # a view is still referenced: the map closes when it is collected
            pass
    if problem:
        raise SegScopeError(f"{path}: not an ONNX model ({problem})")
    check_external_data(path, size, graph.external)
    return graph
