"""FLOPs and bytes of one operator from its type and tensor shapes.

FLOPs are 2 x multiply-adds for the operators that multiply-accumulate (Conv, ConvTranspose, MatMul, Gemm
and their fused forms), and a fixed count per output element for the others (table below). Bytes are the
sizes of every input and output tensor: the least traffic the operator needs, which is what a roofline
compares against the memory bandwidth. The same function serves shapes from ONNX shape inference, from
ONNX Runtime's profiler (`input_type_shape` / `output_type_shape`) and from imported Ascend profiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

#: Bytes per element of the element types ONNX Runtime's profiler and ONNX name.
DTYPE_BYTES = {
    "float": 4, "float32": 4, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8,
    "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
    "bool": 1,
}

#: FLOPs per output element of the operators that do not multiply-accumulate. Data movement (Transpose,
#: Reshape, Concat, Slice, Cast, Resize/Upsample, layout reorders...) counts 0.
PER_ELEMENT_FLOPS = {
    "Add": 1, "Sub": 1, "Mul": 1, "Div": 1, "Relu": 1, "LeakyRelu": 2, "Clip": 1, "Max": 1, "Min": 1,
    "Sigmoid": 4, "Tanh": 4, "Exp": 1, "Sqrt": 1, "Pow": 1, "Neg": 1, "Abs": 1, "Erf": 4, "Gelu": 8,
    "HardSigmoid": 3, "HardSwish": 4, "PRelu": 2, "Softmax": 3, "LogSoftmax": 4,
    "BatchNormalization": 2, "InstanceNormalization": 4, "LayerNormalization": 5,
    "ArgMax": 1, "ArgMin": 1,
}

#: Operators whose cost is 2 x (output elements) x (reduction length of the kernel).
CONV_TYPES = frozenset({"Conv", "FusedConv", "NhwcConv", "QLinearConv", "ConvInteger"})
MATMUL_TYPES = frozenset({"MatMul", "FusedMatMul", "MatMulInteger", "QLinearMatMul"})
POOL_TYPES = frozenset({"MaxPool", "AveragePool", "LpPool"})


@dataclass(frozen=True)
class Tensor:
    """A tensor as the profilers describe it: element type and shape (None where a dimension is unknown)."""

    dtype: str
    shape: tuple[int | None, ...]

    @property
    def known(self) -> bool:
        return all(isinstance(d, int) and d >= 0 for d in self.shape)

    @property
    def elements(self) -> int:
        return prod(d for d in self.shape if d is not None) if self.known else 0

    @property
    def nbytes(self) -> int:
        return self.elements * DTYPE_BYTES.get(self.dtype, 4)


def op_flops(op_type: str, inputs: Sequence[Tensor], outputs: Sequence[Tensor],
             kernel: Sequence[int] = ()) -> int:
    """FLOPs of one execution; 0 when the shapes needed are unknown. `kernel`: pooling kernel_shape."""
    if not outputs or not outputs[0].known:
        return 0
    out = outputs[0]
    if op_type in CONV_TYPES and len(inputs) >= 2 and inputs[1].known and len(inputs[1].shape) >= 3:
        weight = inputs[1].shape  # [Cout, Cin/group, k...]: the reduction is Cin/group x k...
        return 2 * out.elements * prod(weight[1:])  # type: ignore[arg-type]
    if op_type == "ConvTranspose" and len(inputs) >= 2 and inputs[0].known and inputs[1].known:
        weight = inputs[1].shape  # [Cin, Cout/group, k...]: every input element feeds Cout/group x k...
        return 2 * inputs[0].elements * prod(weight[1:])  # type: ignore[arg-type]
    if op_type in MATMUL_TYPES and inputs and inputs[0].known and inputs[0].shape:
        return 2 * out.elements * int(inputs[0].shape[-1])  # type: ignore[arg-type]
    if op_type == "Gemm" and inputs and inputs[0].known and len(out.shape) == 2 and out.shape[0]:
        reduction = inputs[0].elements // int(out.shape[0])  # A is M x K or K x M (transA)
        return 2 * out.elements * reduction + (out.elements if len(inputs) > 2 else 0)
    if op_type in POOL_TYPES:
        return out.elements * (prod(kernel) if kernel else 1)
    if op_type == "GlobalAveragePool" and inputs and inputs[0].known:
        return inputs[0].elements
    return out.elements * PER_ELEMENT_FLOPS.get(op_type, 0)


def op_bytes(inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> int:
    """Bytes read and written: every input and output tensor once."""
    return sum(t.nbytes for t in (*inputs, *outputs))
