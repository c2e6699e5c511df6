#!/usr/bin/python3
"""Writes pow_exponent_1_5.onnx: a model regatta imports and evaluates but whose affine forms are refused
(graph_affine_unsupported: Pow with exponent 1.5), for the bad-input tests of `regatta certify --model M.onnx`
(tests/cli/CMakeLists.txt).

    /usr/bin/python3 tests/data/onnx/make_affine_unsupported.py     (Debian's python3-onnx, python3-numpy)

x [1, 4] -> Pow(x, 1.5) -> MatMul W [4, 3] -> logits [1, 3].
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))

w = numpy_helper.from_array(np.arange(12, dtype=np.float64).reshape(4, 3) / 8 - 0.5, "W")
e = numpy_helper.from_array(np.array(1.5, dtype=np.float64), "e")
graph = helper.make_graph(
    [helper.make_node("Pow", ["x", "e"], ["p"], name="pow_1_5"), helper.make_node("MatMul", ["p", "W"], ["y"], name="mm")],
    "pow_exponent_1_5",
    [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1, 4])],
    [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [1, 3])],
    [w, e])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="regatta-tests")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, os.path.join(HERE, "pow_exponent_1_5.onnx"))
