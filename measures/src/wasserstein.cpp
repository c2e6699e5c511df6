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
  const std::int64_t pairs = std::int64_t(mu.size()) * nu.size();
  if (pairs <= dense_cost_limit) {
    Matrix<double> c(mu.size(), nu.size());
    for (Eigen::Index i = 0; i < mu.size(); ++i)
      for (Eigen::Index j = 0; j < nu.size(); ++j) {
        const double s = (mu.atoms().row(i) - nu.atoms().row(j)).squaredNorm();
        c(i, j) = p == 2 ? s : p == 1 ? std::sqrt(s) : std::pow(s, p / 2);
      }
    r.plan = network_simplex(mu.weights(), nu.weights(), c, options);
  } else {
    r.plan = network_simplex(mu.weights(), nu.weights(), mu.atoms(), nu.atoms(), p, options);
  }
  r.cost = r.plan.cost;
  r.value = std::pow(std::max(r.cost, 0.0), 1 / p);
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
