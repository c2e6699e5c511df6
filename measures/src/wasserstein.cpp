#include <regatta/measures/wasserstein.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include <regatta/core/random_matrix.hpp>

namespace regatta::measures {

namespace detail {
void check_exponent(double p) {
  if (!std::isfinite(p) || !(p >= 1)) throw InputError("p", "must be a finite number >= 1");
}
void check_same_dimension(Eigen::Index mu_dim, Eigen::Index nu_dim) {
  if (mu_dim != nu_dim)
    throw InputError("nu", "has dimension " + std::to_string(nu_dim) + ", mu has " + std::to_string(mu_dim));
}

// The power of two k that brings the largest coordinate magnitude of both supports into [1/2, 1), when every
// coordinate survives the round trip x 2^k 2^-k exactly; 0 otherwise (no scaling). W_p is homogeneous,
// W_p(2^k mu, 2^k nu) = 2^k W_p(mu, nu), so the solver and the certified bracket work on the scaled
// supports, where the costs ||x - y||^p neither underflow (coordinates of 1e-160, or distances of 1e-110
// at p = 3, whose W_p^p is below the smallest double) nor overflow, and divide by 2^k at the end.
int homogeneity_shift(const Matrix<double>& x, const Matrix<double>& y) {
  const double big =
      std::max(x.size() ? x.cwiseAbs().maxCoeff() : 0.0, y.size() ? y.cwiseAbs().maxCoeff() : 0.0);
  if (!(big > 0) || !std::isfinite(big)) return 0;
  int e = 0;
  std::frexp(big, &e);  // big = f 2^e with f in [1/2, 1)
  const int shift = -e;
  if (shift == 0) return 0;
  auto exact = [shift](const Matrix<double>& z) {
    for (Eigen::Index k = 0; k < z.size(); ++k)
      if (std::ldexp(std::ldexp(z.data()[k], shift), -shift) != z.data()[k]) return false;
    return true;
  };
  return exact(x) && exact(y) ? shift : 0;
}

Matrix<double> homogeneity_scaled(const Matrix<double>& z, int shift) {
  // Entry by entry: 2^shift itself leaves the double range for subnormal supports (shift > 1023), where
  // multiplying by it gave 0 · inf = NaN.
  return z.unaryExpr([shift](double v) { return std::ldexp(v, shift); });
}
}  // namespace detail

namespace {

template <class S>
auto sort_key(const S& x) {
  if constexpr (scalar_traits<S>::is_interval)
    return lower_bound(x);
  else
    return x;
}

template <class S>
S abs_pow(const S& t, double p) {
  using std::abs;
  using std::pow;
  const S a = abs(t);
  if (p == 1) return a;
  if (p == 2) return S(a * a);
  return S(pow(a, S(p)));
}

template <class S>
std::vector<Eigen::Index> order_of(const DiscreteMeasure<S>& m) {
  std::vector<Eigen::Index> idx(std::size_t(m.size()));
  std::iota(idx.begin(), idx.end(), Eigen::Index(0));
  std::stable_sort(idx.begin(), idx.end(), [&](Eigen::Index i, Eigen::Index j) {
    return sort_key(m.atoms()(i, 0)) < sort_key(m.atoms()(j, 0));
  });
  return idx;
}

}  // namespace

WassersteinResult wasserstein_exact(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu,
                                    double p, const NetworkSimplexOptions& options) {
  detail::check_exponent(p);
  detail::check_same_dimension(mu.dim(), nu.dim());
  WassersteinResult r;
  // Solved on the supports scaled by 2^shift (homogeneity_shift): costs in range, the same optimal plan.
  const int shift = detail::homogeneity_shift(mu.atoms(), nu.atoms());
  const Matrix<double> x = shift ? detail::homogeneity_scaled(mu.atoms(), shift) : mu.atoms();
  const Matrix<double> y = shift ? detail::homogeneity_scaled(nu.atoms(), shift) : nu.atoms();
  const std::int64_t pairs = std::int64_t(mu.size()) * nu.size();
  if (pairs <= dense_cost_limit) {
    Matrix<double> c(mu.size(), nu.size());
    for (Eigen::Index i = 0; i < mu.size(); ++i)
      for (Eigen::Index j = 0; j < nu.size(); ++j) {
        const double s = (x.row(i) - y.row(j)).squaredNorm();
        c(i, j) = p == 2 ? s : p == 1 ? std::sqrt(s) : std::pow(s, p / 2);
      }
    r.plan = network_simplex(mu.weights(), nu.weights(), c, options);
  } else {
    r.plan = network_simplex(mu.weights(), nu.weights(), x, y, p, options);
  }
  // Back to the original scale: W_p divides by 2^shift (exact unless it leaves the double range), W_p^p and
  // the potentials by 2^(shift p).
  r.value = std::ldexp(std::pow(std::max(r.plan.cost, 0.0), 1 / p), -shift);
  if (shift) {
    const double cost_factor = std::pow(2.0, -double(shift) * p);
    r.plan.cost *= cost_factor;  // inf when W_p^p itself exceeds the double range (W_p may not)
    // Potentials that leave the double range become 0: any finite potentials are valid input to
    // certify_wasserstein, which rebuilds its own on the scaled supports.
    for (Eigen::VectorXd* pot : {&r.plan.u, &r.plan.v})
      for (Eigen::Index k = 0; k < pot->size(); ++k) {
        const double v = (*pot)(k)*cost_factor;
        (*pot)(k) = std::isfinite(v) ? v : 0.0;
      }
  }
  r.cost = r.plan.cost;
  r.status = r.plan.status;
  return r;
}

template <class S>
S wasserstein_1d_cost(const DiscreteMeasure<S>& mu, const DiscreteMeasure<S>& nu, double p) {
  detail::check_exponent(p);
  if (mu.dim() != 1)
    throw InputError("mu", "wasserstein_1d needs dimension 1, got " + std::to_string(mu.dim()));
  if (nu.dim() != 1)
    throw InputError("nu", "wasserstein_1d needs dimension 1, got " + std::to_string(nu.dim()));
  const auto ia = order_of(mu), ib = order_of(nu);
  const auto& x = mu.atoms();
  const auto& y = nu.atoms();
  const auto& a = mu.weights();
  const auto& b = nu.weights();
  // Breakpoints: cumulative weights A (of mu) and B (of nu); on (previous, min(A, B)] the quantiles are
  // x_(i) and y_(j).
  std::size_t i = 0, j = 0;
  S big_a = a(ia[0]), big_b = b(ib[0]), previous(0), total(0);
  while (i < ia.size() && j < ib.size()) {
    const S c = abs_pow<S>(S(x(ia[i], 0) - y(ib[j], 0)), p);
    const bool a_first = sort_key(big_a) < sort_key(big_b);
    const bool b_first = sort_key(big_b) < sort_key(big_a);
    const S t = b_first ? big_b : big_a;
    total += (t - previous) * c;
    previous = t;
    if (!b_first && ++i < ia.size()) big_a += a(ia[i]);
    if (!a_first && ++j < ib.size()) big_b += b(ib[j]);
  }
  return total;
}

template <class S>
S wasserstein_1d(const DiscreteMeasure<S>& mu, const DiscreteMeasure<S>& nu, double p) {
  using std::pow;
  using std::sqrt;
  const S c = wasserstein_1d_cost(mu, nu, p);
  if (p == 1) return c;
  if (p == 2) return sqrt(c);
  if (!(scalar_traits<S>::upper(c) > 0)) return S(0);
  return S(pow(c, S(1) / S(p)));
}

#define REGATTA_DEFINE_W1D(S)                                                                      \
  template S wasserstein_1d_cost<S>(const DiscreteMeasure<S>&, const DiscreteMeasure<S>&, double); \
  template S wasserstein_1d<S>(const DiscreteMeasure<S>&, const DiscreteMeasure<S>&, double);
REGATTA_FOR_EACH_SCALAR(REGATTA_DEFINE_W1D)
#undef REGATTA_DEFINE_W1D

SlicedResult sliced_wasserstein(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu,
                                double p, int n_directions, std::uint64_t seed) {
  detail::check_exponent(p);
  detail::check_same_dimension(mu.dim(), nu.dim());
  if (n_directions < 1) throw InputError("n_directions", "must be at least 1");
  const Eigen::Index d = mu.dim();
  const Vector<double> g = standard_normal(Eigen::Index(n_directions) * d, seed);
  std::vector<double> slices;
  slices.reserve(std::size_t(n_directions));
  for (int l = 0; l < n_directions; ++l) {
    Eigen::VectorXd theta = g.segment(Eigen::Index(l) * d, d);
    const double norm = theta.norm();
    if (!(norm > 0))
      theta = Eigen::VectorXd::Unit(d, 0);  // probability zero; keeps the slice defined
    else
      theta /= norm;
    Matrix<double> px = mu.atoms() * theta;
    Matrix<double> py = nu.atoms() * theta;
    const DiscreteMeasure<double> pmu(std::move(px), mu.weights());  // weights already validated
    const DiscreteMeasure<double> pnu(std::move(py), nu.weights());
    slices.push_back(wasserstein_1d_cost(pmu, pnu, p));
  }
  SlicedResult r;
  r.n_directions = n_directions;
  double mean = 0;
  for (double s : slices) mean += s;
  mean /= n_directions;
  double var = 0;
  for (double s : slices) var += (s - mean) * (s - mean);
  r.cost = mean;
  r.standard_error = n_directions > 1 ? std::sqrt(var / (n_directions - 1) / n_directions) : 0.0;
  r.value = std::pow(std::max(mean, 0.0), 1 / p);
  return r;
}

}  // namespace regatta::measures
