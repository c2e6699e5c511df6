#pragma once
// The layer options shared by every subcommand that takes an attention layer (attend, bound, local,
// bracket, measure-lipschitz, report): --layer/--random, --heads, --kind, --prefix, --causal, --residual,
// --prenorm, --sinkhorn, --allow-untied-l2, --rope. One definition, so they mean the same everywhere.
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::cli {

struct LayerArgs {
  std::string layer;
  std::string random;
  int heads = 0;
  std::string kind = "dot";
  std::string prefix;
  bool causal = false;
  bool residual = false;
  std::string prenorm = "none";
  int sinkhorn = 1;
  bool allow_untied_l2 = false;
  std::optional<double> norm_eps;  ///< --norm-eps (unset: the layer's default, PyTorch's 1e-5)
  bool no_out_proj = false;        ///< --no-out-proj: W^O = I (the file has no output projection)
  std::string rope;                ///< --rope THETA|none (empty: not stated; a LLaMA-layout file then fails)
  std::string model;               ///< --model M.onnx (local, attend: cli/local_model.hpp)
  std::string node;                ///< --node NAME|all: the model's attention layer
};

/// The layer and its options after parsing and loading; `source` describes where it came from.
struct ResolvedLayer {
  operators::AttentionLayer layer;
  operators::AttentionOptions options;
  std::string source;
  bool no_out_proj = false;  ///< W^O = I by --no-out-proj
  bool rope_none = false;    ///< --rope none: stated to have no rotary embeddings
};

/// Registers the shared layer options on `cmd`.
void add_layer_options(CLI::App* cmd, LayerArgs& args);

/// Loads (--layer) or draws (--random) the layer and builds the options; throws InputError naming the
/// option for every inconsistency (both or neither of --layer/--random, --heads missing with --layer or given
/// with --random, --prefix with --random, an unknown kind or pre-norm, a bad spec, a --rope that is neither
/// none nor a positive finite number, a LLaMA-layout file without --rope: error naming the file).
ResolvedLayer resolve_layer(const LayerArgs& args);

/// Reads a 2-D token matrix from FILE.npy / FILE.npz[:NAME] / FILE.safetensors[:NAME], finite, with
/// `expected_cols` columns (0: any); errors name the file and `option`.
Matrix<double> load_tokens(const std::string& spec, const char* option, Eigen::Index expected_cols = 0);

/// Token matrices from a 2-D array (one input, n x d) or a 3-D array (a batch: B x n x d, B inputs of the
/// same size, in order); finite, with `expected_cols` columns (0: any). An empty batch, another rank or a
/// wrong width throws InputError naming the file and `option`.
struct TokenBatch {
  std::vector<Matrix<double>> inputs;
  bool batched = false;  ///< the array was 3-D (outputs keep the batch dimension)
};
TokenBatch load_token_batch(const std::string& spec, const char* option, Eigen::Index expected_cols = 0);

/// Throws InputError(option, …) when one linearisation of the layer on n queries against m keys would not
/// fit in memory: per head the scores, the kernel, the Sinkhorn steps and a JVP/VJP temporary (3 + T n x m
/// doubles for T Sinkhorn half-steps), plus the tokens and their images. Called before any search or Jacobian
/// starts.
void check_sequence_memory(const std::string& option, const ResolvedLayer& resolved, double n, double m);

/// One line describing the layer and options for human output.
std::string describe(const ResolvedLayer& resolved);

/// The layer as the command line gave it, for messages: the file of --layer, or "--random".
std::string layer_name(const LayerArgs& args);

}  // namespace regatta::cli
