"""A float64 evaluation of an ONNX graph with torch, node by node: the independent reference of the
gpt_causal test set's labels (make_gpt_causal_test_set.py) and of tests/cli/certify_gpt_causal.py's sampling
check. It covers the operators torch.onnx.export writes for the GPT of make_onnx_models.py (opset 12) and
raises on any other; every value is evaluated in float64 (a Cast to FLOAT keeps float64, as regatta reads the
graph as a function of real numbers)."""
import numpy as np
import onnx
import onnx.numpy_helper
import torch


def _attributes(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _tensor(array):
    t = torch.from_numpy(np.array(array))
    return t.double() if t.is_floating_point() else t


class OnnxTorch:
    def __init__(self, path):
        self.model = onnx.load(path)
        self.constants = {i.name: _tensor(onnx.numpy_helper.to_array(i)) for i in self.model.graph.initializer}
        self.input = self.model.graph.input[0].name
        self.output = self.model.graph.output[0].name

    def __call__(self, x):
        """The graph's output at x (a float64 array or tensor of the input's shape, or a batch of B such inputs
        along the export's batch axis of length 1), float64."""
        v = dict(self.constants)
        v[self.input] = torch.as_tensor(x, dtype=torch.float64)
        for n in self.model.graph.node:
            a = _attributes(n)
            i = [v[name] if name else None for name in n.input]
            op = n.op_type
            if op == "Constant":
                out = [_tensor(onnx.numpy_helper.to_array(a["value"]))]
            elif op in ("Identity", "Cast"):
                out = [i[0].double() if op == "Cast" and a["to"] in (1, 11) else i[0]]
            elif op in ("Add", "Sub", "Mul", "Div", "Pow"):
                f = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div, "Pow": torch.pow}[op]
                out = [f(i[0], i[1])]
            elif op in ("Sqrt", "Tanh"):
                out = [torch.sqrt(i[0]) if op == "Sqrt" else torch.tanh(i[0])]
            elif op == "ReduceMean":
                out = [i[0].mean(dim=tuple(a["axes"]), keepdim=bool(a.get("keepdims", 1)))]
            elif op == "MatMul":
                out = [torch.matmul(i[0], i[1])]
            elif op == "Split":
                sizes = list(a["split"]) if "split" in a else [int(k) for k in i[1].tolist()]  # opset 13: input
                out = list(torch.split(i[0], sizes, dim=a.get("axis", 0)))
            elif op == "Reshape":
                shape = [int(s) if s != 0 else i[0].shape[k] for k, s in enumerate(i[1].tolist())]
                if shape and shape[0] == 1 and i[0].shape[0] > 1:  # a batch along the export's batch axis
                    shape[0] = i[0].shape[0]
                out = [i[0].reshape(shape)]
            elif op == "Transpose":
                out = [i[0].permute(*a["perm"])]
            elif op == "Where":
                out = [torch.where(i[0].bool(), i[1], i[2])]
            elif op == "Softmax" and a.get("axis", -1) in (-1, i[0].dim() - 1):
                out = [torch.softmax(i[0], dim=-1)]
            else:
                raise ValueError(f"{n.name}: {op} {a} is not evaluated here")
            for name, t in zip(n.output, out):
                v[name] = t
        return v[self.output]
