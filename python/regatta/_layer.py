"""regatta.Layer: one attention layer with its options, from PyTorch objects, state dicts, files or a seed,
and everything the library computes for it. Numerics are the library's (regatta._regatta); this file only
converts arguments and wraps results."""
import numbers
import numpy as np

from . import _regatta
from ._args import flag, integer, optional_integer
from ._progress import hook
from ._results import BoundResult, BracketResult, LocalResult, MeasureBracketResult

_OPTIONS = ("causal", "residual", "prenorm", "sinkhorn", "allow_untied_l2", "norm_eps")


def array(x):
    """x as a NumPy array without copying where possible: NumPy arrays pass through; torch tensors (CPU or
    not, with or without grad) through .detach().cpu().numpy() (torch is never imported here; bfloat16 is
    widened to float32, which NumPy lacks); anything else through np.asarray."""
    if type(x) is np.ndarray:
        return x
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        t = x.detach().cpu()
        if str(getattr(t, "dtype", "")) == "torch.bfloat16":
            t = t.float()
        return t.numpy()
    return np.asarray(x)


def state_dict_arrays(state_dict):
    """A state dict (name -> tensor or array) as name -> NumPy array."""
    if not hasattr(state_dict, "items"):
        raise _regatta.InputError("state_dict: expected a mapping of names to tensors, got "
                                  f"{type(state_dict).__name__}")
    return {str(k): array(v) for k, v in state_dict.items()}


def _heads_of(module):
    for name in ("num_heads", "num_attention_heads", "n_head", "n_heads"):
        value = getattr(module, name, None)
        if isinstance(value, int):
            return value
    config = getattr(module, "config", None)
    if config is not None:
        return _heads_of(config)
    return None


class Layer:
    """An attention layer F(X) = [X] + MHA(N(X)) with its options (docs/python.md).

    Options (keywords of every constructor and of with_options): causal, residual, prenorm ('none',
    'layernorm', 'rmsnorm'), norm_eps (None: the layer's, PyTorch's 1e-5), sinkhorn (half-steps, 1 = softmax),
    allow_untied_l2. Every forward pass is a double-precision evaluation (an estimate); the certified numbers
    come from local, bounds and bracket."""

    __slots__ = ("_core",)

    def __init__(self, core):
        if not isinstance(core, _regatta.LayerCore):
            raise TypeError("use Layer.from_torch, from_state_dict, from_file or random")
        self._core = core

    # ---- construction -------------------------------------------------------------------------------------
    @classmethod
    def _with(cls, core, options):
        unknown = set(options) - set(_OPTIONS)
        if unknown:
            raise _regatta.InputError(f"{sorted(unknown)[0]}: unknown layer option (known: {', '.join(_OPTIONS)})")
        return cls(core).with_options(**options)

    @classmethod
    def from_file(cls, path, heads, *, prefix="", kind="dot", no_out_proj=False, rope=None, **options):
        """A layer from .safetensors / .npz (PyTorch, Hugging Face BERT/LLaMA, timm ViT, GPT-2 names), exactly
        as `regatta ... --layer path --heads H --prefix P [--rope THETA|none]`. `rope`: the base theta of
        rotary position embeddings (Hugging Face's rope_theta), 'none', or None (not stated: LLaMA-layout
        weights, which carry RoPE with a theta they do not hold, are then refused)."""
        return cls._with(_regatta.load_layer(str(path), integer(heads, "heads"), kind, prefix, no_out_proj, rope), options)

    @classmethod
    def from_state_dict(cls, state_dict, heads, *, prefix="", kind="dot", no_out_proj=False, name="state_dict",
                        rope=None, **options):
        """A layer from a state dict (names -> tensors / arrays) in any layout from_file reads; `prefix`
        selects one layer of a whole model ('blocks.3.', 'encoder.layer.0.attention.'); `name` names the
        collection in messages ('state_dict:in_proj_weight: ...'); `rope` as in from_file."""
        tensors = state_dict_arrays(state_dict)
        return cls._with(_regatta.layer_from_tensors(tensors, integer(heads, "heads"), kind, prefix, no_out_proj, str(name),
                                                     rope), options)

    @classmethod
    def from_torch(cls, module, heads=None, *, prefix="", kind="dot", no_out_proj=False, rope=None, **options):
        """A layer from a live PyTorch module: nn.MultiheadAttention (heads from module.num_heads), or any
        module whose state dict holds one of the layouts of from_file (give heads when the module does not
        say it). The weights are copied; later training does not change this Layer."""
        if type(module).__name__ == "MultiheadAttention":
            if getattr(module, "bias_k", None) is not None or getattr(module, "add_zero_attn", False):
                raise _regatta.InputError("module: nn.MultiheadAttention with add_bias_kv or add_zero_attn is "
                                          "not modelled")
        if heads is None:
            heads = _heads_of(module)
            if heads is None:
                raise _regatta.InputError(f"heads: {type(module).__name__} does not say its number of heads; "
                                          "pass heads=")
        if not hasattr(module, "state_dict"):
            raise _regatta.InputError(f"module: expected a torch.nn.Module, got {type(module).__name__}")
        return cls.from_state_dict(module.state_dict(), heads, prefix=prefix, kind=kind, no_out_proj=no_out_proj,
                                   name=f"{type(module).__name__}.state_dict()", rope=rope, **options)

    @classmethod
    def random(cls, d=16, heads=2, *, head_dim=0, value_dim=0, scale=1.0, seed=0, kind="dot", biases=False,
               no_out_proj=False, rope=None, **options):
        """The seeded random layer of `regatta ... --random d=..,heads=..,seed=.. [--rope THETA]` (same weights);
        `rope`: the rotary base theta, or None / 'none'."""
        return cls._with(_regatta.random_layer(integer(d, "d"), integer(heads, "heads"), integer(head_dim, "head_dim"),
                                               integer(value_dim, "value_dim"), scale, integer(seed, "seed"), kind,
                                               flag(biases, "biases"), flag(no_out_proj, "no_out_proj"),
                                               rope), options)

    def with_options(self, **options):
        """A copy with some options changed (validated by the library)."""
        c = self._core
        merged = {name: getattr(c, name) for name in _OPTIONS}
        unknown = set(options) - set(_OPTIONS)
        if unknown:
            raise _regatta.InputError(f"{sorted(unknown)[0]}: unknown layer option (known: {', '.join(_OPTIONS)})")
        merged.update(options)
        eps = options.get("norm_eps")
        return Layer(c.with_options(flag(merged["causal"], "causal"), flag(merged["residual"], "residual"),
                                    str(merged["prenorm"]), integer(merged["sinkhorn"], "sinkhorn"),
                                    flag(merged["allow_untied_l2"], "allow_untied_l2"),
                                    None if eps is None else float(eps)))

    # ---- description --------------------------------------------------------------------------------------
    d = property(lambda self: self._core.d)
    heads = property(lambda self: self._core.heads)
    head_dim = property(lambda self: self._core.head_dim)
    value_dim = property(lambda self: self._core.value_dim)
    kind = property(lambda self: self._core.kind)
    source = property(lambda self: self._core.source)
    causal = property(lambda self: self._core.causal)
    residual = property(lambda self: self._core.residual)
    prenorm = property(lambda self: self._core.prenorm)
    sinkhorn = property(lambda self: self._core.sinkhorn)
    norm_eps = property(lambda self: self._core.norm_eps)
    rope_theta = property(lambda self: self._core.rope_theta, doc="the rotary base theta, or None (no RoPE)")

    def __repr__(self):
        c = self._core
        flags = [f for f in ("causal", "residual") if getattr(c, f)]
        if c.prenorm != "none":
            flags.append(f"prenorm={c.prenorm}")
        if c.sinkhorn != 1:
            flags.append(f"sinkhorn={c.sinkhorn}")
        return (f"<regatta.Layer {c.kind} d={c.d} heads={c.heads} head_dim={c.head_dim} value_dim={c.value_dim}"
                f"{' ' + ' '.join(flags) if flags else ''} from {c.source}>")

    # ---- forward passes (double precision: estimates) -------------------------------------------------------
    def __call__(self, X, context=None, *, depth=1):
        """F(X) (self-attention) or F(X, context) (cross-attention), n x d; depth > 1 applies the layer
        repeatedly (shared weights), as `regatta attend --depth`."""
        if context is None:
            return self._core.attend(array(X), integer(depth, "depth"))
        return self._core.attend_cross(array(X), array(context), integer(depth, "depth"))

    forward = __call__

    def kernel(self, head, X, context=None):
        """The attention matrix of one head (n x m; softmax or Sinkhorn kernel), materialised."""
        return self._core.kernel(integer(head, "head"), array(X), None if context is None else array(context))

    def attend_measure(self, atoms, weights=None, context=None, context_weights=None):
        """F(mu) = (T_mu)_# mu for mu = sum_j w_j delta_{x_j} (uniform weights by default), or the
        cross-attention CA(eta, mu) of the measure (atoms, weights) to the context measure. Returns (atoms,
        weights) of the image (atoms of weight 0 removed)."""
        w = None if weights is None else array(weights)
        if context is None:
            if context_weights is not None:
                raise _regatta.InputError("context_weights: given without a context")
            return self._core.attend_measure(array(atoms), w)
        cw = None if context_weights is None else array(context_weights)
        return self._core.attend_measure_cross(array(atoms), w, array(context), cw)

    # ---- derivatives ----------------------------------------------------------------------------------------
    def linearize(self, X, context=None):
        """DF at X (regatta._regatta.Linearization: value, jvp, vjp, jacobian), or at (X, context) for
        cross-attention (jvp_query, vjp_query, jvp_context, vjp_context)."""
        if context is None:
            return self._core.linearize(array(X))
        return self._core.linearize_cross(array(X), array(context))

    def jvp(self, X, Xdot):
        """DF(X)[Xdot] (n x d)."""
        return self._core.linearize(array(X)).jvp(array(Xdot))

    def vjp(self, X, Fbar):
        """DF(X)^T[Fbar] (n x d)."""
        return self._core.linearize(array(X)).vjp(array(Fbar))

    def jacobian(self, X):
        """The dense Jacobian, (n*d) x (n*d), index (i, a) -> i*d + a (small sizes)."""
        return self._core.linearize(array(X)).jacobian()

    # ---- Lipschitz analysis -----------------------------------------------------------------------------------
    def bounds(self, n=None, *, radius=None, query_radius=None, depth=1, X=None, norm=None, interval_bits=128):
        """Every theoretical Lipschitz upper bound for this layer (`regatta bound`), each with its claim ID,
        hypotheses, provenance, double estimate and certified upper bound, or the reason it does not apply."""
        raw = _regatta.bounds(self._core, optional_integer(n, "n"), radius, query_radius, integer(depth, "depth"),
                              None if X is None else array(X), None if norm is None else str(norm),
                              integer(interval_bits, "interval_bits"))
        return [BoundResult(r) for r in raw]

    def local(self, X, *, certify=False, precision=128, method="lanczos", tolerance=1e-10, max_iterations=500,
              dense_limit=256, ball=None, box=None, margin=None, readout_lipschitz=1.0, region_limit=4096,
              region_pieces=None, progress=None):
        """||J(X)||_2 and ||J(X)||_inf with certified bounds (`regatta local`); ball / box: the certified sup
        of ||J|| over B(X, ball) or the box X +- box; margin (with certify): the certified robustness radius.
        region_pieces (`--region-pieces`): segment pieces of the region's second-order forms, tighter at large
        radii for that many times the passes; None: automatic by n*d."""
        if region_pieces is not None and (isinstance(region_pieces, bool) or not isinstance(
                region_pieces, numbers.Integral) or not 1 <= region_pieces <= 256):
            raise _regatta.InputError(f"region_pieces: must be an integer in [1, 256], or None for automatic; "
                                      f"got {region_pieces!r}")
        pieces = 0 if region_pieces is None else int(region_pieces)
        with hook(progress) as callback:
            raw = _regatta.local(self._core, array(X), flag(certify, "certify"), integer(precision, "precision"),
                                 method, tolerance, integer(max_iterations, "max_iterations"),
                                 integer(dense_limit, "dense_limit"), ball, box, margin, readout_lipschitz,
                                 integer(region_limit, "region_limit"), pieces, callback)
        return LocalResult(raw)

    def bracket(self, n, *, radius=None, norm="2", certify=False, precision=128, budget=10.0, evaluations=20000,
                restarts=4, seed=0, region_limit=512, progress=None):
        """[lower, upper] for the Lipschitz constant on sequences of length n (`regatta bracket`): lower from the
        adversarial search (witness attached), upper the best applicable bound; certified with certify=True.
        Ctrl-C raises KeyboardInterrupt within a fraction of a second."""
        with hook(progress) as callback:
            raw = _regatta.bracket(self._core, integer(n, "n"), radius, str(norm), flag(certify, "certify"),
                                   integer(precision, "precision"), float(budget),
                                   integer(evaluations, "evaluations"), integer(restarts, "restarts"),
                                   integer(seed, "seed"), integer(region_limit, "region_limit"), callback)
        return BracketResult(raw)

    def measure_lipschitz(self, n, *, cross=None, m=0, radius=None, query_radius=None, p=1.0, certify=False,
                          precision=128, budget=10.0, evaluations=4000, restarts=4, seed=0, progress=None):
        """[lower, upper] for the W_p Lipschitz constant of the layer on measures of n atoms (`regatta
        measure-lipschitz`): self-attention, or cross-attention in the query or the context measure
        (cross='query' / 'context', m atoms in the shared measure). Ctrl-C raises KeyboardInterrupt during the
        search (polled before every ratio evaluation), not during the final certification of the witness."""
        with hook(progress) as callback:
            raw = _regatta.measure_lipschitz(self._core, integer(n, "n"), cross, integer(m, "m"), radius,
                                             query_radius, float(p),
                                             flag(certify, "certify"), integer(precision, "precision"), float(budget),
                                             integer(evaluations, "evaluations"),
                                             integer(restarts, "restarts"), integer(seed, "seed"), callback)
        return MeasureBracketResult(raw)
