// regatta attend (--layer FILE --heads H | --random SPEC) --input X [--context C] --out Y.npy [--depth L]:
// multi-head self- (or cross-) attention of a token matrix through a PyTorch / Hugging Face layer or a seeded
// random one (shared/math/attention.md §2), with the shared layer options (causal, residual, pre-norm,
// Sinkhorn). --depth L applies the same layer L times (a stack with shared weights; with --context every
// layer attends from the current queries to the fixed context). The output is computed in double precision
// (a floating-point evaluation, not certified) and written atomically.
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <regatta/core/error.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include "array_source.hpp"
#include "command.hpp"
#include "json_output.hpp"
#include "layer_options.hpp"

namespace regatta::cli {

namespace {

/// The largest --depth: a sanity bound on the run time (each layer is one forward pass; the layers share one
/// copy of the weights, so memory does not grow with the depth).
constexpr int max_depth = 100000;

struct AttendArgs {
  LayerArgs layer;
  std::string input;
  std::string context;
  std::string out;
  int depth = 1;
  bool json = false;
};

void run(const AttendArgs& args, int& result) {
  const ResolvedLayer resolved = resolve_layer(args.layer);
  const operators::AttentionLayer& layer = resolved.layer;
  const operators::AttentionOptions& options = resolved.options;
  const std::string& source = resolved.source;
  const operators::AttentionKind kind = layer.kind;
  const Matrix<double> X = load_tokens(args.input, "--input", layer.d);
  Matrix<double> Y = X;
  Eigen::Index context_rows = X.rows();
  if (args.context.empty()) {
    for (int layer_index = 0; layer_index < args.depth; ++layer_index)
      Y = operators::attend(layer, Y, options);
  } else {
    const Matrix<double> C = load_tokens(args.context, "--context", layer.d);
    context_rows = C.rows();
    for (int layer_index = 0; layer_index < args.depth; ++layer_index)
      Y = operators::attend_cross(layer, Y, C, options);
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
                       {"causal", options.causal},
                       {"residual", options.residual},
                       {"prenorm", operators::to_string(options.prenorm)},
                       {"sinkhorn_iterations", options.sinkhorn_iterations},
                       {"depth", args.depth},
                       {"precision", "double"},
                       {"certified", false},
                       {"out", args.out},
                       {"out_rows", Y.rows()},
                       {"out_cols", Y.cols()}};
    std::cout << json_text(out) << "\n";
  } else {
    std::cout << "layer     " << describe(resolved)
              << (args.depth > 1 ? ", depth " + std::to_string(args.depth) : "") << "\n"
              << "input     " << X.rows() << " x " << X.cols() << "\n";
    if (!args.context.empty()) std::cout << "context   " << context_rows << " x " << layer.d << "\n";
    std::cout << "output    " << args.out << " (" << Y.rows() << " x " << Y.cols()
              << "; double-precision evaluation, not certified)\n";
  }
  result = exit_ok;
}

}  // namespace

void add_attend_command(CLI::App& app, int& result) {
  auto args = std::make_shared<AttendArgs>();
  auto* cmd = app.add_subcommand("attend", "Multi-head attention of a token matrix (double precision)");
  add_layer_options(cmd, args->layer);
  cmd->add_option("--input", args->input,
                  "Tokens X (n x d): FILE.npy, FILE.npz[:NAME], FILE.safetensors[:NAME]")
      ->required();
  cmd->add_option("--context", args->context, "Context tokens (m x d) for cross-attention");
  cmd->add_option("--out", args->out, "Output .npy (n x d), written atomically")->required();
  cmd->add_option("--depth", args->depth, "Apply the layer L times (a stack with shared weights; default 1)")
      ->check(CLI::Range(1, max_depth));
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
