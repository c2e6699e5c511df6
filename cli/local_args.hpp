#pragma once
// Internal to `regatta local`: the parsed options and the results that local.cpp computes and
// local_output.cpp prints (human text and JSON).
#include <array>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include <regatta/operators/lipschitz/region.hpp>
#include "layer_options.hpp"

namespace regatta::cli::local_command {

struct LocalArgs {
  LayerArgs layer;
  std::string input;
  double epsilon = 0.1;
  bool certify = false;
  bool estimate_only = false;
  bool norms_only = false;
  bool lower_bound_only = false;
  unsigned precision = 128;
  std::string method = "lanczos";
  double tolerance = 1e-10;
  int max_iterations = 500;
  long long dense_limit = lip::dense_certification_limit;
  std::optional<double> margin;
  double readout_lipschitz = 1;
  std::optional<double> ball, box;
  long long region_limit = 4096;
  int region_pieces = 0;  // 0: automatic (lip::region_pieces)
  bool json = false;
  bool whole = false;  // --whole: ‖J(x)‖₂ of the whole --model (local_whole.hpp)
};

/// The Havens quantities at ε (estimates), their certified counterparts (with --certify) and the radius.
struct Sensitivity {
  std::optional<std::string> refusal;
  lip::HavensIngredients<double> estimates;
  std::optional<lip::HavensIngredients<interval>> certified;
  double delta = 0, naive_kernel = 0, naive_weights = 0, gradnorm_lipschitz = 0;
  std::array<double, 3> coefficients{};
  double delta_upper = 0, naive_weights_upper = 0, gradnorm_upper = 0;
  std::optional<lip::RadiusResult> radius, radius_certified;
};

/// The certified sup of ‖J‖ over --ball / --box, and the region robustness radius (--certify --margin).
struct RegionResults {
  std::optional<std::string> refusal;
  std::optional<lip::RegionNormReport> norms;
  std::optional<lip::RegionRadiusResult> radius;
};

/// One input's results as a JSON object (its keys are those of docs/cli.md, `regatta local`).
nlohmann::json local_json(const ResolvedLayer& r, const Matrix<double>& X, const LocalArgs& args,
                          const lip::LocalNormReport& norms, const Sensitivity& s, const RegionResults& g,
                          const std::map<std::string, double>& seconds);
/// The region part of the human output (--ball / --box).
void print_region(const RegionResults& g, const lip::LocalNormReport& local);
/// The human output of one input, without the region part.
void print_human(const ResolvedLayer& r, const Matrix<double>& X, const LocalArgs& args,
                 const lip::LocalNormReport& norms, const Sensitivity& s);

}  // namespace regatta::cli::local_command
