// `regatta local`'s output: the human text and the JSON object of one input (local_args.hpp).
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "json_output.hpp"
#include "local_args.hpp"
#include "numbers.hpp"

namespace regatta::cli::local_command {

namespace {

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

/// One labelled line: label padded to a column, value, and what the value is.
void line(const std::string& label, const std::string& value, const std::string& note) {
  std::cout << "  " << std::left << std::setw(26) << label << std::setw(18) << value << note << "\n";
}

}  // namespace

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

}  // namespace regatta::cli::local_command
