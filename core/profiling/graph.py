"""The ONNX graph's operators with their tensor shapes (ONNX shape inference), FLOPs and bytes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import SegScopeError
from .costs import Tensor, op_bytes, op_flops


@dataclass(frozen=True)
class GraphNode:
    name: str  # the node's name, or "<OpType>_<index>" for an unnamed node
    type: str
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    flops: int
    bytes: int
    input_names: tuple[str, ...] = ()
    output_names: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether shape inference knew every tensor (else a profiler's recorded shapes are better)."""
        return all(t.known for t in (*self.inputs, *self.outputs))


def _tensor(value_info: object) -> Tensor:
    from onnx import TensorProto, helper

    tensor_type = value_info.type.tensor_type  # type: ignore[attr-defined]
    dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim)
    try:
        dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type).name
    except (KeyError, ValueError):
        dtype = TensorProto.DataType.Name(tensor_type.elem_type).lower()
    return Tensor(dtype, dims)


def graph_nodes(model_path: Path) -> list[GraphNode]:
    """Every node of the model's main graph in file order, costed from the inferred shapes."""
    import onnx
    from onnx import numpy_helper

    try:
        model = onnx.load(str(model_path))
        inferred = onnx.shape_inference.infer_shapes(model)
    except FileNotFoundError:
        raise SegScopeError(f"{model_path}: ONNX model not found") from None
    except Exception as exc:  # onnx raises DecodeError, ValidationError, InferenceError...
        raise SegScopeError(f"{model_path}: ONNX shape inference failed ({exc}); check the file with "
                            "python -m onnx.checker or re-export it") from None
    graph = inferred.graph
    known: dict[str, Tensor] = {}
    for value in (*graph.input, *graph.value_info, *graph.output):
        known[value.name] = _tensor(value)
    for init in graph.initializer:
        known[init.name] = Tensor(numpy_helper.to_array(init).dtype.name, tuple(init.dims))
    nodes = []
    for index, node in enumerate(graph.node):
        inputs = tuple(known.get(n, Tensor("float", (None,))) for n in node.input if n)
        outputs = tuple(known.get(n, Tensor("float", (None,))) for n in node.output if n)
        kernel = next((tuple(a.ints) for a in node.attribute if a.name == "kernel_shape"), ())
        nodes.append(GraphNode(node.name or f"{node.op_type}_{index}", node.op_type, inputs, outputs,
                               op_flops(node.op_type, inputs, outputs, kernel), op_bytes(inputs, outputs),
                               tuple(node.input), tuple(node.output)))
    return nodes


#: What ONNX Runtime folds into the convolution before it (Conv+BN at basic level, activations later).
FOLDED_INTO_CONV = frozenset({"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh", "BatchNormalization"})


def replaced_nodes(nodes: list[GraphNode], tensor: str) -> list[GraphNode]:
    """The graph nodes a fused kernel producing `tensor` replaced, in graph order ([] when none produces it).

    ONNX Runtime names a fused NCHWc kernel after its output tensor (`<tensor>_nchwc`); walking up from that
    tensor's producer through activations and BatchNorm to the convolution gives the nodes it replaced.
    """
    producer = {name: n for n in nodes for name in n.output_names}
    node = producer.get(tensor)
    chain = []
    while node is not None:
        chain.append(node)
        if node.type not in FOLDED_INTO_CONV or not node.input_names:
            break
        node = producer.get(node.input_names[0])
    return chain[::-1]


def chain_costs(chain: list[GraphNode]) -> tuple[int, int] | None:
    """(FLOPs, bytes) of nodes run as one kernel: FLOPs add up, bytes are the first node's inputs plus the
    last node's output. None when shape inference left a shape unknown."""
    if not chain or not all(n.complete for n in chain):
        return None
    return sum(n.flops for n in chain), op_bytes(chain[0].inputs, chain[-1].outputs[:1])
