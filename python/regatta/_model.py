"""regatta.Model: a whole trained vision transformer (timm layout, operators/model.hpp), as `regatta certify`
reads it: logits (double, and certified enclosures) and the per-input l2 robustness (certified radius from
region enclosures through every block, attack radius). Model.from_onnx and Model.from_torch(module,
example_input) import any other model as a GraphModel (_graph_model.py)."""
import json
import math
import os

import numpy as np

from . import _regatta
from ._args import flag, integer
from ._layer import array, state_dict_arrays
from ._progress import hook
from ._numbers import Estimate, Interval, Lower
from ._graph_model import GraphModel


def _is_array(x):
    """A NumPy array or a torch tensor (without importing torch)."""
    return isinstance(x, np.ndarray) or (type(x).__module__.startswith("torch") and hasattr(x, "detach"))


class RobustnessRow:
    """One input of `regatta certify`: prediction, margin (estimate) and its certified lower bound, the attack
    radius (an estimate: an upper bound on the true robustness radius; None when no attack succeeded) and the
    certified radius (a certified lower bound on it; 0 when none could be certified)."""

    def __init__(self, raw):
        self.raw = raw
        self.label = raw["label"]
        self.prediction = raw["prediction"]
        self.margin = Estimate(raw["margin"])
        self.margin_lower = Lower(raw["margin_lower"])
        self.attack_radius = Estimate(raw["attack_radius"]) if math.isfinite(raw["attack_radius"]) else None
        self.certified_radius = Lower(raw["certified_radius"])
        self.refuted_radius = raw["refuted_radius"]
        self.region_checks = raw["region_checks"]
        self.method = raw["method"]
        # compare_local=True: the composition of per-stage local bounds (certified), else None and the reason
        self.local_radius = None if raw["local_radius"] is None else Lower(raw["local_radius"])
        self.local_unavailable = raw["local_unavailable"]

    def __repr__(self):
        return (f"<RobustnessRow label {self.label} prediction {self.prediction}: certified radius "
                f"{self.certified_radius}, attack radius {self.attack_radius}>")


class Model:
    """A whole transformer: a vision transformer in timm's layout, or GPT-2 / BERT / LLaMA in Hugging Face
    naming (docs/models.md). A text model's input is its token-embedding matrix (n x width; embed_tokens gives
    it for token ids), and robustness is asked in that space."""

    __slots__ = ("_core",)

    def __init__(self, core):
        self._core = core

    @classmethod
    def from_file(cls, path, config=None):
        """From a .safetensors file in timm naming and its JSON config (default: config.json beside it)."""
        return cls(_regatta.load_model(str(path), "" if config is None else str(config)))

    @classmethod
    def from_state_dict(cls, state_dict, config, *, name="state_dict"):
        """From a state dict (names -> tensors / arrays) in timm naming, as from_file reads the file: the
        same adapter, checks and messages (`name` names the collection: 'state_dict:head.weight: ...').
        `config` is the JSON config as a dict, or the path of a JSON file; names cannot say the heads."""
        if config is None:
            raise _regatta.InputError("config: missing model config (the number of heads cannot be read from "
                                      "tensor names; pass a dict or the path of a JSON file)")
        if isinstance(config, (str, os.PathLike)):
            path, text = str(config), ""
        elif hasattr(config, "items"):
            try:
                path, text = "", json.dumps(dict(config), allow_nan=False)
            except (TypeError, ValueError) as error:
                raise _regatta.InputError(f"config: is not JSON ({error})") from None
        else:
            raise _regatta.InputError(f"config: expected a dict or the path of a JSON file, got "
                                      f"{type(config).__name__}")
        return cls(_regatta.model_from_tensors(state_dict_arrays(state_dict), str(name), path, text))

    @classmethod
    def from_onnx(cls, model):
        """Any model from ONNX (a path, bytes or an onnx.ModelProto), as a GraphModel (_graph_model.py)."""
        return GraphModel.from_onnx(model)

    @classmethod
    def from_torch(cls, module, example_input_or_config=None, *, example_input=None, config=None):
        """From a live PyTorch module. The second argument decides how:

        * a torch tensor or NumPy array (or example_input=): the module is exported with torch.onnx.export
          into memory, traced at that input, and imported as a GraphModel (any architecture the ONNX
          importer covers; a float32 module is exported from a float64 copy, and every number is about that
          float64 function; see GraphModel.from_torch);
        * a dict or the path of a JSON file (or config=): the module (or its state dict) is read in timm's
          VisionTransformer layout with that config, as from_state_dict. The weights are copied; later
          training does not change this Model."""
        given = [v for v in (example_input_or_config, example_input, config) if v is not None]
        if len(given) > 1:
            raise _regatta.InputError("from_torch: give one of an example input and a config, not both")
        second = given[0] if given else None
        if example_input is not None or _is_array(second):
            return GraphModel.from_torch(module, second)
        if second is not None and not (isinstance(second, (str, os.PathLike)) or hasattr(second, "items")):
            raise _regatta.InputError("from_torch: the second argument must be an example input (a torch tensor or "
                                      "NumPy array: the module is exported to ONNX) or a timm config (a dict or "
                                      f"the path of a JSON file), got {type(second).__name__}")
        if hasattr(module, "state_dict") and callable(module.state_dict):
            return cls.from_state_dict(module.state_dict(), second, name=f"{type(module).__name__}.state_dict()")
        if hasattr(module, "items"):
            return cls.from_state_dict(module, second)
        raise _regatta.InputError(f"module: expected a torch.nn.Module or a state dict, got {type(module).__name__}")

    classes = property(lambda self: self._core.classes)
    layout = property(lambda self: self._core.layout)
    input_shape = property(lambda self: self._core.input_shape)
    depth = property(lambda self: self._core.depth)
    width = property(lambda self: self._core.width)

    def __repr__(self):
        c = self._core
        return (f"<regatta.Model {c.layout} depth={c.depth} width={c.width} input={c.input_shape} "
                f"classes={c.classes} from {c.source}>")

    def graph(self, tokens=None):
        """This model as a GraphModel (docs/graph.md#front-ends-safetensors-layouts): the graph of its forward
        function, after the fusion pass (attention_layers: one per block; LLaMA's rotary attention with
        "rotary": True), so that everything a GraphModel does (logits, certified
        enclosures, robustness by affine forms over the graph) runs on it. `tokens`: a text model's number of
        input rows (default: the context; its input_shape is (tokens, width)); an image model takes its whole
        image (input_shape (1, C, H, W))."""
        return GraphModel(self._core.graph(0 if tokens is None else integer(tokens, "tokens")))

    def embed_tokens(self, tokens):
        """A text model's input for token ids: the rows of its token-embedding table (n x width; positions
        and the embedding LayerNorm are applied by the model)."""
        return self._core.embed_tokens([integer(t, "tokens") for t in tokens])

    def __call__(self, image):
        """The logits of one image (any shape with C*H*W entries, C-order): a double evaluation (estimates)."""
        return self._core.logits(array(image))

    logits = __call__

    def logits_enclosure(self, image):
        """Certified enclosures of the exact logits of the binary64 weights and image, one Interval per class."""
        lower, upper = self._core.logits_enclosure(array(image))
        return [Interval(lo, hi) for lo, hi in zip(lower, upper)]

    def robustness(self, image, label, *, tolerance=0.01, method="affine", progress=None,
                   compare_local=False):
        """The l2 robustness of one labelled input, as one row of `regatta certify` (seconds per input):
        method 'affine' (affine forms, the default; 'region' where they do not apply) or 'region' (interval
        Jacobian enclosures: faster, far looser); the row's `method` says which one gave the radius. The
        GIL is released; Ctrl-C raises KeyboardInterrupt (polled at every pass of the attack and every stage
        of a certified pass); progress as for Layer.bracket (stages 'attack', 'region'; done counts steps,
        total unknown). compare_local=True adds local_radius, the certified radius from the composition of
        per-stage local Lipschitz bounds (about as costly again; None with local_unavailable saying why for
        models it does not cover)."""
        with hook(progress) as callback:
            raw = self._core.robustness(array(image), integer(label, "label"), float(tolerance), str(method), callback,
                                        flag(compare_local, "compare_local"))
        return RobustnessRow(raw)
