// regatta attend (--layer FILE --heads H | --random SPEC) --input X [--context C] --out Y.npy [--depth L]:
// multi-head self- (or cross-) attention of a token matrix through a PyTorch / Hugging Face layer or a seeded
// random one (docs/math/attention.md#layers), with the shared layer options (causal, residual, pre-norm,
// Sinkhorn). --depth L applies the same layer L times (a stack with shared weights; with --context every
// layer attends from the current queries to the fixed context). The output is computed in double precision
// (a floating-point evaluation, not certified) and written atomically. A 3-D --input (B x n x d) is a batch:
// each input is attended on its own (with a shared 2-D context, or its own from a B x m x d one), and the
// output keeps the batch dimension. With --model M.onnx --node NAME the layer is an attention layer of the
// model and X the tokens the model gives it at --input (cli/local_model.hpp).
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include <regatta/core/error.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include "array_source.hpp"
#include "command.hpp"
#include "json_output.hpp"
#include "layer_options.hpp"
#include "local_model.hpp"

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

/// Y = the layer applied `depth` times to X (with a context: attending to it every time).
Matrix<double> apply(const ResolvedLayer& resolved, const AttendArgs& args, const Matrix<double>& X,
                     const Matrix<double>* context) {
  Matrix<double> Y = X;
  for (int layer_index = 0; layer_index < args.depth; ++layer_index) {
    Y = context ? operators::attend_cross(resolved.layer, Y, *context, resolved.options)
                : operators::attend(resolved.layer, Y, resolved.options);
    // Finite input, non-finite output: the scores or values left the double range. Nothing is written.
    if (!Y.allFinite())
      throw InputError(args.input,
                       "the output" + (args.depth > 1 ? " of layer " + std::to_string(layer_index + 1) : "") +
                           " is not finite (the scores or values overflow the double range): "
                           "rescale the input or the layer's weights");
  }
  return Y;
}

/// --model M --node NAME: the layer at the tokens the model gives it at --input; the output is also
/// compared with the graph's own value at the layer's output (printed, and in the JSON).
void run_model(const AttendArgs& args, int& result) {
  if (!args.context.empty())
    throw InputError("--context",
                     "does not apply with --model (a cross-attention layer's context is the model's)");
  const std::vector<ModelLayer> layers = model_layers(args.layer, args.input, false, true);
  const ModelLayer& m = layers.front();
  const Matrix<double>* context = m.context.rows() > 0 ? &m.context : nullptr;
  const Matrix<double> Y = apply(m.resolved, args, m.X, context);
  const double difference = args.depth == 1 ? (Y - m.graph_output).cwiseAbs().maxCoeff() : -1;
  io::write_npy(args.out, Y);
  if (args.json) {
    nlohmann::json out{
        {"model", args.layer.model},
        {"node", m.node},
        {"layer", m.resolved.source},
        {"d", m.resolved.layer.d},
        {"heads", m.resolved.layer.heads},
        {"head_dim", m.resolved.layer.head_dim},
        {"value_dim", m.resolved.layer.value_dim},
        {"input_rows", m.X.rows()},
        {"context_rows", context ? m.context.rows() : m.X.rows()},
        {"cross", context != nullptr},
        {"causal", m.resolved.options.causal},
        {"scale", m.scale},
        {"scale_folded", m.folded},
        {"depth", args.depth},
        {"graph_difference", difference >= 0 ? nlohmann::json(difference) : nlohmann::json(nullptr)},
        {"precision", "double"},
        {"certified", false},
        {"out", args.out},
        {"out_rows", Y.rows()},
        {"out_cols", Y.cols()}};
    std::cout << json_text(out) << "\n";
  } else {
    std::cout << "layer     " << describe(m.resolved)
              << (args.depth > 1 ? ", depth " + std::to_string(args.depth) : "") << "\n"
              << "input     " << m.X.rows() << " x " << m.X.cols() << " (the tokens at the layer's input for "
              << args.input << ")\n";
    if (context) std::cout << "context   " << m.context.rows() << " x " << m.context.cols() << "\n";
    std::cout << "output    " << args.out << " (" << Y.rows() << " x " << Y.cols()
              << "; double-precision evaluation, not certified)\n";
    if (difference >= 0)
      std::cout << "graph     max |output - the graph's value at the layer's output| = " << difference
                << "\n";
  }
  result = exit_ok;
}

void run(const AttendArgs& args, int& result) {
  if (!args.layer.model.empty()) return run_model(args, result);
  if (!args.layer.node.empty()) throw InputError("--node", "needs --model");
  const ResolvedLayer resolved = resolve_layer(args.layer);
  const operators::AttentionLayer& layer = resolved.layer;
  const operators::AttentionOptions& options = resolved.options;
  const std::string& source = resolved.source;
  const operators::AttentionKind kind = layer.kind;
  const TokenBatch inputs = load_token_batch(args.input, "--input", layer.d);
  TokenBatch contexts;
  if (!args.context.empty()) {
    contexts = load_token_batch(args.context, "--context", layer.d);
    // A 2-D context is shared by every input; a batch of contexts pairs with a batch of inputs, one each.
    if (contexts.batched && contexts.inputs.size() != inputs.inputs.size())
      throw InputError("--context", "is a batch of " + std::to_string(contexts.inputs.size()) +
                                        " context matrices, --input a batch of " +
                                        std::to_string(inputs.inputs.size()) +
                                        " (they must match, or the "
                                        "context must be one 2-D matrix shared by every input)");
    if (contexts.batched && !inputs.batched)
      throw InputError("--context", "is a 3-D batch but --input is one 2-D matrix");
  }
  const std::size_t count = inputs.inputs.size();
  std::vector<Matrix<double>> outputs;
  outputs.reserve(count);
  for (std::size_t b = 0; b < count; ++b) {
    const Matrix<double>* context =
        contexts.inputs.empty() ? nullptr : &contexts.inputs[contexts.batched ? b : 0];
    outputs.push_back(apply(resolved, args, inputs.inputs[b], context));
  }
  const Matrix<double>& X = inputs.inputs.front();
  const Matrix<double>& Y = outputs.front();
  const Eigen::Index context_rows = contexts.inputs.empty() ? X.rows() : contexts.inputs.front().rows();
  if (inputs.batched) {
    io::Array batch;
    batch.shape = {count, std::size_t(Y.rows()), std::size_t(Y.cols())};
    batch.source = args.out;
    batch.data.reserve(count * std::size_t(Y.size()));
    for (const Matrix<double>& y : outputs)
      batch.data.insert(batch.data.end(), y.data(), y.data() + y.size());
    io::write_npy(args.out, batch);
  } else {
    io::write_npy(args.out, Y);
  }

  if (args.json) {
    nlohmann::json out{
        {"layer", source},
        {"kind", operators::to_string(kind)},
        {"d", layer.d},
        {"heads", layer.heads},
        {"head_dim", layer.head_dim},
        {"value_dim", layer.value_dim},
        {"batch", inputs.batched ? nlohmann::json(count) : nlohmann::json(nullptr)},
        {"input_rows", X.rows()},
        {"context_rows", context_rows},
        {"cross", !args.context.empty()},
        {"causal", options.causal},
        {"residual", options.residual},
        {"prenorm", operators::to_string(options.prenorm)},
        {"sinkhorn_iterations", options.sinkhorn_iterations},
        {"rope_theta", layer.rotary ? nlohmann::json(layer.rotary->theta) : nlohmann::json(nullptr)},
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
              << "input     " << (inputs.batched ? std::to_string(count) + " x " : "") << X.rows() << " x "
              << X.cols() << (inputs.batched ? " (a batch of " + std::to_string(count) + " inputs)" : "")
              << "\n";
    if (!args.context.empty()) std::cout << "context   " << context_rows << " x " << layer.d << "\n";
    std::cout << "output    " << args.out << " (" << (inputs.batched ? std::to_string(count) + " x " : "")
              << Y.rows() << " x " << Y.cols() << "; double-precision evaluation, not certified)\n";
  }
  result = exit_ok;
}

}  // namespace

void add_attend_command(CLI::App& app, int& result) {
  auto args = std::make_shared<AttendArgs>();
  auto* cmd = app.add_subcommand("attend", "Multi-head attention of a token matrix (double precision)");
  add_layer_options(cmd, args->layer);
  add_model_options(cmd, args->layer);
  cmd->add_option("--input", args->input,
                  "Tokens X (n x d), or a batch (B x n x d: each input attended on its own): FILE.npy, "
                  "FILE.npz[:NAME], FILE.safetensors[:NAME]; with --model, the model's input")
      ->required();
  cmd->add_option(
      "--context", args->context,
      "Context tokens (m x d, shared by every input; or B x m x d, one per input) for cross-attention");
  cmd->add_option("--out", args->out, "Output .npy (n x d; B x n x d for a batch), written atomically")
      ->required();
  cmd->add_option("--depth", args->depth, "Apply the layer L times (a stack with shared weights; default 1)")
      ->check(CLI::Range(1, max_depth));
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
