// particles.usa_energy (docs/math/attention.md#sphere-particles): along (USA) with Q = K = V = I on
// (S^{d−1})^n the
// interaction energy E_β(X) = (1/(2βn²)) Σ_ij e^{β⟨x_i, x_j⟩} satisfies dE/dt = n Σ_i ‖grad_i E‖² ≥ 0, and it
// is non-decreasing along RK4 trajectories with a small step.
#include <cmath>

#include "common.hpp"
#include "layout.hpp"

namespace regatta::proofs::claims {

namespace {

/// Point: k = {n, d, steps}; x = (X raw (n×d), β, step factor c); rows are normalised to the sphere in the
/// scalar type and the RK4 step is dt = c e^{−β} (the field has magnitude up to e^β).
template <class S>
S energy(const Matrix<S>& X, const S& beta) {
  using std::exp;
  const long n = X.rows();
  S total(0);
  for (long i = 0; i < n; ++i)
    for (long j = 0; j < n; ++j) total += exp(beta * X.row(i).dot(X.row(j)));
  const S nn = lift<S>(static_cast<double>(n));
  return total / (S(2) * beta * nn * nn);
}

/// (USA): ẋ_i = P⊥_{x_i}((1/n) Σ_j e^{β⟨x_i, x_j⟩} x_j), P⊥_x y = y − ⟨x, y⟩ x.
template <class S>
Matrix<S> field(const Matrix<S>& X, const S& beta) {
  using std::exp;
  const long n = X.rows(), d = X.cols();
  const S nn = lift<S>(static_cast<double>(n));
  Matrix<S> out(n, d);
  for (long i = 0; i < n; ++i) {
    Vector<S> y = Vector<S>::Zero(d);
    for (long j = 0; j < n; ++j) y += exp(beta * X.row(i).dot(X.row(j))) * Vector<S>(X.row(j).transpose());
    y /= nn;
    const S proj = X.row(i).dot(y);
    out.row(i) = (y - proj * Vector<S>(X.row(i).transpose())).transpose();
  }
  return out;
}

/// Euclidean gradient of E_β: ∇_i E = (1/n²) Σ_j e^{β⟨x_i, x_j⟩} x_j (the two symmetric terms of the sum).
template <class S>
Matrix<S> energy_gradient(const Matrix<S>& X, const S& beta) {
  using std::exp;
  const long n = X.rows(), d = X.cols();
  const S nn = lift<S>(static_cast<double>(n));
  Matrix<S> g = Matrix<S>::Zero(n, d);
  for (long i = 0; i < n; ++i)
    for (long j = 0; j < n; ++j) g.row(i) += exp(beta * X.row(i).dot(X.row(j))) * X.row(j);
  return g / (nn * nn);
}

template <class S>
Matrix<S> normalised_rows(const Matrix<S>& X) {
  Matrix<S> out = X;
  for (long i = 0; i < X.rows(); ++i) out.row(i) /= num::euclidean_norm<S>(X.row(i));
  return out;
}

template <class S>
Matrix<S> rk4_step(const Matrix<S>& X, const S& beta, const S& dt) {
  const Matrix<S> k1 = field(X, beta);
  const Matrix<S> k2 = field(Matrix<S>(X + k1 * (dt / S(2))), beta);
  const Matrix<S> k3 = field(Matrix<S>(X + k2 * (dt / S(2))), beta);
  const Matrix<S> k4 = field(Matrix<S>(X + k3 * dt), beta);
  return X + (k1 + k2 * S(2) + k3 * S(2) + k4) * (dt / S(6));
}

class UsaEnergy final : public ClaimBase<UsaEnergy> {
 public:
  UsaEnergy() {
    info_.id = "particles.usa_energy";
    info_.statement =
        "Along (USA) with Q = K = V = I on (S^{d-1})^n, dE_beta/dt = n sum_i ||grad_i E_beta||^2 >= 0; "
        "numerically "
        "E_beta is non-decreasing along RK4 trajectories with a small step.";
    info_.latex =
        "$\\frac d{dt}\\mathsf E_\\beta=n\\sum_i\\|\\mathrm{grad}_i\\mathsf E_\\beta\\|^2\\ge0$, "
        "$\\mathsf E_\\beta=\\frac1{2\\beta n^2}\\sum_{i,j}e^{\\beta\\langle x_i,x_j\\rangle}$";
    info_.source = "derived";
    info_.hypotheses = {"tokens on the unit sphere", "RK4 step dt = c e^(-beta), c <= 0.05, 10 steps"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("min over the 10 RK4 steps: E(X_k) <= E(X_(k+1))"),
                   equal("at X_0: sum_i <nabla_i E, xdot_i> = n sum_i ||P_perp nabla_i E||^2")};
    info_.families = {"paper"};
    info_.notes =
        "The trajectory is computed in the scalar type (interval: enclosures of the exact RK4 iterates). "
        "Family: n = 64, d = 3, β = 1 (the setting of the authors' experiments).";
    info_.evaluated_at =
        "The energies are evaluated at the iterates of 10 RK4 steps computed in the scalar type from the "
        "normalised start; for interval every step is an enclosure, so E is enclosed at the exact RK4 "
        "iterates of the exact start and step (the trajectory is the RK4 one, not the exact flow).";
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  const Keys keys{"n", "d", "steps"};
  static Layout layout(long n, long d) { return Layout().add("X", n, d).add("beta", 1).add("c", 1); }
  Layout layout(const Point& p) const { return layout(keys.of(p, "n"), keys.of(p, "d")); }
  Point sample(Rng& rng) const override {
    Point p;
    const long n = rng.integer(2, 12), d = rng.integer(2, 4);
    p.k = {n, d, 10};
    const Layout l = layout(n, d);
    l.fill(p.x, "X", [&] { return rng.normal(); });
    l.fill(p.x, "beta", [&] { return std::pow(10.0, rng.uniform(-1, 1)); });
    l.fill(p.x, "c", [&] { return std::pow(10.0, rng.uniform(-3, std::log10(0.05))); });
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "paper") {
      Rng rng(64);
      Point p;
      p.k = {64, 3, 10};
      const Layout l = layout(64, 3);
      l.fill(p.x, "X", [&] { return rng.normal(); });
      l.fill(p.x, "beta", {1.0});
      l.fill(p.x, "c", {0.05});
      out.push_back(p);
    }
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::exp;
    const long n = keys.of(pt, "n"), steps = keys.of(pt, "steps");
    const Layout l = layout(pt);
    l.check(pt);
    const double beta_d = l.raw(pt, "beta"), c = l.raw(pt, "c");
    if (!(beta_d > 0) || !(c > 0) || c > 0.05)
      throw InputError("point", "beta > 0 and 0 < c <= 0.05 required");
    const Matrix<S> X0 = normalised_rows(l.matrix<S>(pt, "X"));
    const S beta = lift<S>(beta_d);
    // Identity at X_0.
    const Matrix<S> g = energy_gradient(X0, beta), v = field(X0, beta);
    S lhs(0), rhs(0);
    for (long i = 0; i < n; ++i) {
      lhs += g.row(i).dot(v.row(i));
      const S proj = X0.row(i).dot(g.row(i));
      const Matrix<S> pg = g.row(i) - proj * X0.row(i);
      rhs += num::sq<S>(num::frobenius<S>(pg));
    }
    rhs *= lift<S>(static_cast<double>(n));
    // Energy along the trajectory: the worst consecutive pair. The RK4 steps run in S, so for interval X_k
    // encloses the exact k-th RK4 iterate from the exact normalised start with the exact step c e^(-beta).
    std::vector<S> E;
    Matrix<S> X = X0;
    const S dt = lift<S>(c) * exp(-beta);
    for (long k = 0; k <= steps; ++k) {
      E.push_back(energy(X, beta));
      if (k < steps) X = rk4_step(X, beta, dt);
    }
    std::size_t worst = 0;
    double worst_gap = INFINITY;
    for (std::size_t k = 0; k + 1 < E.size(); ++k) {
      const double gap = scalar_traits<S>::to_double(scalar_traits<S>::lower(E[k + 1])) -
                         scalar_traits<S>::to_double(scalar_traits<S>::upper(E[k]));
      if (gap < worst_gap) {
        worst_gap = gap;
        worst = k;
      }
    }
    return {le<S>(E[worst], E[worst + 1]), eq<S>(lhs, rhs)};
  }

 private:
  ClaimInfo info_;
};

}  // namespace

REGATTA_REGISTER_CLAIM(UsaEnergy);

}  // namespace regatta::proofs::claims
