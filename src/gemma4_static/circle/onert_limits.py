"""onert's limits (onert 0.1.0) found in a Circle graph, and worked around in the graph's file with
its own operators left as they are: each limit is a pattern of operators onert refuses at load or
prepare, or runs to a wrong result, located by cutting graphs to the one operator:

- ``FULLY_CONNECTED keep_num_dims``: onert ignores the option; a rank-3 output comes back rank 2 (the
  next elementwise operator refuses it at prepare: ShapeValidator; as a graph output, the wrong
  rank). Worked around: the operator writes rank 2, a ``RESHAPE`` restores the rank.
- ``rank-2 RMS_NORM``: onert takes rank 3 and 4 (ShapeValidator at prepare). Worked around: a
  ``RESHAPE`` to ``(1, N, D)`` before it and one back after it.
- ``BATCH_MATMUL constant left input``: refused at load (OperationValidator). Worked around in the
  conversion, by TICO's own option ``convert_single_batch_lhs_const_bmm_to_fc`` (a
  ``FULLY_CONNECTED``, whose ``keep_num_dims`` is then the first limit's).
- ``output read by an operator``: a graph output that another operator also reads comes back with
  wrong values (a decode layer's K/V of TICO's, also concatenated with the cache; a two-operator
  graph of the same shape comes back right, so the pattern is necessary, not sufficient). Worked
  around: the producer writes an inner tensor, which the other operators read, and a ``RESHAPE``
  to the same shape copies it to the output.

Read and written with TICO's own Circle model I/O (``tico.circle.io``)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

FC_KEEP_DIMS = "FULLY_CONNECTED keep_num_dims"
RANK2_RMS_NORM = "rank-2 RMS_NORM"
CONST_LHS_BMM = "BATCH_MATMUL constant left input"
READ_OUTPUT = "output read by an operator"
LIMITS = (FC_KEEP_DIMS, RANK2_RMS_NORM, CONST_LHS_BMM, READ_OUTPUT)
CONVERSION_OPTIONS = {CONST_LHS_BMM: {"convert_single_batch_lhs_const_bmm_to_fc": True}}  # TICO's CompileConfigV1


@dataclass(frozen=True)
class Found:
    """A limit (:data:`LIMITS`) at operator ``index`` (``operator``: its Circle name) of a graph."""

    limit: str
    index: int
    operator: str

    def __str__(self) -> str:
        return f"{self.limit} (operator {self.index}, {self.operator})"


def found_limits(buffer: bytes) -> list[Found]:
    """Where the Circle graph in ``buffer`` has one of onert's limits, in operator order."""
    from tico.circle.io import model_from_bytes

    model = model_from_bytes(buffer)
    graph = model.subgraphs[0]
    found = []
    outputs = set(graph.outputs.tolist())
    for index, operator in enumerate(graph.operators):
        name = _opcode_name(model, operator)
        shapes = [list(graph.tensors[tensor].shape) for tensor in operator.inputs if tensor >= 0]
        if name == "FULLY_CONNECTED" and operator.builtinOptions.keepNumDims and len(shapes[0]) > 2:
            found.append(Found(FC_KEEP_DIMS, index, name))
        if name == "RMS_NORM" and len(shapes[0]) == 2:
            found.append(Found(RANK2_RMS_NORM, index, name))
        if name == "BATCH_MATMUL" and _constant(model, graph.tensors[operator.inputs[0]]):
            found.append(Found(CONST_LHS_BMM, index, name))
        if outputs & set(operator.inputs.tolist()):
            found.append(Found(READ_OUTPUT, index, name))
    return found


def worked_around(buffer: bytes) -> bytes:
    """The graph in ``buffer`` with every limit found in its file worked around (the constant left
    input of a ``BATCH_MATMUL`` is the conversion's: :data:`CONVERSION_OPTIONS`)."""
    from tico.circle.io import model_from_bytes, model_to_bytes

    model = model_from_bytes(buffer)
    graph = model.subgraphs[0]
    operators = []
    for operator in graph.operators:
        name = _opcode_name(model, operator)
        if name == "FULLY_CONNECTED" and operator.builtinOptions.keepNumDims:
            output = graph.tensors[operator.outputs[0]]
            if len(output.shape) > 2:
                operator.builtinOptions.keepNumDims = False
                rows = _new_tensor(graph, output, [int(np.prod(output.shape[:-1])), int(output.shape[-1])], "rows")
                operators += [operator, _reshape(model, graph, rows, operator.outputs[0])]
                operator.outputs[0] = rows
                continue
        if name == "RMS_NORM" and len(graph.tensors[operator.inputs[0]].shape) == 2:
            source, target = graph.tensors[operator.inputs[0]], graph.tensors[operator.outputs[0]]
            ranked_in = _new_tensor(graph, source, [1, *source.shape], "rank3")
            ranked_out = _new_tensor(graph, target, [1, *target.shape], "rank3")
            operators += [_reshape(model, graph, operator.inputs[0], ranked_in), operator]
            operators.append(_reshape(model, graph, ranked_out, operator.outputs[0]))
            operator.inputs[0], operator.outputs[0] = ranked_in, ranked_out
            continue
        operators.append(operator)
    graph.operators = operators
    _copy_read_outputs(model, graph)
    return model_to_bytes(model)


def _copy_read_outputs(model: Any, graph: Any) -> None:
    """Each graph output another operator reads: written by its producer as an inner tensor, copied to
    the output by a same-shape ``RESHAPE`` (after every operator)."""
    read = {tensor for operator in graph.operators for tensor in operator.inputs.tolist()}
    for tensor in graph.outputs.tolist():
        if tensor not in read:
            continue
        inner = _new_tensor(graph, graph.tensors[tensor], list(graph.tensors[tensor].shape), "inner")
        for operator in graph.operators:
            operator.inputs[operator.inputs == tensor] = inner
            operator.outputs[operator.outputs == tensor] = inner
        graph.operators.append(_reshape(model, graph, inner, tensor))


def _opcode_name(model: Any, operator: Any) -> str:
    return _builtin_names()[model.operatorCodes[operator.opcodeIndex].builtinCode]


@functools.cache
def _builtin_names() -> dict[int, str]:
    """Circle's builtin operator codes -> names, read once from the schema."""
    from circle_schema import circle

    operators = vars(circle.BuiltinOperator.BuiltinOperator).items()
    return {value: name for name, value in operators if not name.startswith("_")}


def _constant(model: Any, tensor: Any) -> bool:
    data = model.buffers[tensor.buffer].data if tensor.buffer else None
    return data is not None and len(data) > 0


def _new_tensor(graph: Any, like: Any, shape: list[int], suffix: str) -> int:
    """A new activation tensor of ``like``'s type with ``shape``; its index."""
    from circle_schema import circle

    tensor = circle.Tensor.TensorT()
    tensor.shape, tensor.type, tensor.buffer = np.array(shape, dtype=np.int32), like.type, 0
    tensor.name = (like.name or b"") + f"::onert_{suffix}".encode()
    graph.tensors.append(tensor)
    return len(graph.tensors) - 1


def _reshape(model: Any, graph: Any, source: int, target: int) -> Any:
    """A ``RESHAPE`` of tensor ``source`` into ``target``'s shape (a constant int32 shape input)."""
    from circle_schema import circle
    from tico.serialize.operators.utils import create_builtin_opcode

    shape = [int(size) for size in graph.tensors[target].shape]
    buffer = circle.Buffer.BufferT()
    buffer.data = np.array(shape, dtype=np.int32).view(np.uint8)
    model.buffers.append(buffer)
    constant = circle.Tensor.TensorT()
    constant.shape, constant.type = np.array([len(shape)], dtype=np.int32), circle.TensorType.TensorType.INT32
    constant.buffer, constant.name = len(model.buffers) - 1, graph.tensors[target].name + b"::onert_shape"
    graph.tensors.append(constant)
    reshape = circle.BuiltinOperator.BuiltinOperator.RESHAPE
    codes = [code.builtinCode for code in model.operatorCodes]
    if reshape not in codes:
        model.operatorCodes.append(create_builtin_opcode(reshape))
        codes.append(reshape)
    operator = circle.Operator.OperatorT()
    operator.opcodeIndex = codes.index(reshape)
    operator.inputs = np.array([source, len(graph.tensors) - 1], dtype=np.int32)
    operator.outputs = np.array([target], dtype=np.int32)
    operator.builtinOptionsType = circle.BuiltinOptions.BuiltinOptions.ReshapeOptions
    operator.builtinOptions = circle.ReshapeOptions.ReshapeOptionsT()
    operator.builtinOptions.newShape = np.array(shape, dtype=np.int32)
    return operator
