// Certified W_p bracket (docs/math/transport.md#cert-weights to docs/math/transport.md#cert-report) with
// directed MPFR roundings.
//
// Every quantity below is computed as a one-sided bound by choosing the rounding direction of each
// operation: |x - y| rounded toward zero (a lower bound of the magnitude) or away from zero (an upper bound),
// then squares, sums, roots and powers rounded down (C^lo) or up (C^hi); the exponent p/2 is exact for a
// binary double p. Per-pair operations run at 53 bits (each still a rigorous one-sided bound), sums of n + m
// terms at 256 bits. Inputs (binary doubles) are exact.
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <regatta/measures/wasserstein.hpp>

namespace regatta::measures {

namespace detail {
void check_exponent(double p);
void check_same_dimension(Eigen::Index mu_dim, Eigen::Index nu_dim);
int homogeneity_shift(const Matrix<double>& x, const Matrix<double>& y);
Matrix<double> homogeneity_scaled(const Matrix<double>& z, int shift);
}  // namespace detail

namespace {

using Index = Eigen::Index;
constexpr mpfr_prec_t pair_bits = 53;
constexpr mpfr_prec_t sum_bits = 256;

class Real {
 public:
  explicit Real(mpfr_prec_t bits) {
    mpfr_init2(x_, bits);
    mpfr_set_zero(x_, 1);
  }
  ~Real() { mpfr_clear(x_); }
  Real(const Real&) = delete;
  Real& operator=(const Real&) = delete;
  operator mpfr_ptr() { return x_; }
  operator mpfr_srcptr() const { return x_; }

 private:
  mpfr_t x_;
};

// Scratch registers for one cost evaluation.
struct CostScratch {
  Real t{pair_bits}, acc{pair_bits}, half_p{pair_bits};
  explicit CostScratch(double p) { mpfr_set_d(half_p, p / 2, MPFR_RNDN); }  // exact: p / 2 of a double
};

// out = C^lo (lower = true) or C^hi of ||x - y||^p, rounded in that direction (out at any precision).
void pair_cost(mpfr_ptr out, const double* x, const double* y, Index d, double p, bool lower,
               CostScratch& w) {
  const mpfr_rnd_t dir = lower ? MPFR_RNDD : MPFR_RNDU;
  mpfr_set_zero(w.acc, 1);
  for (Index k = 0; k < d; ++k) {
    mpfr_set_d(w.t, x[k], MPFR_RNDN);  // exact
    mpfr_sub_d(w.t, w.t, y[k], lower ? MPFR_RNDZ : MPFR_RNDA);
    mpfr_sqr(w.t, w.t, dir);
    mpfr_add(w.acc, w.acc, w.t, dir);
  }
  if (p == 2)
    mpfr_set(out, w.acc, dir);
  else if (p == 1)
    mpfr_sqrt(out, w.acc, dir);
  else
    mpfr_pow(out, w.acc, w.half_p, dir);
}

// Upper bound of max_i ||x_i - c|| over the atoms of positive weight (weight_hi[i] > 0), for a double centre
// c.
void radius_up(mpfr_ptr out, const Matrix<double>& x, const std::vector<double>& weight_hi,
               const Eigen::RowVectorXd& c) {
  CostScratch w(2);
  Real r(sum_bits);
  mpfr_set_zero(out, 1);
  for (Index i = 0; i < x.rows(); ++i) {
    if (weight_hi[std::size_t(i)] == 0) continue;
    pair_cost(r, x.row(i).data(), c.data(), x.cols(), 1, false, w);
    mpfr_max(out, out, r, MPFR_RNDU);
  }
}

// Interval-normalised weights: lo_i <= a_i / sum a <= hi_i.
void normalised_weights(const Vector<double>& a, std::vector<double>& lo, std::vector<double>& hi) {
  Real s_lo(sum_bits), s_hi(sum_bits), q(pair_bits);
  for (Index i = 0; i < a.size(); ++i) {
    mpfr_add_d(s_lo, s_lo, a(i), MPFR_RNDD);
    mpfr_add_d(s_hi, s_hi, a(i), MPFR_RNDU);
  }
  lo.resize(std::size_t(a.size()));
  hi.resize(std::size_t(a.size()));
  for (Index i = 0; i < a.size(); ++i) {
    mpfr_d_div(q, a(i), s_hi, MPFR_RNDD);
    lo[std::size_t(i)] = mpfr_get_d(q, MPFR_RNDD);
    mpfr_d_div(q, a(i), s_lo, MPFR_RNDU);
    hi[std::size_t(i)] = mpfr_get_d(q, MPFR_RNDU);
  }
}

// out = t^(1/p) rounded in direction dir (t >= 0).
void root_p(mpfr_ptr out, mpfr_srcptr t, double p, mpfr_rnd_t dir) {
  if (p == std::floor(p) && p <= 1e6) {
    mpfr_rootn_ui(out, t, static_cast<unsigned long>(p), dir);
    return;
  }
  // 1/p is not exact: t^e is monotone in e, so take the worse of the two exponent endpoints.
  Real e(sum_bits), r1(sum_bits), r2(sum_bits);
  mpfr_set_d(e, p, MPFR_RNDN);
  mpfr_ui_div(e, 1, e, MPFR_RNDD);
  mpfr_pow(r1, t, e, dir);
  mpfr_set_d(e, p, MPFR_RNDN);
  mpfr_ui_div(e, 1, e, MPFR_RNDU);
  mpfr_pow(r2, t, e, dir);
  if (dir == MPFR_RNDD)
    mpfr_min(out, r1, r2, MPFR_RNDD);
  else
    mpfr_max(out, r1, r2, MPFR_RNDU);
}

void check_plan(const TransportPlan& plan, Index n, Index m) {
  if (plan.u.size() != n)
    throw InputError("plan", "u has " + std::to_string(plan.u.size()) + " entries, mu has " +
                                 std::to_string(n) + " atoms");
  for (Index i = 0; i < n; ++i)
    if (!std::isfinite(plan.u(i))) throw InputError("plan", "u(" + std::to_string(i) + ") is not finite");
  for (const Coupling& c : plan.entries) {
    if (c.i < 0 || c.i >= n || c.j < 0 || c.j >= m)
      throw InputError("plan",
                       "entry (" + std::to_string(c.i) + ", " + std::to_string(c.j) + ") is out of range");
    if (!std::isfinite(c.mass) || c.mass < 0)
      throw InputError("plan", "entry (" + std::to_string(c.i) + ", " + std::to_string(c.j) +
                                   ") has a negative or non-finite mass");
  }
}

// g_j = down(min_i (C^lo_ij - f_i)) for every j (the c-transform of f, rounded down), parallel over j. The
// minimum runs over the atoms i of positive weight (x_weight_hi[i] > 0) only: dual feasibility is needed on
// the supports alone, and a far zero-weight atom would otherwise tie g to a potential of its cost scale.
std::vector<double> c_transform_down(const Matrix<double>& x, const Matrix<double>& y, double p,
                                     const std::vector<double>& f, const std::vector<double>& x_weight_hi) {
  const Index n = x.rows(), m = y.rows(), d = x.cols();
  std::vector<double> g(static_cast<std::size_t>(m));
#pragma omp parallel
  {
    CostScratch w(p);
    Real c(pair_bits), r(pair_bits);
#pragma omp for schedule(dynamic, \
                         4)  // dynamic: a descheduled thread on a loaded machine does not hold the rest
    for (Index j = 0; j < m; ++j) {
      double best = std::numeric_limits<double>::infinity();
      for (Index i = 0; i < n; ++i) {
        if (x_weight_hi[std::size_t(i)] == 0) continue;
        pair_cost(c, x.row(i).data(), y.row(j).data(), d, p, true, w);
        mpfr_sub_d(r, c, f[std::size_t(i)], MPFR_RNDD);
        best = std::min(best, mpfr_get_d(r, MPFR_RNDD));  // exact: r has 53 bits
      }
      g[std::size_t(j)] = best;
    }
  }
  return g;
}

// down(sum_i w_i f_i) with w_i the lower (f_i >= 0) or upper (f_i < 0) weight bound.
void dual_value_down(mpfr_ptr acc, const std::vector<double>& lo, const std::vector<double>& hi,
                     const std::vector<double>& f) {
  Real t(sum_bits);
  for (std::size_t i = 0; i < f.size(); ++i) {
    mpfr_set_d(t, f[i] >= 0 ? lo[i] : hi[i], MPFR_RNDN);
    mpfr_mul_d(t, t, f[i], MPFR_RNDD);
    mpfr_add(acc, acc, t, MPFR_RNDD);
  }
}

// Shifts f (f + c, g - c leaves the dual value unchanged in exact arithmetic) so that its values on the
// support (weight_hi > 0) are centred on 0: the rounding errors of the c-transform scale with |f|.
void centre_on_support(std::vector<double>& f, const std::vector<double>& weight_hi) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (std::size_t i = 0; i < f.size(); ++i)
    if (weight_hi[i] > 0) {
      lo = std::min(lo, f[i]);
      hi = std::max(hi, f[i]);
    }
  if (!(lo <= hi)) return;
  const double centre = lo + (hi - lo) / 2;
  for (double& v : f) v -= centre;
}

// Potentials u rebuilt from the plan: u_i + v_j = C_ij (double) along the entries of positive mass between
// atoms of positive weight, each connected component rooted at u = 0 (breadth-first; on a cycle the first
// assignment stays). Atoms no such entry reaches keep u = 0. Any u is valid input to the bound; these have
// the magnitude of the costs on the supports.
std::vector<double> support_potentials(const Matrix<double>& x, const Matrix<double>& y, double p,
                                       const TransportPlan& plan, const std::vector<double>& a_hi,
                                       const std::vector<double>& b_hi) {
  const Index n = x.rows(), m = y.rows();
  std::vector<std::vector<std::pair<Index, double>>> rows(static_cast<std::size_t>(n)),
      cols(static_cast<std::size_t>(m));
  for (const Coupling& c : plan.entries) {
    if (!(c.mass > 0) || a_hi[std::size_t(c.i)] == 0 || b_hi[std::size_t(c.j)] == 0) continue;
    const double cost = std::pow((x.row(c.i) - y.row(c.j)).norm(), p);
    rows[std::size_t(c.i)].push_back({c.j, cost});
    cols[std::size_t(c.j)].push_back({c.i, cost});
  }
  std::vector<double> u(static_cast<std::size_t>(n), 0.0), v(static_cast<std::size_t>(m), 0.0);
  std::vector<char> seen_u(static_cast<std::size_t>(n), 0), seen_v(static_cast<std::size_t>(m), 0);
  std::vector<std::pair<bool, Index>> queue;  // (is a row of x, index)
  for (Index root = 0; root < n; ++root) {
    if (seen_u[std::size_t(root)]) continue;
    seen_u[std::size_t(root)] = 1;
    queue.assign(1, {true, root});
    for (std::size_t head = 0; head < queue.size(); ++head) {
      const auto [is_row, k] = queue[head];
      for (const auto& [other, cost] : is_row ? rows[std::size_t(k)] : cols[std::size_t(k)]) {
        std::vector<char>& seen = is_row ? seen_v : seen_u;
        if (seen[std::size_t(other)]) continue;
        seen[std::size_t(other)] = 1;
        if (is_row)
          v[std::size_t(other)] = cost - u[std::size_t(k)];
        else
          u[std::size_t(other)] = cost - v[std::size_t(k)];
        queue.push_back({!is_row, other});
      }
    }
  }
  return u;
}

// Upper bound of the cost of completing the sub-coupling F'' (row sums <= a, column sums <= b) into a
// coupling of the normalised weights, by the product coupling of the deficits r_i = a_i - sum_j F''_ij and
// c_j = b_j - sum_i F''_ij (both >= 0, of equal total s = 1 - sum F''): row i of r c^T / s costs at most
// r_i max_{j : c_j > 0} C_ij, column j at most c_j max_{i : r_i > 0} C_ij, so the completion costs at most
// the smaller of the two sums. Deficits are bounded above (r_up_i >= r_i, and c_j > 0 only where
// c_up_j > 0), so both sums are rigorous. A far atom of tiny weight then enters with its own tiny deficit
// instead of the whole missing mass times the diameter of the supports.
void completion_up(mpfr_ptr out, const Matrix<double>& x, const Matrix<double>& y, double p,
                   const std::vector<Coupling>& entries, const std::vector<std::unique_ptr<Real>>& mass,
                   const std::vector<double>& a_hi, const std::vector<double>& b_hi) {
  const Index n = x.rows(), m = y.rows(), d = x.cols();
  auto deficits = [&](bool rows, const std::vector<double>& hi) {
    const Index count = rows ? n : m;
    std::vector<std::unique_ptr<Real>> sum;
    sum.reserve(std::size_t(count));
    for (Index k = 0; k < count; ++k) sum.push_back(std::make_unique<Real>(sum_bits));
    for (std::size_t e = 0; e < entries.size(); ++e)
      mpfr_add(*sum[std::size_t(rows ? entries[e].i : entries[e].j)],
               *sum[std::size_t(rows ? entries[e].i : entries[e].j)], *mass[e], MPFR_RNDD);
    std::vector<double> up(static_cast<std::size_t>(count), 0.0);
    Real t(sum_bits);
    for (Index k = 0; k < count; ++k) {
      if (hi[std::size_t(k)] == 0) continue;  // zero weight: no mass in or out, deficit exactly 0
      mpfr_d_sub(t, hi[std::size_t(k)], *sum[std::size_t(k)], MPFR_RNDU);
      up[std::size_t(k)] = std::max(0.0, mpfr_get_d(t, MPFR_RNDU));
    }
    return up;
  };
  const std::vector<double> r = deficits(true, a_hi), c = deficits(false, b_hi);
  std::vector<double> row_max(static_cast<std::size_t>(n), 0.0), col_max(static_cast<std::size_t>(m), 0.0);
  {
    CostScratch w(p);
    Real cost(pair_bits);
    for (Index i = 0; i < n; ++i)
      for (Index j = 0; j < m; ++j) {
        if (r[std::size_t(i)] == 0 || c[std::size_t(j)] == 0)
          continue;  // the product coupling has no mass here
        pair_cost(cost, x.row(i).data(), y.row(j).data(), d, p, false, w);
        const double hi = mpfr_get_d(cost, MPFR_RNDU);
        row_max[std::size_t(i)] = std::max(row_max[std::size_t(i)], hi);
        col_max[std::size_t(j)] = std::max(col_max[std::size_t(j)], hi);
      }
  }
  Real by_rows(sum_bits), by_cols(sum_bits), t(sum_bits);
  for (Index i = 0; i < n; ++i) {
    mpfr_set_d(t, r[std::size_t(i)], MPFR_RNDN);
    mpfr_mul_d(t, t, row_max[std::size_t(i)], MPFR_RNDU);
    mpfr_add(by_rows, by_rows, t, MPFR_RNDU);
  }
  for (Index j = 0; j < m; ++j) {
    mpfr_set_d(t, c[std::size_t(j)], MPFR_RNDN);
    mpfr_mul_d(t, t, col_max[std::size_t(j)], MPFR_RNDU);
    mpfr_add(by_cols, by_cols, t, MPFR_RNDU);
  }
  mpfr_min(out, by_rows, by_cols, MPFR_RNDU);
}

// Certified lower_cost <= W_p^p(mu, nu) <= upper_cost for atoms x, y (exact doubles) and weights a, b, from
// the plan's entries and u, a candidate potential (any values).
void bracket_of(const Matrix<double>& x, const Matrix<double>& y, const Vector<double>& a,
                const Vector<double>& b, double p, const TransportPlan& plan, const std::vector<double>& u,
                bool improve, Real& lower_cost, Real& upper_cost) {
  const Index n = x.rows(), m = y.rows(), d = x.cols();
  std::vector<double> a_lo, a_hi, b_lo, b_hi;
  normalised_weights(a, a_lo, a_hi);
  normalised_weights(b, b_lo, b_hi);

  // ---- lower bound (docs/math/transport.md#cert-lower): potentials f, g = their c-transform rounded down,
  // optionally f improved
  // --------- Any f gives a valid bound. Two candidates, the larger bound kept: plan.u, and potentials
  // rebuilt from the plan's entries on the supports (u_i + v_j = C_ij along them). The rebuilt ones matter
  // when the solver's potentials carry the cost scale of far zero-weight atoms: then W_p^p far below that
  // scale would lose its relative accuracy to the rounding of potentials of magnitude 1.
  Real candidate(sum_bits);
  mpfr_set_inf(lower_cost, -1);
  for (std::vector<double> f : {u, support_potentials(x, y, p, plan, a_hi, b_hi)}) {
    centre_on_support(f, a_hi);
    const std::vector<double> g = c_transform_down(x, y, p, f, a_hi);
    if (improve) {
      const std::vector<double> f2 = c_transform_down(y, x, p, g, b_hi);  // C is symmetric in (x, y)
      for (Index i = 0; i < n; ++i) f[std::size_t(i)] = std::max(f[std::size_t(i)], f2[std::size_t(i)]);
    }
    mpfr_set_zero(candidate, 1);
    dual_value_down(candidate, a_lo, a_hi, f);
    dual_value_down(candidate, b_lo, b_hi, g);
    mpfr_max(lower_cost, lower_cost, candidate, MPFR_RNDD);
  }

  // ---- upper bound (docs/math/transport.md#cert-upper): scale the plan into an exact sub-coupling F'' and
  // complete it ---------------
  Real t(sum_bits), q(sum_bits), one(sum_bits);
  mpfr_set_ui(one, 1, MPFR_RNDN);
  const std::size_t k_entries = plan.entries.size();
  std::vector<std::unique_ptr<Real>> storage;  // F, scaled in place to F' and then F''
  storage.reserve(k_entries);
  for (const Coupling& c : plan.entries) {
    storage.push_back(std::make_unique<Real>(sum_bits));
    mpfr_set_d(*storage.back(), c.mass, MPFR_RNDN);
  }
  auto scale_down = [&](bool rows_pass) {
    const Index count = rows_pass ? n : m;
    const std::vector<double>& target = rows_pass ? a_lo : b_lo;
    std::vector<std::unique_ptr<Real>> sums;
    sums.reserve(std::size_t(count));
    for (Index k = 0; k < count; ++k) sums.push_back(std::make_unique<Real>(sum_bits));
    for (std::size_t e = 0; e < k_entries; ++e) {
      const Index k = rows_pass ? plan.entries[e].i : plan.entries[e].j;
      mpfr_add(*sums[std::size_t(k)], *sums[std::size_t(k)], *storage[e], MPFR_RNDU);
    }
    for (Index k = 0; k < count; ++k) {  // factor_k = min(1, down(target_k / up(sum_k))), stored in sums
      Real& s = *sums[std::size_t(k)];
      if (mpfr_zero_p(static_cast<mpfr_srcptr>(s))) {
        mpfr_set_ui(s, 1, MPFR_RNDN);
        continue;
      }
      mpfr_d_div(s, target[std::size_t(k)], s, MPFR_RNDD);
      mpfr_min(s, s, one, MPFR_RNDD);
    }
    for (std::size_t e = 0; e < k_entries; ++e) {
      const Index k = rows_pass ? plan.entries[e].i : plan.entries[e].j;
      mpfr_mul(*storage[e], *storage[e], *sums[std::size_t(k)], MPFR_RNDD);
    }
  };
  scale_down(true);
  scale_down(false);
  Real transported(sum_bits), c_hi(sum_bits);
  mpfr_set_zero(upper_cost, 1);
  {
    CostScratch w(p);
    for (std::size_t e = 0; e < k_entries; ++e) {
      mpfr_add(transported, transported, *storage[e], MPFR_RNDD);
      pair_cost(c_hi, x.row(plan.entries[e].i).data(), y.row(plan.entries[e].j).data(), d, p, false, w);
      mpfr_mul(t, *storage[e], c_hi, MPFR_RNDU);
      mpfr_add(upper_cost, upper_cost, t, MPFR_RNDU);
    }
  }
  Real missing(sum_bits);  // s = up(1 - down(sum F''))
  mpfr_sub(missing, one, transported, MPFR_RNDU);
  if (mpfr_sgn(static_cast<mpfr_srcptr>(missing)) > 0) {
    // Two valid completions, the cheaper bound kept: the missing mass moved across the supports, at a cost of
    // at most (max ||x_i - c|| + max ||y_j - c||)^p for the centre c = mean of mu's atoms (O(n + m)); and the
    // product coupling of the deficits (completion_up, O(nm)).
    const Eigen::RowVectorXd centre = x.colwise().mean();
    Real rx(sum_bits), ry(sum_bits), s_half(sum_bits), by_deficits(sum_bits);
    radius_up(rx, x, a_hi, centre);
    radius_up(ry, y, b_hi, centre);
    mpfr_add(rx, rx, ry, MPFR_RNDU);
    mpfr_set_d(s_half, p, MPFR_RNDN);
    mpfr_pow(rx, rx, s_half, MPFR_RNDU);
    mpfr_mul(t, missing, rx, MPFR_RNDU);
    // The O(nm) bound only where the O(n + m) one is not already negligible (1e-14 of the transported cost,
    // below the bracket's own rounding): a far atom of tiny weight, not the rounding of ordinary supports.
    Real negligible(sum_bits);
    mpfr_mul_d(negligible, upper_cost, 1e-14, MPFR_RNDD);
    if (mpfr_greater_p(t, negligible)) {
      completion_up(by_deficits, x, y, p, plan.entries, storage, a_hi, b_hi);
      mpfr_min(t, t, by_deficits, MPFR_RNDU);
    }
    mpfr_add(upper_cost, upper_cost, t, MPFR_RNDU);
  }
}

}  // namespace

CertifiedBracket certify_wasserstein(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu,
                                     double p, const TransportPlan& plan, bool improve) {
  detail::check_exponent(p);
  detail::check_same_dimension(mu.dim(), nu.dim());
  const Index n = mu.size(), m = nu.size();
  check_plan(plan, n, m);
  // W_p(2^k mu, 2^k nu) = 2^k W_p(mu, nu), exactly representable: bracket the scaled problem, where the
  // costs neither underflow nor overflow, and divide its ends by 2^k (wasserstein.cpp, homogeneity_shift).
  const int shift = detail::homogeneity_shift(mu.atoms(), nu.atoms());
  const Matrix<double> x = shift ? detail::homogeneity_scaled(mu.atoms(), shift) : mu.atoms();
  const Matrix<double> y = shift ? detail::homogeneity_scaled(nu.atoms(), shift) : nu.atoms();
  // The solver's potentials scale like the costs (2^(shift p)); any values are a valid candidate.
  std::vector<double> u(plan.u.data(), plan.u.data() + n);
  const double cost_scale = std::pow(2.0, double(shift) * p);
  for (double& v : u) v = std::isfinite(v * cost_scale) ? v * cost_scale : 0.0;

  Real lower_cost(sum_bits), upper_cost(sum_bits);
  bracket_of(x, y, mu.weights(), nu.weights(), p, plan, u, improve, lower_cost, upper_cost);

  // ---- report (docs/math/transport.md#cert-report), undoing the scaling: W = W_scaled 2^-shift (exact in
  // MPFR), W^p = W^p_scaled
  // 2^(-shift p), with 2^(-shift p) rounded in the safe direction when shift p is not an integer.
  CertifiedBracket out;
  Real lo(sum_bits), hi(sum_bits), zero(sum_bits), q(sum_bits);
  mpfr_max(q, lower_cost, zero, MPFR_RNDD);
  root_p(lo, q, p, MPFR_RNDD);
  root_p(hi, upper_cost, p, MPFR_RNDU);
  mpfr_div_2si(lo, lo, shift, MPFR_RNDD);
  mpfr_div_2si(hi, hi, shift, MPFR_RNDU);
  out.lower = mpfr_get_d(lo, MPFR_RNDD);
  out.upper = mpfr_get_d(hi, MPFR_RNDU);
  const double scaled_exponent = double(shift) * p;
  if (scaled_exponent == std::floor(scaled_exponent) && std::abs(scaled_exponent) < 1e9) {
    mpfr_div_2si(lower_cost, lower_cost, long(scaled_exponent), MPFR_RNDD);
    mpfr_div_2si(upper_cost, upper_cost, long(scaled_exponent), MPFR_RNDU);
  } else {  // divide by up(2^(shift p)) for the lower end (when positive) and by down(2^(shift p)) for the
            // upper
    Real f_lo(sum_bits), f_hi(sum_bits), e_lo(sum_bits), e_hi(sum_bits);
    mpfr_set_si(e_lo, shift, MPFR_RNDN);
    mpfr_mul_d(e_lo, e_lo, p, MPFR_RNDD);
    mpfr_set_si(e_hi, shift, MPFR_RNDN);
    mpfr_mul_d(e_hi, e_hi, p, MPFR_RNDU);
    mpfr_exp2(f_lo, e_lo, MPFR_RNDD);
    mpfr_exp2(f_hi, e_hi, MPFR_RNDU);
    mpfr_div(lower_cost, lower_cost, mpfr_sgn(static_cast<mpfr_srcptr>(lower_cost)) >= 0 ? f_hi : f_lo,
             MPFR_RNDD);
    mpfr_div(upper_cost, upper_cost, f_lo, MPFR_RNDU);
  }
  out.cost_lower = mpfr_get_d(lower_cost, MPFR_RNDD);
  out.cost_upper = mpfr_get_d(upper_cost, MPFR_RNDU);
  out.certified =
      std::isfinite(out.lower) && std::isfinite(out.upper) && mpfr_lessequal_p(lower_cost, upper_cost);
  if (out.upper > 0)
    out.relative_width = (out.upper - out.lower) / out.upper;
  else
    out.relative_width = out.lower == out.upper ? 0.0 : std::numeric_limits<double>::infinity();
  return out;
}

}  // namespace regatta::measures
