"""regatta.GraphModel: any model as a typed graph (docs/graph.md), from an ONNX file or bytes, or exported from
a live PyTorch module in memory (torch.onnx.export into a buffer; nothing is written to disk). Model.from_onnx
and Model.from_torch(module, example_input) return one (docs/python.md, "Any model: ONNX and torch export")."""
import copy
import inspect
import io
import os

import numpy as np

from . import _regatta
from ._args import integer
from ._layer import array
from ._numbers import Interval

#: The ONNX opset of torch exports (the highest the importer reads).
EXPORT_OPSET = 17


def _one_line(error):
    """An exception's message as one line (its first nonempty line; the type when it has no message)."""
    for line in str(error).splitlines():
        if line.strip():
            return line.strip()
    return type(error).__name__


def _torch():
    try:
        import torch
    except ImportError:
        raise _regatta.InputError("module: exporting a torch module needs PyTorch (import torch failed)") from None
    return torch


def _example_tensor(torch, example_input):
    """The example input as a float64 torch tensor; InputError for other types, non-real dtypes, empty or
    non-finite arrays."""
    if isinstance(example_input, torch.Tensor):
        t = example_input.detach().cpu()
    elif isinstance(example_input, np.ndarray):
        if example_input.dtype.kind not in "fiu":
            raise _regatta.InputError(f"example_input: has dtype {example_input.dtype}, expected a real array")
        t = torch.from_numpy(np.ascontiguousarray(example_input))
    else:
        raise _regatta.InputError(f"example_input: expected a torch tensor or a NumPy array, got "
                                  f"{type(example_input).__name__}")
    if not (t.is_floating_point() or t.dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)):
        raise _regatta.InputError(f"example_input: has dtype {t.dtype}, expected a real tensor")
    if not t.is_floating_point():
        # Token ids would become floats here: the graph engine takes real inputs (embed the tokens first).
        raise _regatta.InputError(f"example_input: has dtype {t.dtype}; the model's input must be real-valued "
                                  f"(for a text model pass the token embeddings, not the ids)")
    if t.dim() == 0 or t.numel() == 0:
        raise _regatta.InputError(f"example_input: has shape {tuple(t.shape)}, expected a nonempty array")
    t = t.to(torch.float64).contiguous()
    if not bool(torch.isfinite(t).all()):
        raise _regatta.InputError("example_input: has entries that are not finite")
    return t


def _float64_module(torch, module):
    """`module` itself when every floating parameter and buffer is float64, otherwise a float64 copy (the
    caller's module is left as it is)."""
    tensors = list(module.parameters()) + list(module.buffers())
    if all(t.dtype == torch.float64 for t in tensors if t.is_floating_point()):
        return module
    try:
        return copy.deepcopy(module).double()
    except Exception as error:  # a module that cannot be copied
        raise _regatta.InputError(f"module: could not make a float64 copy of {type(module).__name__} "
                                  f"({_one_line(error)})") from None


def _epsilons(torch, module):
    """The eps of every LayerNorm and every BatchNorm module (their ONNX attributes are binary32; the
    importer's caller gives the nodes these binary64 values back, bind_graph.cpp restore_epsilons)."""
    norms = torch.nn.modules.batchnorm._BatchNorm
    layer = [float(m.eps) for m in module.modules() if isinstance(m, torch.nn.LayerNorm)]
    batch = [float(m.eps) for m in module.modules() if isinstance(m, norms)]
    return layer, batch


def export_bytes(module, example_input, opset=EXPORT_OPSET):
    """The ONNX bytes of `module` (float64) traced at `example_input`, exported into memory, the name that
    messages give them, and the module's normalisation epsilons (_epsilons)."""
    torch = _torch()
    if not isinstance(module, torch.nn.Module):
        raise _regatta.InputError(f"module: expected a torch.nn.Module, got {type(module).__name__}")
    x = _example_tensor(torch, example_input)
    source = f"<torch export of {type(module).__name__}>"
    m = _float64_module(torch, module)
    was_training = m.training
    m.eval()
    try:
        # Run once first, so that an input the module cannot take is reported as such (not as an export
        # failure).
        # The InputErrors are raised outside the except blocks, with no reference to torch's exception: its
        # traceback would keep the failed trace's graph objects alive, and torch 1.13 then mistakes new
        # objects at their addresses for them in the next export ("Unable to cast from non-held to held
        # instance").
        failure = None
        with torch.no_grad():
            try:
                m(x)
            except Exception as error:
                failure = _one_line(error)
        if failure is not None:
            raise _regatta.InputError(f"example_input: {type(module).__name__}'s forward fails on shape "
                                      f"{tuple(x.shape)}: {failure}")
        buffer = io.BytesIO()
        options = dict(opset_version=opset, input_names=["input"], output_names=["output"],
                       do_constant_folding=True, training=torch.onnx.TrainingMode.EVAL)
        if "dynamo" in inspect.signature(torch.onnx.export).parameters:
            options["dynamo"] = False  # the TorchScript exporter: the graph of the traced float64 forward
        try:
            torch.onnx.export(m, (x,), buffer, **options)
        except Exception as error:
            failure = _one_line(error)
        if failure is not None:
            raise _regatta.InputError(f"{source}: torch.onnx.export failed: {failure}")
    finally:
        m.train(was_training)
    return buffer.getvalue(), source, _epsilons(torch, m)


def _onnx_bytes(model):
    """bytes, bytearray, or an onnx.ModelProto (anything with SerializeToString) as bytes and their name."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "<ONNX bytes>"
    if callable(getattr(model, "SerializeToString", None)):
        return model.SerializeToString(), f"<{type(model).__name__}>"
    return None, None


class GraphModel:
    """A model imported as a typed graph with one input and one output (docs/graph.md): an ONNX file, or a
    PyTorch module exported to ONNX in memory. The numbers are those of the exact real-number function the
    graph computes with its binary64 constants:

    * logits(x): the double forward, an ESTIMATE (an ndarray of output_shape);
    * logits_enclosure(x): CERTIFIED enclosures of the exact outputs at x (interval64 forward), one Interval
      per output entry (row-major);
    * layers: the graph's nodes (name, kind, source operator, output shape) in evaluation order.

    Inputs are arrays of input_shape (leading axes of size 1 may be left out or added); other shapes are
    refused, never reshaped."""

    __slots__ = ("_core",)

    def __init__(self, core):
        if not isinstance(core, _regatta.GraphCore):
            raise TypeError("use regatta.Model.from_onnx or regatta.Model.from_torch(module, example_input)")
        self._core = core

    @classmethod
    def from_onnx(cls, model):
        """From an .onnx file (a path), its bytes, or an onnx.ModelProto. Refused with a one-line InputError
        naming the file: operators outside the supported set, external data, symbolic dimensions other than
        a leading batch axis (bound to 1), more than one runtime input or output."""
        data, source = _onnx_bytes(model)
        if data is not None:
            return cls(_regatta.import_onnx_bytes(data, source))
        if isinstance(model, (str, os.PathLike)):
            return cls(_regatta.import_onnx_file(os.fspath(model)))
        raise _regatta.InputError(f"model: expected the path of an .onnx file, its bytes or an onnx.ModelProto, "
                                  f"got {type(model).__name__}")

    @classmethod
    def from_torch(cls, module, example_input, *, opset=EXPORT_OPSET):
        """From a live PyTorch module, traced at `example_input` (one tensor or array: the shape of the
        model's input, batch axis included) and exported with torch.onnx.export into memory, in inference
        mode (dropout off, BatchNorm's running statistics). A module that is not float64 is exported from a
        float64 copy: everything this model computes or certifies is about the FLOAT64 function, not the
        float32 one the module would run. ONNX stores normalisation epsilons as binary32: the LayerNorm and
        BatchNorm nodes get their modules' binary64 eps back (restored_epsilons counts them; a functional
        layer_norm keeps the binary32 value the file states). The graph is what the trace recorded: control
        flow that depends on the input's values is fixed to the example's branch (torch warns of it with a
        TracerWarning)."""
        data, source, (layer_eps, batch_eps) = export_bytes(module, example_input, opset)
        return cls(_regatta.import_onnx_bytes(data, source, layer_eps, batch_eps))

    source = property(lambda self: self._core.source, doc="where the graph came from (a path, or '<torch export "
                                                          "of Class>')")
    opset = property(lambda self: self._core.opset)
    input_shape = property(lambda self: self._core.input_shape)
    output_shape = property(lambda self: self._core.output_shape)
    classes = property(lambda self: int(np.prod(self._core.output_shape)),
                       doc="the number of output entries (the flattened logits)")
    node_count = property(lambda self: self._core.node_count)
    nodes_by_kind = property(lambda self: self._core.nodes_by_kind, doc="node kind ('matmul', 'softmax') -> count")
    layers = property(lambda self: self._core.nodes,
                      doc="the nodes in evaluation order: (name, kind, source operator, output shape)")
    restored_epsilons = property(lambda self: self._core.restored_epsilons,
                                 doc="normalisation nodes whose binary32 epsilon was given its module's binary64 "
                                     "value back (from_torch; 0 for a file)")
    attention_layers = property(lambda self: self._core.attention_layers,
                                doc="the attention layers the fusion pass recognised (docs/graph.md, 'Fusion'): one "
                                    "dict each (name, tokens, width, heads, head_dim, value_dim, scale, ...)")
    folded = property(lambda self: self._core.folded,
                      doc="source operators folded into constants by the importer -> count")

    def __repr__(self):
        c = self._core
        return (f"<regatta.GraphModel input={c.input_shape} output={c.output_shape} nodes={c.node_count} "
                f"from {c.source}>")

    def logits(self, x):
        """The graph's output at x by the double forward: an ESTIMATE (ndarray of output_shape)."""
        return self._core.logits(array(x))

    __call__ = logits

    def logits_enclosure(self, x):
        """CERTIFIED enclosures of the exact outputs at x (the interval64 forward, every operation rounded
        outward, the elementary functions enclosed): one Interval per output entry, row-major."""
        lower, upper = self._core.logits_enclosure(array(x))
        return [Interval(lo, hi) for lo, hi in zip(lower.ravel(), upper.ravel())]

    def jacobian(self, x):
        """J(x), the derivative of the flattened output with respect to the flattened input at x, in binary64:
        an ESTIMATE (ndarray of shape (output elements, input elements); forward or reverse mode, whichever
        needs fewer sweeps; docs/graph.md#forward-mode-and-jacobian-enclosures)."""
        return self._core.jacobian(array(x))

    def local_lipschitz(self, x):
        """The local Lipschitz constant ||J(x)||_2 of the whole model at x, as a dict: 'estimate' (an ESTIMATE:
        power iteration on J^T J with forward- and reverse-mode sweeps), 'certified_upper' (CERTIFIED: an upper
        bound from the Jacobian at x enclosed in MPFI at 128 bits and a certified spectral-norm bound) and
        'iterations'."""
        return dict(self._core.local_lipschitz(array(x)))

    def robustness(self, x, label, *, norm="2", tolerance=0.01, input_range=None):
        """The robustness of one labelled input in the l2 ball (norm='2') or the l-inf box (norm='inf'), as one
        row of `regatta certify --model M.onnx` (docs/models.md#certifying-an-onnx-graph): prediction and
        margin (ESTIMATES), margin_lower (CERTIFIED), attack_radius (an ESTIMATE: the smallest radius at which
        projected gradient descent misclassifies; None when it found nothing) and certified_radius (CERTIFIED
        by affine forms over the graph; 0 when none). A graph recognised as a transformer gets, in l2 without
        input_range, its model's row (the model attack, the block pipeline's radius;
        docs/models.md#recognised-transformers). input_range=(lo, hi): the valid input range (pixels in
        [0, 1]); the attack stays inside it, and the l-inf certificate is over the box intersected with it.
        The GIL is released; Ctrl-C raises KeyboardInterrupt."""
        from ._model import RobustnessRow
        if input_range is not None:
            try:
                lo, hi = (float(v) for v in input_range)
            except (TypeError, ValueError):
                raise _regatta.InputError("input_range: expected (lo, hi), two numbers") from None
            input_range = (lo, hi)
        return RobustnessRow(self._core.robustness(array(x), integer(label, "label"), str(norm), float(tolerance),
                                                   input_range))
