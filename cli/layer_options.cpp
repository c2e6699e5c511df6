// Shared layer options (see layer_options.hpp).
#include "layer_options.hpp"

#include <cmath>
#include <exception>
#include <string>

#include <sstream>

#include <regatta/core/error.hpp>
#include <regatta/core/io/array.hpp>
#include <regatta/core/resources.hpp>
#include "array_source.hpp"
#include "spec.hpp"

namespace regatta::cli {

namespace {

constexpr long long max_random_dim = 8192;

operators::RandomLayerSpec parse_random_layer(const std::string& text, operators::AttentionKind kind) {
  const Spec spec("--random", text, {"d", "heads", "head_dim", "value_dim", "scale", "seed", "biases"});
  if (spec.positional())
    throw InputError("--random", "expected key=value pairs only, e.g. d=64,heads=4,seed=1");
  operators::RandomLayerSpec r;
  r.d = int(spec.get_int("d", 16, 1, max_random_dim));
  r.heads = int(spec.get_int("heads", 2, 1, max_random_dim));
  r.head_dim = int(spec.get_int("head_dim", 0, 0, max_random_dim));
  r.value_dim = int(spec.get_int("value_dim", 0, 0, max_random_dim));
  r.scale = spec.get_double("scale", 1.0, 1e-300, 1e300);
  r.seed = spec.get_seed("seed", 0);
  r.biases = spec.get_int("biases", 0, 0, 1) != 0;
  r.kind = kind;
  // Sizes before anything is drawn: W^Q, W^K (d x k per head), W^V (d x v), W^O (H v x d), and what a block
  // derives per head (W^V W^O and the score matrix, d x d each), in double, twice for the drawing
  // temporaries.
  const double d = r.d, h = r.heads, k = r.head_dim > 0 ? r.head_dim : d / h,
               v = r.value_dim > 0 ? r.value_dim : k;
  const double doubles = 2 * (2 * d * h * k + 2 * d * h * v + 2 * h * d * d);
  check_memory("--random", 8 * doubles,
               "a layer with d=" + std::to_string(r.d) + ", heads=" + std::to_string(r.heads) +
                   ", head_dim=" + std::to_string(long(k)) + ", value_dim=" + std::to_string(long(v)));
  return r;
}

}  // namespace

void add_layer_options(CLI::App* cmd, LayerArgs& args) {
  cmd->add_option("--layer", args.layer, "Layer weights: FILE.npz or FILE.safetensors (PyTorch or HF names)");
  cmd->add_option("--heads", args.heads, "Number of heads (required with --layer)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--kind", args.kind, "Score: dot (default) or l2 (Kim et al., tied WK = WQ)");
  cmd->add_option("--prefix", args.prefix, "Use only tensors whose names start with this prefix");
  cmd->add_option(
      "--random", args.random,
      "Built-in random layer: d=D,heads=H[,head_dim=K][,value_dim=V][,scale=S][,seed=N][,biases=0|1]");
  cmd->add_flag("--causal", args.causal, "Causal mask: query i sees keys j <= i");
  cmd->add_flag("--residual", args.residual, "Add the input: X + MHA(X)");
  cmd->add_option("--prenorm", args.prenorm,
                  "Normalise tokens before attention: none (default), layernorm or rmsnorm");
  cmd->add_option("--sinkhorn", args.sinkhorn,
                  "Sinkhorn attention: T alternating normalisation half-steps, rows first (1 = softmax)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option_function<double>(
      "--norm-eps", [&args](double v) { args.norm_eps = v; },
      "Epsilon of --prenorm (default 1e-5, PyTorch's; timm ViT uses 1e-6); gamma and beta come from the "
      "layer file when it has them");
  cmd->add_flag(
      "--no-out-proj", args.no_out_proj,
      "The layer has no output projection: W^O = I (the attention map alone; needs heads*head_dim = d)");
  cmd->add_flag("--allow-untied-l2", args.allow_untied_l2,
                "Run --kind l2 with WK != WQ (outside the hypotheses of the L2 theorem)");
  cmd->add_option(
      "--rope", args.rope,
      "Rotary position embeddings of queries and keys (Hugging Face LLaMA convention): THETA, the "
      "base (rope_theta, e.g. 10000), or none; required for LLaMA-layout files");
}

namespace {

/// --rope: not given (nothing stated), none, or a positive finite θ.
operators::RotaryStatement parse_rope(const std::string& text) {
  if (text.empty()) return {};
  if (text == "none") return operators::RotaryStatement::none();
  std::size_t used = 0;
  double theta = 0;
  try {
    theta = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(std::isfinite(theta) && theta > 0))
    throw InputError("--rope", "expected none or a positive finite theta (e.g. 10000), got '" + text + "'");
  return operators::RotaryStatement::with_theta(theta);
}

}  // namespace

ResolvedLayer resolve_layer(const LayerArgs& args) {
  if (args.layer.empty() == args.random.empty())
    throw InputError("--layer/--random", "give exactly one of --layer FILE or --random SPEC");
  const operators::AttentionKind kind = operators::parse_attention_kind(args.kind);
  const operators::RotaryStatement rope = parse_rope(args.rope);
  if (rope.rotary && kind != operators::AttentionKind::dot)
    throw InputError("--rope",
                     "rotary position embeddings are defined for dot-product attention (--kind dot)");
  ResolvedLayer r;
  if (!args.layer.empty()) {
    if (args.heads <= 0) throw InputError("--heads", "required with --layer (number of attention heads)");
    r.layer = operators::load_layer(
        args.layer, args.heads, kind, args.prefix,
        args.no_out_proj ? operators::OutputProjection::identity : operators::OutputProjection::from_file,
        rope);
    r.source = args.layer + (args.prefix.empty() ? "" : " prefix '" + args.prefix + "'");
  } else {
    if (!args.prefix.empty()) throw InputError("--prefix", "applies to --layer only");
    if (args.heads != 0) throw InputError("--heads", "applies to --layer only (use heads= in --random)");
    const operators::RandomLayerSpec spec = parse_random_layer(args.random, kind);
    r.layer = operators::random_layer(spec);
    r.layer.rotary = rope.rotary;
    if (r.layer.rotary && r.layer.head_dim % 2 != 0)
      throw InputError("--rope", "rotates pairs of head coordinates: head_dim must be even, got " +
                                     std::to_string(r.layer.head_dim));
    std::ostringstream os;
    os << "random d=" << r.layer.d << " heads=" << r.layer.heads << " head_dim=" << r.layer.head_dim
       << " value_dim=" << r.layer.value_dim << " scale=" << spec.scale << " seed=" << spec.seed
       << " biases=" << spec.biases;
    r.source = os.str();
  }
  if (args.no_out_proj && args.layer.empty()) {
    if (r.layer.heads * r.layer.value_dim != r.layer.d)
      throw InputError("--no-out-proj", "W^O = I needs heads*value_dim = d, got " +
                                            std::to_string(r.layer.heads * r.layer.value_dim) +
                                            " and d = " + std::to_string(r.layer.d));
    r.layer.WO = Matrix<double>::Identity(r.layer.d, r.layer.d);
  }
  r.no_out_proj = args.no_out_proj;
  r.rope_none = rope.stated && !rope.rotary;
  r.options.causal = args.causal;
  r.options.residual = args.residual;
  r.options.allow_untied_l2 = args.allow_untied_l2;
  r.options.prenorm = operators::parse_prenorm(args.prenorm);
  r.options.sinkhorn_iterations = args.sinkhorn;
  if (args.norm_eps) {
    if (!(std::isfinite(*args.norm_eps) && *args.norm_eps > 0))
      throw InputError("--norm-eps", "must be finite and > 0");
    r.layer.norm_eps = *args.norm_eps;
  }
  return r;
}

Matrix<double> load_tokens(const std::string& spec, const char* option, Eigen::Index expected_cols) {
  const io::Array a = load_array(spec);
  if (a.shape.size() != 2)
    throw InputError(a.source, std::string("expected a 2-D token matrix for ") + option + ", got " +
                                   std::to_string(a.shape.size()) + " dimensions");
  io::require_finite(a);
  Matrix<double> m = a.matrix();
  if (expected_cols != 0 && m.cols() != expected_cols)
    throw InputError(a.source, "has " + std::to_string(m.cols()) +
                                   " columns, the layer expects d = " + std::to_string(expected_cols));
  return m;
}

TokenBatch load_token_batch(const std::string& spec, const char* option, Eigen::Index expected_cols) {
  const io::Array a = load_array(spec);
  if (a.shape.size() != 2 && a.shape.size() != 3)
    throw InputError(a.source,
                     std::string("expected a 2-D token matrix (n x d) or a 3-D batch (B x n x d) for ") +
                         option + ", got " + std::to_string(a.shape.size()) + " dimensions");
  io::require_finite(a);
  TokenBatch batch;
  if (a.shape.size() == 2) {
    batch.inputs.push_back(a.matrix());
  } else {
    batch.batched = true;
    const std::size_t count = a.shape[0], rows = a.shape[1], cols = a.shape[2];
    batch.inputs.reserve(count);
    for (std::size_t b = 0; b < count; ++b)
      batch.inputs.push_back(Eigen::Map<const Matrix<double>>(a.data.data() + b * rows * cols,
                                                              Eigen::Index(rows), Eigen::Index(cols)));
  }
  const Eigen::Index cols = batch.inputs.front().cols();
  if (expected_cols != 0 && cols != expected_cols)
    throw InputError(a.source, "has " + std::to_string(cols) +
                                   " columns, the layer expects d = " + std::to_string(expected_cols));
  return batch;
}

void check_sequence_memory(const std::string& option, const ResolvedLayer& resolved, double n, double m) {
  const double heads = resolved.layer.heads, d = resolved.layer.d;
  // Per head: the scores, the kernel, one matrix per Sinkhorn half-step and a JVP/VJP temporary.
  const double matrices = 3 + double(resolved.options.sinkhorn_iterations);
  const double doubles = matrices * heads * n * m + 8 * (n + m) * d;
  check_memory(option, 8 * doubles,
               "the attention matrices of " + std::to_string(long(n)) + " x " + std::to_string(long(m)) +
                   " tokens with " + std::to_string(resolved.layer.heads) + " heads");
}

std::string layer_name(const LayerArgs& args) { return args.layer.empty() ? "--random" : args.layer; }

std::string describe(const ResolvedLayer& r) {
  std::ostringstream os;
  os << r.source << " (" << operators::to_string(r.layer.kind) << ", d=" << r.layer.d
     << ", heads=" << r.layer.heads << ", head_dim=" << r.layer.head_dim
     << ", value_dim=" << r.layer.value_dim << ")";
  if (r.no_out_proj) os << ", no output projection (W^O = I)";
  if (r.options.causal) os << ", causal";
  if (r.options.residual) os << ", residual";
  if (r.options.prenorm != operators::Prenorm::none) {
    os << ", prenorm " << operators::to_string(r.options.prenorm) << " (eps " << r.layer.norm_eps << ", "
       << (r.layer.norm_gamma.size() != 0
               ? std::string("learned gamma") + (r.layer.norm_beta.size() != 0 ? " and beta" : ", beta = 0")
               : std::string("gamma = 1, beta = 0: no norm weights in the layer"))
       << ")";
  } else if (r.layer.norm_gamma.size() != 0) {
    os << ", norm weights in the file unused (--prenorm none)";
  }
  if (r.options.sinkhorn_iterations != 1) os << ", sinkhorn " << r.options.sinkhorn_iterations;
  if (r.layer.rotary) os << ", rotary embeddings theta " << r.layer.rotary->theta;
  if (r.rope_none) os << ", no rotary embeddings (--rope none)";
  return os.str();
}

}  // namespace regatta::cli
