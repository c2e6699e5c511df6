// The non-template machinery of the Havens et al. family (declared and documented in havens.hpp).
#include "havens.hpp"

#include <Eigen/Eigenvalues>

namespace regatta::proofs::claims::havens {

Shape read_shape(const Point& p) {
  if (p.k.size() < shape_keys.size()) throw InputError("point", "wrong number of discrete coordinates");
  const Keys& k = shape_keys;
  const Shape s{k.of(p, "n"),   k.of(p, "d"),           k.of(p, "heads"),         k.of(p, "d_h"),
                k.of(p, "d_v"), k.of(p, "causal") != 0, k.of(p, "residual") != 0, k.of(p, "biases")};
  if (s.n < 1 || s.d < 1 || s.heads < 1 || s.dh < 1 || s.dv < 1 || s.biases < 0 || s.biases > 2)
    throw InputError("point", "invalid layer shape");
  return s;
}

std::vector<long> shape_k(const Shape& s) {
  return {s.n, s.d, s.heads, s.dh, s.dv, s.causal ? 1L : 0L, s.residual ? 1L : 0L, s.biases};
}

Layout weights_layout(const Shape& s) {
  Layout l;
  for (long h = 0; h < s.heads; ++h)
    l.add(indexed("WQ", h), s.d, s.dh).add(indexed("WK", h), s.d, s.dh).add(indexed("WV", h), s.d, s.dv);
  l.add("WO", s.heads * s.dv, s.d);
  if (s.biases >= 1) {
    for (long h = 0; h < s.heads; ++h) l.add(indexed("bQ", h), s.dh).add(indexed("bV", h), s.dv);
    l.add("bO", s.d);
  }
  if (s.biases == 2)
    for (long h = 0; h < s.heads; ++h) l.add(indexed("bK", h), s.dh);
  return l;
}

AttentionLayer read_layer(const Shape& s, const Layout& l, const Point& p) {
  AttentionLayer L;
  L.d = static_cast<int>(s.d);
  L.heads = static_cast<int>(s.heads);
  L.head_dim = static_cast<int>(s.dh);
  L.value_dim = static_cast<int>(s.dv);
  for (long h = 0; h < s.heads; ++h) {
    L.WQ.push_back(l.matrix<double>(p, indexed("WQ", h)));
    L.WK.push_back(l.matrix<double>(p, indexed("WK", h)));
    L.WV.push_back(l.matrix<double>(p, indexed("WV", h)));
  }
  L.WO = l.matrix<double>(p, "WO");
  if (s.biases >= 1) {
    for (long h = 0; h < s.heads; ++h) {
      L.bQ.push_back(l.vector<double>(p, indexed("bQ", h)));
      L.bV.push_back(l.vector<double>(p, indexed("bV", h)));
    }
    L.bO = l.vector<double>(p, "bO");
  }
  if (s.biases == 2)
    for (long h = 0; h < s.heads; ++h) L.bK.push_back(l.vector<double>(p, indexed("bK", h)));
  return L;
}

AttentionOptions options_of(const Shape& s) {
  AttentionOptions o;
  o.causal = s.causal;
  o.residual = s.residual;
  return o;
}

Shape sample_shape(Rng& rng, const ShapeRange& range) {
  Shape s;
  s.n = rng.coin(0.2) ? range.n_min : rng.integer(range.n_min, range.n_max);
  s.d = rng.integer(range.d_min, range.d_max);
  s.heads = rng.integer(1, range.heads_max);
  s.dh = rng.integer(1, std::min(2L, s.d));
  s.dv = rng.integer(1, s.d);
  s.causal = rng.coin(0.3);
  s.residual = rng.coin(0.5);
  const double b = rng.uniform();
  s.biases = b < 0.5 ? 0 : (b < 0.75 ? 1 : 2);
  return s;
}

void append_weights(Rng& rng, const Shape& s, double qk, double v, std::vector<double>& x) {
  const Layout l = weights_layout(s);
  const double sq = qk / std::sqrt(static_cast<double>(s.d)), sv = v / std::sqrt(static_cast<double>(s.d));
  const auto score = [&] { return sq * rng.normal(); };
  const auto value = [&] { return sv * rng.normal(); };
  const auto bias = [&] { return 0.5 * qk * rng.normal(); };
  for (long h = 0; h < s.heads; ++h) {
    l.fill(x, indexed("WQ", h), score);
    l.fill(x, indexed("WK", h), score);
    l.fill(x, indexed("WV", h), value);
  }
  l.fill(x, "WO", value);
  if (s.biases >= 1) {
    for (long h = 0; h < s.heads; ++h) {
      l.fill(x, indexed("bQ", h), bias);
      l.fill(x, indexed("bV", h), bias);
    }
    l.fill(x, "bO", bias);
  }
  if (s.biases == 2)
    for (long h = 0; h < s.heads; ++h) l.fill(x, indexed("bK", h), bias);
}

Vector<mpfr> top_right_vector_mpfr(const Matrix<mpfr>& M) {
  using Dense = Eigen::Matrix<mpfr, Eigen::Dynamic, Eigen::Dynamic>;
  const Matrix<mpfr> G = num::mul<mpfr>(Matrix<mpfr>(M.transpose()), M);
  Eigen::SelfAdjointEigenSolver<Dense> solver{Dense(G)};
  if (solver.info() != Eigen::Success) throw InputError("point", "eigen solver did not converge");
  return solver.eigenvectors().col(G.rows() - 1);
}

std::optional<mpfr> cholesky_upper(const Matrix<interval>& M, const Vector<mpfr>& v) {
  using std::sqrt;
  const Matrix<mpfr> mid = matrix_cast<mpfr>(M);
  const mpfr sigma = num::euclidean_norm<mpfr>(Matrix<mpfr>(num::mul<mpfr>(mid, Matrix<mpfr>(v)))) /
                     num::euclidean_norm<mpfr>(Matrix<mpfr>(v));
  const Matrix<interval> G = num::mul<interval>(Matrix<interval>(M.transpose()), M);
  const long N = G.rows();
  const int p = scalar_traits<mpfr>::digits();
  // Margins 2^(24−p) (the pivots' rounding is about N·2^(−p) of ‖G‖, far below), then 2^(−p/2).
  for (const int bits : {p - 24, p / 2}) {
    mpfr margin(1);
    for (int k = 0; k < bits; ++k) margin /= 2;
    const mpfr theta = sigma * (1 + margin);
    const interval t2 = num::sq<interval>(scalar_cast<interval>(theta));
    Matrix<interval> L = Matrix<interval>::Zero(N, N);
    bool positive = true;
    for (long k = 0; k < N && positive; ++k) {
      interval pivot = t2 - G(k, k);
      for (long j = 0; j < k; ++j) pivot -= num::sq<interval>(L(k, j));
      positive = lower_bound(pivot) > 0;
      if (!positive) break;
      L(k, k) = sqrt(pivot);
      for (long i = k + 1; i < N; ++i) {
        interval sum = -G(i, k);
        for (long j = 0; j < k; ++j) sum -= L(i, j) * L(k, j);
        L(i, k) = sum / L(k, k);
      }
    }
    if (positive) return theta;
  }
  return std::nullopt;
}

Mat ascend(const Objective& f, const std::vector<Mat>& starts, double eps, int steps) {
  Mat best;
  double best_value = -INFINITY;
  for (const Mat& s : starts) {
    const double norm = s.norm();
    if (!(norm > 0) || !std::isfinite(norm)) continue;
    Mat E = s * (eps / norm);
    double eta = 0.5;
    for (int t = 0; t <= steps; ++t) {
      std::pair<double, Mat> vg;
      try {
        vg = f(E);
      } catch (const InputError&) {
        break;
      }
      if (!std::isfinite(vg.first)) break;
      if (vg.first > best_value) {
        best_value = vg.first;
        best = E;
      }
      const double g = vg.second.norm();
      if (t == steps || !(g > 0) || !std::isfinite(g)) break;
      E += vg.second * (eta * eps / g);
      E *= eps / E.norm();
      eta *= 0.92;
    }
  }
  return best.size() != 0 ? best : starts.front();
}

Mat gaussian(Rng& rng, long rows, long cols) {
  Mat M(rows, cols);
  for (long i = 0; i < rows; ++i)
    for (long j = 0; j < cols; ++j) M(i, j) = rng.normal();
  return M;
}

Mat xi_direction(const AttentionLayer& L, const AttentionOptions& o, const Mat& X) {
  const Weights<double> w = weights_of<double>(L, o);
  return unvec<double>(top_right_vector<double>(xi_matrix<double>(w, kernels<double>(w, X), X.cols())),
                       X.rows(), X.cols());
}

Mat output_attack(const AttentionLayer& L, const AttentionOptions& o, const Mat& X, double eps, Rng& rng,
                  int randoms, int steps) {
  const Block<double> block(L, o);
  const Mat F0 = block.forward(X);
  std::vector<Mat> starts{xi_direction(L, o, X)};
  for (int r = 0; r < randoms; ++r) starts.push_back(gaussian(rng, X.rows(), X.cols()));
  const Objective f = [&](const Mat& E) {
    const operators::Linearization<double> lin = block.linearize(Mat(X + E));
    const Mat G = lin.value() - F0;
    return std::pair<double, Mat>{G.norm(), lin.vjp(G)};
  };
  return ascend(f, starts, eps, steps);
}

Layout perturbed_layout(const Shape& s) {
  Layout l = weights_layout(s);
  l.add("X", s.n, s.d).add("eps", 1).add("U", s.n, s.d);
  return l;
}

Perturbed decode(const Point& p) {
  Perturbed q;
  q.shape = read_shape(p);
  const Shape& s = q.shape;
  const Layout l = perturbed_layout(s);
  if (p.x.size() < l.size()) throw InputError("point", "wrong size");
  q.layer = read_layer(s, l, p);
  q.options = options_of(s);
  q.X = l.matrix<double>(p, "X");
  q.eps = l.raw(p, "eps");
  q.U = l.matrix<double>(p, "U");
  if (!(q.eps > 0) || !(q.U.norm() > 0)) throw InputError("point", "needs eps > 0 and U != 0");
  return q;
}

void repair_perturbed(Point& p) {
  for (double& v : p.x) v = std::clamp(v, -max_coordinate, max_coordinate);
  const Layout l = perturbed_layout(read_shape(p));
  const std::size_t eps_at = l.at("eps"), u_at = l.at("U");
  if (p.x.size() <= eps_at) return;
  p.x[eps_at] = std::clamp(std::abs(p.x[eps_at]), min_eps, max_eps);
  const std::size_t u_end = std::min(p.x.size(), l.size());  // U is the last block
  bool zero = true;
  for (std::size_t i = u_at; i < u_end; ++i) zero = zero && p.x[i] == 0;
  if (zero && u_at < u_end) p.x[u_at] = 1;
}

Draw sample_scales(Rng& rng) {
  return {std::pow(10.0, rng.uniform(-0.5, 0.6)), std::pow(10.0, rng.uniform(-0.5, 0.4)),
          std::pow(10.0, rng.uniform(-1.0, 0.4))};
}

double sample_eps(Rng& rng) {
  static constexpr double listed[] = {0.01, 0.1, 0.5};
  return rng.coin(0.5) ? listed[rng.integer(0, 2)] : std::pow(10.0, rng.uniform(-3.0, 0.3));
}

Point make_perturbed(Rng& rng, const Shape& s, const Draw& scale, double eps, bool attack, int randoms,
                     int steps) {
  Point p;
  p.k = shape_k(s);
  append_weights(rng, s, scale.qk, scale.v, p.x);
  const Layout l = perturbed_layout(s);
  l.fill(p.x, "X", [&] { return scale.corner ? rng.corner(scale.x) : scale.x * rng.normal(); });
  l.fill(p.x, "eps", [&] { return eps; });
  l.fill(p.x, "U", [&] { return rng.normal(); });
  repair_perturbed(p);
  if (attack) {
    const Perturbed q = decode(p);
    const Mat E = output_attack(q.layer, q.options, q.X, q.eps, rng, randoms, steps);
    for (long i = 0; i < s.n; ++i)
      for (long j = 0; j < s.d; ++j) p.x[l.at("U") + static_cast<std::size_t>(i * s.d + j)] = E(i, j);
    repair_perturbed(p);
  }
  return p;
}

std::vector<Point> pgd_family() {
  std::vector<Point> out;
  std::uint64_t seed = 9001;
  for (long heads : {1L, 8L})
    for (double qk : {1.0, 3.0})
      for (bool residual : {false, true})
        for (double eps : {0.01, 0.1, 0.5}) {
          Rng rng(seed++);
          Shape s;
          s.n = 4;
          s.d = 4;
          s.heads = heads;
          s.dh = heads == 1 ? 2 : 1;
          s.dv = heads == 1 ? 4 : 1;
          s.residual = residual;
          out.push_back(make_perturbed(rng, s, Draw{qk, 1.0, 1.0, false}, eps, true, 2, 60));
        }
  return out;
}

nlohmann::json describe_layer(const Point& p, const Shape& s) {
  const auto present =  // weight coordinates in x (all of them, unless the point is short)
      std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(weights_layout(s).size()), std::ssize(p.x));
  return {{"family", p.family},
          {"n", s.n},
          {"d", s.d},
          {"heads", s.heads},
          {"d_h", s.dh},
          {"d_v", s.dv},
          {"causal", s.causal},
          {"residual", s.residual},
          {"biases", s.biases == 0 ? "none" : (s.biases == 1 ? "query, value, output" : "all")},
          {"weights (W^Q_h, W^K_h, W^V_h per head; W^O; biases)",
           std::vector<double>(p.x.begin(), p.x.begin() + present)}};
}

nlohmann::json describe_perturbed(const Point& p) {
  const Shape s = read_shape(p);
  const Layout l = perturbed_layout(s);
  nlohmann::json j = describe_layer(p, s);
  j["X"] = l.rows(p, "X");
  j["eps"] = l.at("eps") < p.x.size() ? l.raw(p, "eps") : 0.0;
  j["U (E = eps U / ||U||_F)"] = l.rows(p, "U");
  return j;
}

const std::vector<std::string> layer_hypotheses = {
    "one dot-product softmax attention layer F(X) = X W^skip + sum_h P_h(X) X W^VO_h (operators::Block), no "
    "normalisation inside F",
    "W^skip = I (residual) or 0; H >= 1; causal mask allowed; biases: none, query/value/output, or all",
    "E = eps U / ||U||_F on the sphere of radius eps (delta increases with eps, so all spheres cover the "
    "balls)"};

}  // namespace regatta::proofs::claims::havens
