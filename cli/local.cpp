// regatta local (--layer F --heads H | --random SPEC) --input X [--epsilon E] [--certify] [--precision BITS]
// [--margin M] [--json]: the local regularity of a self-attention layer at the tokens X —
//   ‖J(X)‖₂  Lanczos (or power iteration) on JᵀJ from JVPs/VJPs: an estimate from below, a certified lower
//            bound (interval JVP at the witness) and, with --certify and n·d ≤ --dense-limit, a certified
//            upper bound (dense interval Jacobian, interval Cholesky);
//   ‖J(X)‖∞  the exact maximum row sum evaluated in double (certified enclosure with --certify);
//   δ(X, ε)  the Havens et al. local sensitivity (docs/math/bounds.md#havens-local, claims havens.*) with its
//            naive variants, the gradient-norm comparator and, with --margin, the certified radius.
// A 3-D --input (B x n x d) is a batch: every input is analysed on its own, in order (the JSON output is then
// {"batch": B, "inputs": [...]}, one object per input as for that input alone, with its "index").
// Progress goes to stderr once the command has run for more than a second.
#include <mpfr.h>

#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <utility>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include <regatta/operators/lipschitz/region.hpp>
#include "command.hpp"
#include "json_output.hpp"
#include "layer_options.hpp"
#include "numbers.hpp"
#include "validate.hpp"

namespace regatta::cli {

namespace {

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
};

/// Progress lines on stderr once the command has run for a second: the start and end of one-step stages
/// (the end only when the stage took a second or its start was shown), and loops at most every two seconds.
class StderrProgress {
 public:
  void operator()(std::string_view stage, Eigen::Index done, Eigen::Index total) {
    using clock = std::chrono::steady_clock;
    const auto now = clock::now();
    if (stage != stage_) {
      stage_ = std::string(stage);
      stage_start_ = now;
      shown_ = false;
    }
    const auto since = [&](clock::time_point t) { return std::chrono::duration<double>(now - t).count(); };
    if (done == total) seconds_[stage_] = since(stage_start_);
    if (since(start_) < 1.0) return;
    std::ostringstream line;
    line << std::fixed << std::setprecision(1);
    if (total == 1) {
      if (done == 0) {
        line << stage << " ...";
      } else if (shown_ || since(stage_start_) >= 1.0) {
        line << stage << " done (" << since(stage_start_) << " s)";
      } else {
        return;
      }
    } else {
      if (shown_ && done != total && since(last_) < 2.0) return;
      line << stage << " " << done << "/" << total << " (" << since(stage_start_) << " s)";
    }
    std::cerr << "regatta local: " << line.str() << "\n";
    shown_ = true;
    last_ = now;
  }

  /// Wall-clock seconds of every finished stage.
  const std::map<std::string, double>& seconds() const { return seconds_; }

 private:
  std::map<std::string, double> seconds_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), stage_start_{}, last_{};
  std::string stage_;
  bool shown_ = false;
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

Sensitivity sensitivity(const ResolvedLayer& r, const Matrix<double>& X, const LocalArgs& args,
                        const lip::SpectralOptions& spectral, const lip::Progress& progress) {
  Sensitivity s;
  if (args.norms_only || args.lower_bound_only) {
    s.refusal = args.lower_bound_only ? "not computed (--lower-bound-only)" : "not computed (--norms-only)";
    return s;
  }
  s.refusal = lip::havens_refusal(r.layer, r.options);
  if (s.refusal) return s;
  progress("local sensitivity (xi, kappa)", 0, 1);
  s.estimates = lip::havens_estimates(r.layer, r.options, X, spectral);
  progress("local sensitivity (xi, kappa)", 1, 1);
  s.delta = lip::havens_delta(s.estimates, args.epsilon);
  s.naive_kernel = lip::havens_delta_naive_kernel(s.estimates, args.epsilon);
  s.naive_weights = lip::havens_delta_naive_weights(s.estimates, args.epsilon);
  s.gradnorm_lipschitz = lip::havens_gradnorm_lipschitz(s.estimates, args.epsilon);
  s.coefficients = lip::havens_delta_coefficients(s.estimates);
  lip::MarginSetting margin;
  if (args.margin) {
    margin.margin = *args.margin;
    margin.readout_lipschitz = args.readout_lipschitz;
    s.radius = lip::havens_certified_radius(s.estimates, margin);
  }
  if (args.certify) {
    progress("certified local sensitivity", 0, 1);
    const PrecisionGuard guard(args.precision);
    s.certified = lip::havens_certified(r.layer, r.options, X, s.estimates, args.dense_limit);
    const auto up = [](const interval& x) { return mpfr_get_d(upper_bound(x).backend().data(), MPFR_RNDU); };
    s.delta_upper = up(lip::havens_delta(*s.certified, args.epsilon));
    s.naive_weights_upper = up(lip::havens_delta_naive_weights(*s.certified, args.epsilon));
    s.gradnorm_upper =
        up(lip::havens_gradnorm_lipschitz(*s.certified, args.epsilon) * interval(args.epsilon));
    if (args.margin) s.radius_certified = lip::havens_certified_radius(*s.certified, margin);
    progress("certified local sensitivity", 1, 1);
  }
  return s;
}

/// The certified sup of ‖J‖ over --ball / --box, and the region robustness radius (--certify --margin).
struct RegionResults {
  std::optional<std::string> refusal;
  std::optional<lip::RegionNormReport> norms;
  std::optional<lip::RegionRadiusResult> radius;
};

RegionResults region_results(const ResolvedLayer& r, const Matrix<double>& X, const LocalArgs& args,
                             const lip::LocalNormReport& local, const lip::Progress& progress) {
  RegionResults out;
  const bool wanted = args.ball || args.box || (args.certify && args.margin);
  if (!wanted) return out;
  out.refusal = lip::region_refusal(r.layer, r.options);
  if (out.refusal) return out;
  lip::RegionOptions options;
  options.dense_limit = args.region_limit;
  options.pieces = args.region_pieces;
  options.progress = progress;
  // The second-order form for --ball/--box (docs/local.md); in the bisection of the radius only where one
  // evaluation is cheap (n·d ≤ 128: at most 16 forward-mode passes per step).
  options.second_order = true;
  if (args.ball || args.box) {
    const lip::Region region{args.ball ? lip::RegionShape::ball : lip::RegionShape::box,
                             args.ball ? *args.ball : *args.box};
    lip::RegionOptions with_lower = options;
    with_lower.lower_witness = true;  // the certified lower ends: a point of the region found by ascent
    out.norms = lip::region_jacobian_norms(r.layer, r.options, X, region, with_lower);
  }
  if (args.certify && args.margin) {
    lip::MarginSetting margin;
    margin.margin = *args.margin;
    margin.readout_lipschitz = args.readout_lipschitz;
    lip::RegionRadiusOptions radius;
    radius.region = options;
    radius.region.progress = {};
    radius.region.second_order = X.size() <= 128;
    radius.region.pieces_budget = 0;  // the smallest automatic pieces: one region per bisection step
    progress("region robustness radius (bisection)", 0, 1);
    out.radius = lip::region_certified_radius(r.layer, r.options, X, margin, local.two.estimate, radius);
    progress("region robustness radius (bisection)", 1, 1);
  }
  return out;
}

nlohmann::json closed_form_json(const std::optional<lip::ClosedFormBound>& b) {
  if (!b) return nullptr;
  return {{"id", b->id}, {"certified_upper", number_or_null(b->upper)}, {"token_radius", b->radius}};
}

/// The certified lower end of sup ‖J‖ over the region: the larger of the centre's certified lower bound and
/// the witness's (either may be missing).
std::optional<double> region_lower(std::optional<double> centre, const std::optional<lip::RegionWitness>& w) {
  std::optional<double> best = centre;
  if (w && w->lower && (!best || *w->lower > *best)) best = w->lower;
  return best;
}

std::optional<double> centre_two_lower(const lip::LocalNormReport& local) {
  return local.has_two_lower ? std::optional<double>(local.two_lower) : std::nullopt;
}

std::optional<double> centre_inf_lower(const lip::LocalNormReport& local) {
  return local.has_inf_enclosure ? std::optional<double>(local.inf_lower) : std::nullopt;
}

nlohmann::json witness_json(const std::optional<lip::RegionWitness>& w) {
  if (!w) return nullptr;
  return {{"certified_lower", w->lower ? number_or_null(*w->lower) : nlohmann::json(nullptr)},
          {"estimate", number_or_null(w->estimate)},
          {"distance_certified_upper", number_or_null(w->distance)},
          {"origin", w->origin},
          {"reason", w->reason}};
}

nlohmann::json region_json(const RegionResults& g, const lip::LocalNormReport& local) {
  nlohmann::json out{{"refused", g.refusal ? nlohmann::json(*g.refusal) : nlohmann::json(nullptr)}};
  if (g.norms) {
    const lip::RegionNormReport& n = *g.norms;
    out["shape"] = lip::to_string(n.region.shape);
    out["radius"] = n.region.radius;
    out["status"] = n.status;
    out["sup_jacobian_norm_2_certified_upper"] =
        n.certified ? number_or_null(n.two_upper) : nlohmann::json(nullptr);
    const auto two_lower = region_lower(centre_two_lower(local), n.two_witness);
    const auto inf_lower = region_lower(centre_inf_lower(local), n.inf_witness);
    out["sup_jacobian_norm_2_certified_lower"] =
        two_lower ? number_or_null(*two_lower) : nlohmann::json(nullptr);
    out["sup_jacobian_norm_inf_certified_lower"] =
        inf_lower ? number_or_null(*inf_lower) : nlohmann::json(nullptr);
    out["lower_witness_2"] = witness_json(n.two_witness);
    out["lower_witness_inf"] = witness_json(n.inf_witness);
    out["sup_jacobian_norm_2_method"] = n.two_upper_method;
    out["sup_jacobian_norm_2_form"] = n.two_upper_form;
    out["sup_jacobian_norm_inf_form"] = n.inf_upper_form;
    if (n.second_order) {
      const lip::SecondOrderSummary& so = *n.second_order;
      out["second_order"] = {{"centre_jacobian_norm_2_certified_upper", number_or_null(so.centre_two)},
                             {"centre_jacobian_norm_inf_certified_upper", number_or_null(so.centre_inf)},
                             {"slope_2_certified_upper", number_or_null(so.slope_two)},
                             {"slope_inf_certified_upper", number_or_null(so.slope_inf)},
                             {"sup_jacobian_norm_2_certified_upper", number_or_null(so.two_upper)},
                             {"sup_jacobian_norm_inf_certified_upper", number_or_null(so.inf_upper)},
                             {"frobenius_radius", so.radius},
                             {"radius_pieces", so.radius_pieces},
                             {"taylor_pieces", so.taylor_pieces},
                             {"spectral_gap",
                              {{"sup_jacobian_norm_2_certified_upper", number_or_null(so.gap_two)},
                               {"first_order_rate_certified_upper", number_or_null(so.gap_rate)},
                               {"centre_sigma_2_certified_upper", number_or_null(so.gap_sigma_two)},
                               {"coupling_certified_upper", number_or_null(so.gap_coupling)}}}};
    } else {
      out["second_order"] = nullptr;
    }
    out["sup_jacobian_norm_inf_certified_upper"] =
        n.certified ? number_or_null(n.inf_upper) : nlohmann::json(nullptr);
    out["enclosure_relative_width"] = number_or_null(n.relative_width);
    out["closed_form_2"] = closed_form_json(n.closed_form_two);
    out["closed_form_inf"] = closed_form_json(n.closed_form_inf);
  }
  if (g.radius) {
    out["robustness_radius_certified"] = number_or_null(g.radius->radius);
    out["robustness_radius_sup_jacobian_norm_2_certified_upper"] =
        g.radius->radius > 0 ? number_or_null(g.radius->sup_two_at_radius) : nullptr;
    out["robustness_radius_first_order_limit_estimate"] = number_or_null(g.radius->first_order_limit);
    out["robustness_radius_steps"] = g.radius->steps;
  }
  return out;
}

nlohmann::json vector_json(const std::vector<double>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(number_or_null(x));
  return a;
}

nlohmann::json local_json(const ResolvedLayer& r, const Matrix<double>& X, const LocalArgs& args,
                          const lip::LocalNormReport& norms, const Sensitivity& s, const RegionResults& g,
                          const std::map<std::string, double>& seconds) {
  const Eigen::Index d = X.cols();
  nlohmann::json out{
      {"layer", r.source},
      {"kind", operators::to_string(r.layer.kind)},
      {"d", r.layer.d},
      {"heads", r.layer.heads},
      {"n", X.rows()},
      {"causal", r.options.causal},
      {"residual", r.options.residual},
      {"prenorm", operators::to_string(r.options.prenorm)},
      {"sinkhorn_iterations", r.options.sinkhorn_iterations},
      {"rope_theta", r.layer.rotary ? nlohmann::json(r.layer.rotary->theta) : nlohmann::json(nullptr)},
      {"precision_bits", args.precision},
      {"number_kinds",
       "keys containing 'certified' hold certified numbers (endpoints of outward-rounded interval "
       "evaluations); every other number is a double estimate (see the *_kind keys)"},
      {"jacobian_norm_2", number_or_null(norms.two.estimate)},
      {"jacobian_norm_2_kind", "estimate from below (" + lip::to_string(norms.two.method) + " on J^T J)"},
      {"jacobian_norm_2_method", lip::to_string(norms.two.method)},
      {"jacobian_norm_2_iterations", norms.two.iterations},
      {"jacobian_norm_2_converged", norms.two.converged},
      {"jacobian_norm_2_relative_error", number_or_null(norms.two.relative_error)},
      {"jacobian_norm_2_certified_lower",
       norms.has_two_lower ? number_or_null(norms.two_lower) : nlohmann::json(nullptr)},
      {"jacobian_norm_2_certified_upper",
       norms.has_two_upper ? number_or_null(norms.two_upper) : nlohmann::json(nullptr)},
      {"jacobian_norm_2_certified_upper_method",
       norms.has_two_upper ? norms.two_upper_method : norms.two_upper_note},
      {"jacobian_certified_scalar", norms.has_two_upper ? nlohmann::json(norms.jacobian_scalar) : nullptr},
      {"jacobian_norm_2_certified_lower_jvp",
       norms.has_two_lower ? nlohmann::json(norms.two_lower_jvp) : nlohmann::json(nullptr)},
      {"jacobian_norm_inf", norms.has_inf ? number_or_null(norms.inf.value) : nlohmann::json(nullptr)},
      {"jacobian_norm_inf_kind", "exact maximum row sum evaluated in double (estimate)"},
      {"jacobian_norm_inf_method", norms.inf_structured ? "structured rows" : "one VJP per row"},
      {"jacobian_norm_inf_row", {norms.inf.index / d, norms.inf.index % d}},
      {"jacobian_norm_inf_certified_lower",
       norms.has_inf_enclosure ? number_or_null(norms.inf_lower) : nlohmann::json(nullptr)},
      {"jacobian_norm_inf_certified_upper",
       norms.has_inf_enclosure ? number_or_null(norms.inf_upper) : nlohmann::json(nullptr)},
      {"epsilon", args.epsilon},
      {"delta_claim",
       "havens.local_delta (derived reconstruction of Havens et al. 2024, docs/math/bounds.md#havens-delta)"},
      {"delta_refused", s.refusal ? nlohmann::json(*s.refusal) : nlohmann::json(nullptr)},
  };
  if (s.refusal) {
    for (const char* key : {"delta", "delta_certified_upper", "delta_naive_kernel", "delta_naive_weights",
                            "gradnorm_bound", "xi", "kappa", "delta_coefficients", "certified_radius"})
      out[key] = nullptr;
  } else {
    const auto& q = s.estimates;
    out["delta"] = number_or_null(s.delta);
    out["delta_kind"] = "estimate (xi, kappa_h from below by Lanczos; other norms accurate, uncertified)";
    out["delta_certified_upper"] = s.certified ? number_or_null(s.delta_upper) : nlohmann::json(nullptr);
    out["delta_coefficients"] = vector_json({s.coefficients[0], s.coefficients[1], s.coefficients[2]});
    out["delta_naive_kernel"] = number_or_null(s.naive_kernel);
    out["delta_naive_weights"] = number_or_null(s.naive_weights);
    out["delta_naive_weights_certified_upper"] =
        s.certified ? number_or_null(s.naive_weights_upper) : nlohmann::json(nullptr);
    out["gradnorm_bound"] = number_or_null(args.epsilon * s.gradnorm_lipschitz);
    out["gradnorm_bound_certified_upper"] =
        s.certified ? number_or_null(s.gradnorm_upper) : nlohmann::json(nullptr);
    out["first_order"] = number_or_null(args.epsilon * norms.two.estimate);
    out["xi"] = number_or_null(q.xi);
    out["kappa"] = vector_json(q.kappa);
    if (s.certified) out["certificate"] = s.certified->certificate;
    if (s.radius) {
      out["certified_radius"] = {{"margin", *args.margin},
                                 {"readout_lipschitz", args.readout_lipschitz},
                                 {"estimate", number_or_null(s.radius->radius)},
                                 {"certified", s.radius_certified ? number_or_null(s.radius_certified->radius)
                                                                  : nlohmann::json(nullptr)}};
    } else {
      out["certified_radius"] = nullptr;
    }
  }
  out["region"] = region_json(g, norms);
  out["stage_seconds"] = seconds;
  return out;
}

/// One labelled line: label padded to a column, value, and what the value is.
void line(const std::string& label, const std::string& value, const std::string& note) {
  std::cout << "  " << std::left << std::setw(26) << label << std::setw(18) << value << note << "\n";
}

void print_region(const RegionResults& g, const lip::LocalNormReport& local) {
  if (!g.norms && !g.radius && !g.refusal) return;
  std::cout << "\nregion (certified over every input of the region; region enclosure of the Jacobian)\n";
  if (g.refusal) {
    std::cout << "  refused: " << *g.refusal << "\n";
    return;
  }
  if (g.norms) {
    const lip::RegionNormReport& n = *g.norms;
    const std::string where = n.region.shape == lip::RegionShape::ball
                                  ? "Frobenius ball B(X, " + number(n.region.radius) + ")"
                                  : "box |X' - X|_max <= " + number(n.region.radius);
    std::cout << "  " << where << ": " << n.status << "\n";
    const auto two_lower = region_lower(centre_two_lower(local), n.two_witness);
    const auto inf_lower = region_lower(centre_inf_lower(local), n.inf_witness);
    const auto lower_text = [](const std::optional<double>& v) {
      return v ? lower_number(*v) : std::string("0");
    };
    const auto lower_source = [&](const std::optional<double>& v,
                                  const std::optional<lip::RegionWitness>& w) {
      if (w && w->lower && v && *w->lower >= *v)
        return "lower: a point X' of the region found by ascent from the " + w->origin +
               (n.region.shape == lip::RegionShape::ball ? ", ||X' - X||_F <= " : ", |X' - X|_max <= ") +
               upper_number(w->distance);
      return std::string("lower: the centre");
    };
    if (n.certified) {
      line("sup ||J||_2 certified", "[" + lower_text(two_lower) + ", " + upper_number(n.two_upper) + "] ",
           "(" + lower_source(two_lower, n.two_witness) + "; upper: " + n.two_upper_method + ")");
      line("sup ||J||_inf certified", "[" + lower_text(inf_lower) + ", " + upper_number(n.inf_upper) + "] ",
           "(" + lower_source(inf_lower, n.inf_witness) + "; upper: " + n.inf_upper_form + ")");
    } else {
      line("sup ||J||_2 certified", ">= " + lower_text(two_lower),
           "(" + lower_source(two_lower, n.two_witness) + ")");
      line("sup ||J||_inf certified", ">= " + lower_text(inf_lower),
           "(" + lower_source(inf_lower, n.inf_witness) + ")");
    }
    for (const auto* w : {&n.two_witness, &n.inf_witness})
      if (*w && !(*w)->lower)
        line(std::string("witness ") + (w == &n.two_witness ? "(2)" : "(inf)"), "-",
             "(not certified: " + (*w)->reason + ")");
    if (n.second_order && std::isfinite(n.second_order->two_upper)) {
      line("second-order slope (2)", upper_number(n.second_order->slope_two),
           "(certified: ||J(X') - J(X)||_2 <= ||X' - X||_F * slope on the region)");
      line("second-order sup ||J||_2", upper_number(n.second_order->two_upper),
           "(certified: ||J(X)||_2 upper + " + number(n.second_order->radius) + " * slope)");
      const int taylor = n.second_order->taylor_pieces;
      line("segment pieces", std::to_string(n.second_order->radius_pieces),
           "(radius pieces of the enclosures over the region" +
               (taylor > 0 ? "; the Taylor form's remainder in " + std::to_string(taylor) : std::string()) +
               "; --region-pieces)");
    }
    if (n.second_order && std::isfinite(n.second_order->gap_two)) {
      line("spectral-gap rate", upper_number(n.second_order->gap_rate),
           "(certified: |w^T dJ v| along any unit direction, v the top singular vector of J(X), w = J(X) v)");
      line("spectral-gap sup ||J||_2", upper_number(n.second_order->gap_two),
           "(certified: 2 x 2 bound with sigma_2 <= " + upper_number(n.second_order->gap_sigma_two) + ")");
    }
    for (const auto* b : {&n.closed_form_two, &n.closed_form_inf})
      if (*b)
        line("closed form " + std::string(b == &n.closed_form_two ? "(2)" : "(inf)"),
             upper_number((*b)->upper),
             "(" + (*b)->id + ", certified upper, tokens in B_R with R = " + number((*b)->radius) + ")");
  }
  if (g.radius) {
    line("radius certified", lower_number(g.radius->radius),
         "(sqrt(2) L r sup_{B(X,r)} ||J||_2 < m; " + std::to_string(g.radius->steps) + " bisection steps)");
    line("first-order limit", number(g.radius->first_order_limit),
         "(estimate m / (sqrt(2) L ||J(X)||_2): no certificate of this kind can exceed it)");
  }
}

void print_human(const ResolvedLayer& r, const Matrix<double>& X, const LocalArgs& args,
                 const lip::LocalNormReport& norms, const Sensitivity& s) {
  const Eigen::Index d = X.cols();
  std::ostringstream steps;
  steps << std::setprecision(2) << "(from below; " << lip::to_string(norms.two.method) << " on J^T J, "
        << norms.two.iterations << " steps, " << (norms.two.converged ? "converged" : "NOT converged")
        << ", relative error ~ " << norms.two.relative_error << ")";
  std::cout << "layer   " << describe(r) << "\n"
            << "input   " << X.rows() << " x " << d << " (" << args.input << ")\n\n"
            << "Jacobian J = DF(X)\n";
  line("||J||_2 estimate", number(norms.two.estimate), steps.str());
  line("||J||_2 certified lower", norms.has_two_lower ? lower_number(norms.two_lower) : "-",
       norms.has_two_lower
           ? "(CERTIFIED lower bound, rounded down: interval JVP at the witness, " + norms.two_lower_jvp + ")"
           : "(not computed: --estimate-only)");
  line("||J||_2 certified upper", norms.has_two_upper ? upper_number(norms.two_upper) : "-",
       norms.has_two_upper ? "(" + norms.two_upper_method + " of the dense Jacobian enclosed in " +
                                 norms.jacobian_scalar + ")"
                           : "(" + norms.two_upper_note + ")");
  if (norms.has_inf)
    line("||J||_inf", number(norms.inf.value),
         "(exact max row sum evaluated in double, an estimate; row i = " +
             std::to_string(norms.inf.index / d) + ", a = " + std::to_string(norms.inf.index % d) + ")");
  else
    line("||J||_inf", "-", "(not computed: --lower-bound-only)");
  if (norms.has_inf_enclosure)
    line("||J||_inf certified",
         "[" + lower_number(norms.inf_lower) + ", " + upper_number(norms.inf_upper) + "]", "");
  std::cout
      << "\nlocal sensitivity at eps = " << number(args.epsilon)
      << " (havens.*: derived reconstruction of Havens et al. 2024, docs/math/bounds.md#havens-local)\n";
  if (s.refusal) {
    std::cout << (args.norms_only || args.lower_bound_only ? "  " : "  refused: ") << *s.refusal << "\n";
    return;
  }
  const auto& q = s.estimates;
  line("xi(X)", number(q.xi), "(estimate from below)");
  for (int h = 0; h < q.heads; ++h)
    line("kappa_" + std::to_string(h) + "(X)", number(q.kappa[h]), "(estimate from below)");
  line("delta(X, eps)", number(s.delta),
       "(estimate; " + number(s.coefficients[0]) + " eps + " + number(s.coefficients[1]) + " eps^2 + " +
           number(s.coefficients[2]) + " eps^3)");
  if (s.certified)
    line("delta certified upper", upper_number(s.delta_upper), "(" + s.certified->certificate + ")");
  line("naive, kernel level", number(s.naive_kernel), "(estimate)");
  line("naive, weight level", number(s.naive_weights), "(estimate)");
  if (s.certified)
    line("naive, weights, certified", upper_number(s.naive_weights_upper), "(certified upper)");
  line("gradient-norm eps*L_GN", number(args.epsilon * s.gradnorm_lipschitz), "(estimate)");
  if (s.certified) line("gradient-norm, certified", upper_number(s.gradnorm_upper), "(certified upper)");
  line("first order eps*||J||_2", number(args.epsilon * norms.two.estimate),
       "(estimate; not a bound on the change)");
  if (s.radius) {
    const std::string about =
        "(margin " + number(*args.margin) + ", readout Lipschitz " + number(args.readout_lipschitz) + ")";
    line("radius estimate", number(s.radius->radius), about);
    // A certified radius is a lower bound on the distance the prediction is safe within: rounded down.
    if (s.radius_certified) line("radius certified", lower_number(s.radius_certified->radius), about);
  }
}

void run(const LocalArgs& args, int& result) {
  const ResolvedLayer resolved = resolve_layer(args.layer);
  check_positive("--epsilon", args.epsilon);
  check_in_range("--precision", args.precision, 64, max_precision_bits);
  if (!(args.tolerance > 0 && args.tolerance < 1))
    throw InputError("--tolerance", "must lie in (0, 1), got " + number(args.tolerance));
  if (args.margin) check_positive("--margin", *args.margin);
  if (args.ball) check_positive("--ball", *args.ball);
  if (args.box) check_positive("--box", *args.box);
  if (args.estimate_only && args.certify)
    throw InputError("--estimate-only", "cannot be combined with --certify");
  if (args.estimate_only && (args.ball || args.box))
    throw InputError("--estimate-only", std::string("cannot be combined with ") +
                                            (args.ball ? "--ball" : "--box") +
                                            " (the region's sup is certified in interval arithmetic)");
  if (args.lower_bound_only) {
    const std::pair<bool, const char*> conflicts[] = {{args.certify, "--certify"},
                                                      {args.estimate_only, "--estimate-only"},
                                                      {args.ball.has_value(), "--ball"},
                                                      {args.box.has_value(), "--box"},
                                                      {args.margin.has_value(), "--margin"}};
    for (const auto& [given, name] : conflicts)
      if (given) throw InputError("--lower-bound-only", std::string("cannot be combined with ") + name);
  }
  if (args.norms_only && args.margin && !args.ball && !args.box)
    throw InputError("--margin",
                     "needs --ball or --box with --norms-only (its radius comes from delta otherwise)");
  if (args.norms_only && args.margin && !args.certify)
    throw InputError("--margin",
                     "with --norms-only needs --certify: delta is not computed, and the region "
                     "robustness radius is certified");
  if (!(std::isfinite(args.readout_lipschitz) && args.readout_lipschitz > 0))
    throw InputError("--readout-lipschitz", "must be finite and > 0");
  if (args.region_pieces > 0 && !args.ball && !args.box && !(args.certify && args.margin))
    throw InputError("--region-pieces", "needs a region: --ball, --box, or --certify with --margin");
  const TokenBatch inputs = load_token_batch(args.input, "--input", resolved.layer.d);
  // Every input of a batch has the same size, so one check covers them all, before any work.
  const Matrix<double>& first = inputs.inputs.front();
  check_nonempty(args.input, first.rows());
  check_sequence_memory(args.input, resolved, double(first.rows()), double(first.rows()));
  if (const double nd = double(first.rows()) * double(first.cols());
      args.certify && nd <= double(args.dense_limit))
    // The dense interval Jacobian and its Gram matrix: two (n d)^2 MPFI intervals of two MPFR numbers each.
    check_memory("--dense-limit", 2 * nd * nd * 2 * (32 + double(args.precision) / 8),
                 "the dense interval Jacobian of n*d = " + std::to_string(long(nd)) + " rows");

  lip::LocalNormOptions options;
  options.spectral.method = lip::parse_spectral_method(args.method, "--method");
  options.spectral.relative_tolerance = args.tolerance;
  options.spectral.max_iterations = args.max_iterations;
  options.precision_bits = args.precision;
  options.certify = args.certify;
  options.certified_lower = !args.estimate_only;
  options.inf_norm = !args.lower_bound_only;
  options.dense_limit = args.dense_limit;
  nlohmann::json batch_json = nlohmann::json::array();
  const std::size_t count = inputs.inputs.size();
  for (std::size_t b = 0; b < count; ++b) {
    const Matrix<double>& X = inputs.inputs[b];
    const std::string name = inputs.batched ? args.input + " [input " + std::to_string(b) + "]" : args.input;
    auto progress_state = std::make_shared<StderrProgress>();
    const lip::Progress progress = [progress_state](std::string_view stage, Eigen::Index done,
                                                    Eigen::Index total) {
      (*progress_state)(stage, done, total);
    };
    options.progress = progress;
    const lip::LocalNormReport norms =
        lip::local_jacobian_norms(resolved.layer, resolved.options, X, options);
    if (!std::isfinite(norms.two.estimate) || (norms.has_inf && !std::isfinite(norms.inf.value)))
      throw InputError(name,
                       "the Jacobian norms of the layer at these tokens are not finite doubles "
                       "(the scores leave the double range): rescale the tokens or the layer");
    const Sensitivity s = sensitivity(resolved, X, args, options.spectral, progress);
    const RegionResults g = region_results(resolved, X, args, norms, progress);
    if (args.json) {
      nlohmann::json one = local_json(resolved, X, args, norms, s, g, progress_state->seconds());
      if (!inputs.batched) {
        std::cout << json_text(one) << "\n";
      } else {
        one["index"] = b;
        batch_json.push_back(std::move(one));
      }
    } else {
      if (inputs.batched) std::cout << "input " << b << " (index into the batch of " << count << ")\n";
      print_human(resolved, X, args, norms, s);
      print_region(g, norms);
    }
  }
  // A batch: one object holding the inputs' objects in order (each the same as for that input alone).
  if (args.json && inputs.batched)
    std::cout << json_text(nlohmann::json{{"batch", count}, {"inputs", batch_json}}) << "\n";
  result = exit_ok;
}

}  // namespace

void add_local_command(CLI::App& app, int& result) {
  auto args = std::make_shared<LocalArgs>();
  auto* cmd = app.add_subcommand(
      "local",
      "Local Lipschitz constant ||J(X)|| (2 and inf norm) and local sensitivity delta(X, eps) at an input");
  add_layer_options(cmd, args->layer);
  cmd->add_option("--input", args->input,
                  "Tokens X (n x d), or a batch (B x n x d: each input analysed on its own): FILE.npy, "
                  "FILE.npz[:NAME], FILE.safetensors[:NAME]")
      ->required();
  cmd->add_option("--epsilon", args->epsilon,
                  "Radius of the Frobenius ball of perturbations for delta (default 0.1)")
      ->check(positive());
  cmd->add_flag("--certify", args->certify,
                "Also certify ||J||_inf (enclosure), ||J||_2 from above (n*d <= --dense-limit) and delta");
  cmd->add_flag("--estimate-only", args->estimate_only,
                "Skip every interval evaluation (no certified lower bound on ||J||_2; faster at large n)");
  cmd->add_flag("--norms-only", args->norms_only,
                "Only the Jacobian norms (and --ball/--box regions): skip the local sensitivity delta, whose "
                "certification dominates at large n*d");
  cmd->add_flag(
      "--lower-bound-only", args->lower_bound_only,
      "Only ||J||_2: the Lanczos estimate and its CERTIFIED lower bound (interval JVP at the witness, "
      "rounded down); skips ||J||_inf and delta, whose costs dominate at large n*d");
  cmd->add_option("--precision", args->precision, "Bits of every interval evaluation (>= 64, default 128)");
  cmd->add_option("--method", args->method, "Spectral method: lanczos (default) or power");
  cmd->add_option("--tolerance", args->tolerance,
                  "Relative accuracy target of the spectral norms (default 1e-10)")
      ->check(finite_in(0, 1, Ends::open));
  cmd->add_option("--max-iterations", args->max_iterations, "Lanczos / power steps at most (default 500)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--dense-limit", args->dense_limit,
                  "Largest n*d for the dense certified upper bound on ||J||_2 (default 256)")
      ->check(CLI::Range(0LL, 1LL << 20));
  CLI::Option* margin = cmd->add_option_function<double>(
                               "--margin", [args](double v) { args->margin = v; },
                               "Classification margin m: report the radius with sqrt(2) L delta(X, eps) < m "
                               "(havens.certified_radius)")
                            ->check(positive());
  cmd->add_option("--readout-lipschitz", args->readout_lipschitz,
                  "Lipschitz constant L > 0 of the readout from the layer output to the logits, for --margin "
                  "(default 1)")
      ->check(positive())
      ->needs(margin);
  CLI::Option* ball = cmd->add_option_function<double>(
                             "--ball", [args](double v) { args->ball = v; },
                             "Certified sup of ||J||_2 and ||J||_inf over the Frobenius ball B(X, EPS)")
                          ->check(positive());
  cmd->add_option_function<double>(
         "--box", [args](double v) { args->box = v; },
         "Certified sup of ||J||_2 and ||J||_inf over the box |X' - X| <= R (every entry)")
      ->check(positive())
      ->excludes(ball);
  cmd->add_option("--region-limit", args->region_limit,
                  "Largest n*d for the region enclosure (dense interval64 Jacobian; default 4096)")
      ->check(CLI::Range(1LL, 1LL << 16));
  cmd->add_option("--region-pieces", args->region_pieces,
                  "Segment pieces M of the region's second-order forms: tighter at large radii, M times the "
                  "passes (default: automatic by n*d, 4 to 16 where n*d <= 128, else 1)")
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
