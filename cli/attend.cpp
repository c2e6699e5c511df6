// regatta attend (--layer FILE --heads H | --random SPEC) --input X [--context C] --out Y.npy: multi-head
// self- (or cross-) attention of a token matrix through a PyTorch / Hugging Face layer or a seeded random
// one (shared/math/attention.md §2). The output is computed in double precision and written atomically.
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <regatta/core/error.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include "array_source.hpp"
#include "command.hpp"
#include "spec.hpp"

namespace regatta::cli {

namespace {

struct AttendArgs {
  std::string layer;
  std::string random;
  int heads = 0;
  std::string kind = "dot";
  std::string prefix;
  std::string input;
  std::string context;
  std::string out;
  bool causal = false;
  bool residual = false;
  bool allow_untied_l2 = false;
  bool json = false;
};

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
  return r;
}

Matrix<double> load_tokens(const std::string& spec, const char* option) {
  const io::Array a = load_array(spec);
  if (a.shape.size() != 2)
    throw InputError(a.source, std::string("expected a 2-D token matrix for ") + option + ", got " +
                                   std::to_string(a.shape.size()) + " dimensions");
  io::require_finite(a);
  return a.matrix();
}

void run(const AttendArgs& args, int& result) {
  if (args.layer.empty() == args.random.empty())
    throw InputError("attend", "give exactly one of --layer FILE or --random SPEC");
  const operators::AttentionKind kind = operators::parse_attention_kind(args.kind);
  operators::AttentionLayer layer;
  std::string source;
  if (!args.layer.empty()) {
    if (args.heads <= 0) throw InputError("--heads", "required with --layer (number of attention heads)");
    layer = operators::load_layer(args.layer, args.heads, kind, args.prefix);
    source = args.layer + (args.prefix.empty() ? "" : " prefix '" + args.prefix + "'");
  } else {
    if (!args.prefix.empty()) throw InputError("--prefix", "applies to --layer only");
    if (args.heads != 0) throw InputError("--heads", "applies to --layer only (use heads= in --random)");
    const operators::RandomLayerSpec r = parse_random_layer(args.random, kind);
    layer = operators::random_layer(r);
    std::ostringstream os;
    os << "random d=" << layer.d << " heads=" << layer.heads << " head_dim=" << layer.head_dim
       << " value_dim=" << layer.value_dim << " scale=" << r.scale << " seed=" << r.seed
       << " biases=" << r.biases;
    source = os.str();
  }
  const Matrix<double> X = load_tokens(args.input, "--input");
  if (X.cols() != layer.d)
    throw InputError(args.input, "has " + std::to_string(X.cols()) +
                                     " columns, the layer expects d = " + std::to_string(layer.d));
  operators::AttentionOptions options;
  options.causal = args.causal;
  options.residual = args.residual;
  options.allow_untied_l2 = args.allow_untied_l2;
  Matrix<double> Y;
  Eigen::Index context_rows = X.rows();
  if (args.context.empty()) {
    Y = operators::attend(layer, X, options);
  } else {
    const Matrix<double> C = load_tokens(args.context, "--context");
    if (C.cols() != layer.d)
      throw InputError(args.context, "has " + std::to_string(C.cols()) +
                                         " columns, the layer expects d = " + std::to_string(layer.d));
    context_rows = C.rows();
    Y = operators::attend_cross(layer, X, C, options);
  }
  io::write_npy(args.out, Y);

  if (args.json) {
    nlohmann::json out{{"layer", source},
                       {"kind", operators::to_string(kind)},
                       {"d", layer.d},
                       {"heads", layer.heads},
                       {"head_dim", layer.head_dim},
                       {"value_dim", layer.value_dim},
                       {"input_rows", X.rows()},
                       {"context_rows", context_rows},
                       {"cross", !args.context.empty()},
                       {"causal", args.causal},
                       {"residual", args.residual},
                       {"out", args.out},
                       {"out_rows", Y.rows()},
                       {"out_cols", Y.cols()}};
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "layer     " << source << " (" << operators::to_string(kind) << ", d=" << layer.d
              << ", heads=" << layer.heads << ", head_dim=" << layer.head_dim
              << ", value_dim=" << layer.value_dim << ")\n"
              << "input     " << X.rows() << " x " << X.cols() << "\n";
    if (!args.context.empty()) std::cout << "context   " << context_rows << " x " << layer.d << "\n";
    std::cout << "output    " << args.out << " (" << Y.rows() << " x " << Y.cols() << ")"
              << (args.causal ? ", causal" : "") << (args.residual ? ", residual" : "") << "\n";
  }
  result = exit_ok;
}

}  // namespace

void add_attend_command(CLI::App& app, int& result) {
  auto args = std::make_shared<AttendArgs>();
  auto* cmd = app.add_subcommand("attend", "Multi-head attention of a token matrix (double precision)");
  cmd->add_option("--layer", args->layer,
                  "Layer weights: FILE.npz or FILE.safetensors (PyTorch or HF names)");
  cmd->add_option("--heads", args->heads, "Number of heads (required with --layer)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--kind", args->kind, "Score: dot (default) or l2 (Kim et al., tied WK = WQ)");
  cmd->add_option("--prefix", args->prefix, "Use only tensors whose names start with this prefix");
  cmd->add_option(
      "--random", args->random,
      "Built-in random layer: d=D,heads=H[,head_dim=K][,value_dim=V][,scale=S][,seed=N][,biases=0|1]");
  cmd->add_option("--input", args->input,
                  "Tokens X (n x d): FILE.npy, FILE.npz[:NAME], FILE.safetensors[:NAME]")
      ->required();
  cmd->add_option("--context", args->context, "Context tokens (m x d) for cross-attention");
  cmd->add_option("--out", args->out, "Output .npy (n x d), written atomically")->required();
  cmd->add_flag("--causal", args->causal, "Causal mask: query i sees keys j <= i");
  cmd->add_flag("--residual", args->residual, "Add the input: X + MHA(X)");
  cmd->add_flag("--allow-untied-l2", args->allow_untied_l2,
                "Run --kind l2 with WK != WQ (outside the hypotheses of the L2 theorem)");
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
