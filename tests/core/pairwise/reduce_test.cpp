// regatta::pairwise::reduce computed several ways on corner-biased random problems:
//   blocked (reduce<double>, reduce<float>), generic (detail::reduce_generic<double>) and materialised
//   (reduce_materialized<double>) against reduce<mpfr> at 256 bits on the same, exactly converted, inputs;
//   reduce<interval> at 128 bits must enclose reduce<mpfr> at 512 bits, entry by entry;
//   invariants (rows of π sum to 1, convex hull, key permutation, translation of neg_sq_dist, causal row 0);
//   every InputError of validate(); log_kernel_matrix on a small case and its size limit.
//
// Derived tolerance (first order in u = eps<S>() = 2^(1−p), twice the unit roundoff, which also absorbs exp /
// pow / sqrt being accurate to one ulp rather than half). γ_k = k·u / (1 − k·u). Per row i, with J_i the
// visible keys (mask, finite ω_j), m_i = |J_i|, and the projected inputs x' = x·Q, y' = y·K of magnitudes
// ax = |x|·|Q|, ay = |y|·|K| (ax = |x| without a map; d_in the map's input width, 0 without maps; d' the
// projected width; k = d_in + d' + 2):
//   score error E^s_ij:
//     dot           γ_{k+1} · |scale| · Σ ax·ay                    (+1: scale multiplies X before the GEMM)
//     ‖x'−y'‖² = q  difference form, no map: γ_{d'+3} · q           (each difference and square rounded once)
//                   otherwise (maps, or the blocked expansion ‖x‖² − 2⟨x,y⟩ + ‖y‖², each term and the
//                   perturbation of x', y' by the map bounded by Σ(ax + ay)²):   E^q = 3·γ_{k+3} · Σ(ax +
//                   ay)²
//     neg_sq_dist   scale · E^q + u·|s|
//     neg_dist_pow  D = √q, ΔD = min(E^q / 2D, √E^q) + u·D,  scale · (p·(D + ΔD)^{p−1}·ΔD + 2u·D^p) + u·|s|
//   log-kernel error E_ij = E^s_ij + u·(|s_ij| + |ω_j|)           (the addition t = s + ω)
//   A_i = max_{j∈J_i} E_ij,  L_i = (|lse_i| + 2m_i + 2)·u           (LogSumExp's own bound, log_sum_exp.hpp)
//   lse:          |Δ| ≤ 2·(A_i + L_i)           (Δlse = Σ_j π_ij δ_ij ≤ max δ, plus the reduction)
//   out_i,c:      |Δ| ≤ 2·(2A_i + 2L_i + (m_i+2)u) · max_{j∈J_i} |v_jc|
//                 (π_ij(1 + δ_ij − Σπδ): a change ≤ 2A of every weight relative to the others; the lse-sized
//                 shift error 2L the same way; a sum of m_i non-negative weighted terms and one division)
//   feature_mean: the same with b;  cross / second moments: with |v_c b_k|, |b_c b_k| and one more u
//   expected_score: |Δ| ≤ 2·((2A_i + 2L_i + (m_i+3)u) · G_i + A_i), G_i = max_j |s_ij| (for the blocked
//                 neg_sq_dist, whose row constant scale‖x'‖² is added at the end, G_i = max_j
//                 scale·Σ(ax+ay)²)
// The factor 2 covers the neglected second-order terms (A_i ≤ 0.1 in every case here) and the evaluation of
// the bound itself in double.
//
// The cases, tolerance and references are in reduce_cases.hpp; the invariants in reduce_invariants_test.cpp,
// the input errors and log_kernel_matrix in reduce_errors_test.cpp.
#include <gtest/gtest.h>

#include "reduce_cases.hpp"

namespace regatta::pairwise {
namespace {

using namespace reduce_test;

TEST(PairwiseAgainstMpfr, BlockedDouble) {
  double worst = 0;
  for (const Fixture& fx : fixtures()) {
    Converted<double> p(fx.c);
    const Result<double> got = reduce<double>(p.problem, fx.c.kernel, fx.c.request);
    PrecisionGuard guard(256);
    worst = std::max(worst, expect_close("reduce<double> (blocked)", fx.c, got, fx.ref, Form::expanded));
  }
  RecordProperty("worst_error_over_tolerance", std::to_string(worst));
}

TEST(PairwiseAgainstMpfr, BlockedFloat) {
  double worst = 0;
  for (const Fixture& fx : fixtures()) {
    Converted<float> p(fx.c_float);
    const Result<float> got = reduce<float>(p.problem, fx.c_float.kernel, fx.c_float.request);
    PrecisionGuard guard(256);
    worst = std::max(worst,
                     expect_close("reduce<float> (blocked)", fx.c_float, got, fx.ref_float, Form::expanded));
  }
  RecordProperty("worst_error_over_tolerance", std::to_string(worst));
}

TEST(PairwiseAgainstMpfr, GenericDouble) {
  double worst = 0;
  for (const Fixture& fx : fixtures()) {
    // reduce_generic takes a validated problem with the maps applied: project in double first (the rounding
    // of the projection is part of the derived tolerance through d_in).
    const Case pc = projected(fx.c);
    Converted<double> p(pc);
    validate(p.problem, pc.kernel, pc.request);
    const Result<double> got = detail::reduce_generic<double>(p.problem, pc.kernel, pc.request);
    PrecisionGuard guard(256);
    worst = std::max(worst, expect_close("reduce_generic<double>", fx.c, got, fx.ref, Form::difference));
  }
  RecordProperty("worst_error_over_tolerance", std::to_string(worst));
}

TEST(PairwiseAgainstMpfr, MaterializedDouble) {
  double worst = 0;
  for (const Fixture& fx : fixtures()) {
    Converted<double> p(fx.c);
    const Result<double> got = reduce_materialized<double>(p.problem, fx.c.kernel, fx.c.request);
    PrecisionGuard guard(256);
    worst = std::max(worst, expect_close("reduce_materialized<double>", fx.c, got, fx.ref, Form::difference));
  }
  RecordProperty("worst_error_over_tolerance", std::to_string(worst));
}

TEST(PairwiseAgainstMpfr, MaterializedMpfrAgreesWithStreamed) {
  // Two independent 256-bit computations (streamed / materialised) agree to the mpfr tolerance.
  for (const Fixture& fx : fixtures()) {
    PrecisionGuard guard(256);
    Converted<mpfr> p(fx.c);
    const Result<mpfr> got = reduce_materialized<mpfr>(p.problem, fx.c.kernel, fx.c.request);
    expect_close("reduce_materialized<mpfr>", fx.c, got, fx.ref, Form::difference);
  }
}

TEST(PairwiseInterval, EnclosesMpfr512) {
  for (const Fixture& fx : fixtures()) {
    Result<mpfr> ref;
    {
      PrecisionGuard guard(512);
      Converted<mpfr> p(fx.c);
      ref = reduce<mpfr>(p.problem, fx.c.kernel, fx.c.request);
    }
    Result<interval> iv;
    {
      PrecisionGuard guard(128);
      Converted<interval> p(fx.c);
      iv = reduce<interval>(p.problem, fx.c.kernel, fx.c.request);
    }
    int failures = 0;
    for_each_entry(
        fx.c.request, iv, ref,
        [&](const std::string& name, Eigen::Index i, Eigen::Index k, const interval& x, const mpfr& r) {
          if (!contains(x, r) && failures++ < 4)
            ADD_FAILURE() << fx.c.name << ": interval " << name << "(" << i << ", " << k << ") = ["
                          << lower_bound(x) << ", " << upper_bound(x) << "] misses mpfr-512 " << r;
          // Not vacuous: far narrower than double rounding (128-bit operations on inputs of at most
          // 24 keys and logits of 1e4 lose at most ~30 of the 128 bits).
          const double width = scalar_traits<interval>::to_double(scalar_traits<interval>::width(x));
          const double magnitude = 1 + std::abs(scalar_traits<mpfr>::to_double(r));
          if (!(width <= std::ldexp(magnitude, -60)) && failures++ < 4)
            ADD_FAILURE() << fx.c.name << ": interval " << name << "(" << i << ", " << k
                          << ") is too wide: " << width;
        });
  }
}

}  // namespace
}  // namespace regatta::pairwise
