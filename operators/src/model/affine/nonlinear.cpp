// Elementwise nonlinearities of affine forms (nonlinear.hpp): exp, 1/x, 1/√x, √x, GELU (exact and tanh),
// tanh, erf, ReLU and SiLU, each by its tangent (or chord) at the centre plus a bounded remainder as a fresh
// symbol (docs/models.md).
#include "nonlinear.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include <mpfr.h>

#include <regatta/operators/model.hpp>

namespace regatta::operators::affine {

namespace {

constexpr double gelu_curvature = 0.8;   // |GELU″(x)| = φ(x)|2 − x²| ≤ 2φ(0) = 0.7979…
constexpr double tanh_curvature = 0.77;  // |tanh″(x)| = 2|tanh x|(1 − tanh² x) ≤ 4/(3√3) = 0.7698…
// |SiLU″(x)| ≤ 1/2: SiLU″ = s(1 − s)(2 − x·tanh(x/2)) with s = 1/(1 + e⁻ˣ), s(1 − s) = 1/(4cosh²(x/2)) ≤ 1/4
// and x·tanh(x/2) ≥ 0, so SiLU″ ≤ 1/2 (at x = 0); and −SiLU″ ≤ |x|/(4cosh²(x/2)) ≤ |x|/(4 + x²) ≤ 1/4.
constexpr double silu_curvature = 0.5;
// |erf″(x)| = (4/√π)|x|e^{−x²} ≤ (4/√π)/√(2e) = 0.96788… (the maximum of |x|e^{−x²} is at x² = ½).
constexpr double erf_curvature = 0.968;

/// erf(v) rounded down or up: MPFR rounds correctly in the requested direction at 53 bits (v is exact there).
double erf_directed(double v, bool up) {
  struct Workspace {
    mpfr_t x, y;
    Workspace() {
      mpfr_init2(x, 53);
      mpfr_init2(y, 53);
    }
    ~Workspace() {
      mpfr_clear(x);
      mpfr_clear(y);
    }
  };
  thread_local Workspace w;
  const mpfr_rnd_t rnd = up ? MPFR_RNDU : MPFR_RNDD;
  mpfr_set_d(w.x, v, MPFR_RNDN);  // exact
  mpfr_erf(w.y, w.x, rnd);
  return mpfr_get_d(w.y, rnd);
}
/// erf over x (increasing): its values at the ends, rounded outward.
I erf(const I& x) { return I::hull(erf_directed(x.lower(), false), erf_directed(x.upper(), true)); }
/// erf at a binary64 point, enclosed.
I erf_point(double x) { return erf(I(x)); }

/// Enclosures of σ″ over each interval of J (N×1): GELU″(x) = φ(x)(2 − x²); tanh″ = −2t(1 − t²) with
/// t = tanh x; for the tanh GELU σ(x) = ½x(1 + tanh u), u = c(x + a x³), c = √(2/π), a = 0.044715 (the
/// binary64 constant of the model): σ″ = (1 − t²)u′ + ½x(1 − t²)(u″ − 2t u′²), u′ = c(1 + 3a x²), u″ = 6c a
/// x. Each is a naive interval evaluation, intersected with the global bound where one is proved.
Matrix<I> second_derivative(Activation act, const Matrix<I>& J) {
  const I pi = I::hull(std::nextafter(std::numbers::pi, 0.0), std::nextafter(std::numbers::pi, 4.0));
  const I inv_sqrt_2pi = I(1.0) / sqrt(I(2.0) * pi);
  const Index N = J.rows();
  Matrix<I> out(N, 1);
  if (act == Activation::silu) {  // SiLU″ = s(1 − s)(2 + x(1 − 2s)), s = 1/(1 + e⁻ˣ)
    for (Index i = 0; i < N; ++i) {
      const I x = J(i, 0), s = I(1.0) / (I(1.0) + exp(-x));
      out(i, 0) = intersect(s * (I(1.0) - s) * (I(2.0) + x * (I(1.0) - I(2.0) * s)),
                            I::hull(-silu_curvature, silu_curvature));
    }
    return out;
  }
  if (act == Activation::gelu_erf) {
    for (Index i = 0; i < N; ++i) {
      const I x2 = square(J(i, 0));
      out(i, 0) = intersect(exp(I(-0.5) * x2) * inv_sqrt_2pi * (I(2.0) - x2),
                            I::hull(-gelu_curvature, gelu_curvature));
    }
    return out;
  }
  const I c = I(2.0) * inv_sqrt_2pi, a(0.044715);
  Matrix<I> u(N, 1);
  for (Index i = 0; i < N; ++i) {
    const I x = J(i, 0);
    u(i, 0) = act == Activation::tanh ? x : c * (x + a * x * square(x));
  }
  const Matrix<I> t = activate(Activation::tanh, u);
  for (Index i = 0; i < N; ++i) {
    const I x = J(i, 0), ti = intersect(t(i, 0), I::hull(-1.0, 1.0)), sech2 = I(1.0) - square(ti);
    if (act == Activation::tanh) {
      out(i, 0) = intersect(I(-2.0) * ti * sech2, I::hull(-tanh_curvature, tanh_curvature));
    } else {
      const I du = c * (I(1.0) + I(3.0) * a * square(x)), ddu = I(6.0) * c * a * x;
      out(i, 0) = sech2 * du + I(0.5) * x * sech2 * (ddu - I(2.0) * ti * square(du));
    }
  }
  return out;
}

/// GELU(p) = p·Φ(p) and GELU′(p) = Φ(p) + p·φ(p) at each point p of P (N×1, point intervals), from one
/// enclosure of Φ(p) = (1 + erf(p/√2))/2 and one of φ(p) = e^{−p²/2}/√(2π) per point: the same interval
/// operations in the same order as activate and activation_derivative (model/forward.cpp; for a point the
/// derivative's hull of its two endpoint enclosures is that one enclosure), so the same enclosures, with a
/// third of the directed erf calls (2 instead of 6) and half the directed exp calls (2 instead of 4).
void gelu_erf_point(const Matrix<I>& P, Matrix<I>& value, Matrix<I>& slope) {
  const I pi = I::hull(std::nextafter(std::numbers::pi, 0.0), std::nextafter(std::numbers::pi, 4.0));
  const I inv_sqrt2 = I(1.0) / sqrt(I(2.0)), inv_sqrt_2pi = I(1.0) / sqrt(I(2.0) * pi);
  for (Index i = 0; i < P.rows(); ++i) {
    const I x = P(i, 0);
    const I cdf = (I(1.0) + erf(x * inv_sqrt2)) / I(2.0);
    const I pdf = exp(-(x * x) / I(2.0)) * inv_sqrt_2pi;
    value(i, 0) = x * cdf;
    slope(i, 0) = cdf + x * pdf;
  }
}

}  // namespace

Linearisation linearise(const Form& F, Function f, const Pass& p, double floor,
                        const std::vector<I>* within) {
  const Index N = F.size();
  const Vector<double> rad = radius(F, p);
  Linearisation out{std::vector<I>(static_cast<std::size_t>(N)), std::vector<I>(static_cast<std::size_t>(N)),
                    Vector<double>(N)};
  std::vector<I>&lambda = out.lambda, &M = out.M;
  Vector<double>& beta = out.beta;
  Matrix<I> points(N, 1), ranges(N, 1);
  for (Index i = 0; i < N; ++i) {
    I J = I(F.c(i)) + I::hull(-rad(i), rad(i));
    double centre = F.c(i);  // the tangent point before clamping: the centre of the range
    if (within) {
      const I& w = (*within)[std::size_t(i)];
      const double a = std::max(J.lower(), w.lower()), b = std::min(J.upper(), w.upper());
      if (!(a <= b)) throw Vacuous{};
      if (a != J.lower() || b != J.upper()) centre = 0.5 * a + 0.5 * b;  // a cut range: its midpoint
      J = I::hull(a, b);
    }
    if (!isfinite(J)) throw Vacuous{};
    if (f == Function::reciprocal && !(J.lower() > 0)) throw Vacuous{};
    if (f == Function::rsqrt || f == Function::sqrt)
      J = I::hull(std::max(J.lower(), floor), std::max(J.upper(), floor));
    ranges(i, 0) = J;
    points(i, 0) = I(std::clamp(centre, J.lower(), J.upper()));
  }
  Matrix<I> value(N, 1), slope(N, 1), curvature(N, 1);
  if (f == Function::gelu_erf || f == Function::gelu_tanh || f == Function::tanh || f == Function::silu) {
    const Activation act = f == Function::silu        ? Activation::silu
                           : f == Function::tanh      ? Activation::tanh
                           : f == Function::gelu_tanh ? Activation::gelu_tanh
                                                      : Activation::gelu_erf;
    if (act == Activation::gelu_erf) {
      gelu_erf_point(points, value, slope);
    } else {
      value = activate(act, points);
      slope = activation_derivative(act, points);
    }
    curvature = second_derivative(act, ranges);
  }
  for (Index i = 0; i < N; ++i) {
    const I J = ranges(i, 0), P = points(i, 0);
    if (f == Function::relu) {
      double l = 0;
      I err(0.0);
      if (J.lower() >= 0) {
        l = 1;
      } else if (J.upper() > 0) {
        l = J.upper() / (J.upper() - J.lower());  // any l ∈ [0, 1] is sound; this one is DeepZ's
        // relu(x) − l·x ∈ [0, max((1 − l)·sup J, −l·inf J)] on J.
        err = I::hull(0.0, hi(max((I(1.0) - I(l)) * I(J.upper()), I(-l) * I(J.lower()))));
      }
      lambda[std::size_t(i)] = I(l);
      const double m = mid(err);
      M[std::size_t(i)] = I(m);
      beta(i) = halfwidth(err, m);
      continue;
    }
    if (f == Function::exp || f == Function::reciprocal || f == Function::rsqrt || f == Function::sqrt) {
      // √x is concave: the chord of the convex −√x, negated at the end (flip).
      const bool flip = f == Function::sqrt;
      // Convex on J (1/x and 1/√x on J > 0): the chord slope l, and the exact range of the convex
      // e(x) = f(x) − l·x on J: at most its larger endpoint value, at least the tangent of e at ξ ≈ the
      // point where f′ = l, evaluated at the ends of J (a convex function lies above its tangents).
      auto value_at = [f](const I& x) {
        return f == Function::exp          ? exp(x)
               : f == Function::reciprocal ? I(1.0) / x
               : f == Function::sqrt       ? -sqrt(x)
                                           : I(1.0) / sqrt(x);
      };
      auto slope_at = [f](const I& x) {
        return f == Function::exp          ? exp(x)
               : f == Function::reciprocal ? -(I(1.0) / square(x))
               : f == Function::sqrt       ? I(-0.5) / sqrt(x)
                                           : I(-0.5) / (x * sqrt(x));
      };
      const double a = J.lower(), b = J.upper();
      const I fa = value_at(I(a)), fb = value_at(I(b));
      double l = b > a ? mid((fb - fa) / (I(b) - I(a))) : mid(slope_at(I(a)));
      if (!std::isfinite(l)) throw Vacuous{};
      double xi = a;  // where f′(ξ) = l, clamped to J (any ξ in J is sound; this one is tight)
      if (f == Function::exp && l > 0) xi = std::log(l);
      if (f == Function::reciprocal && l < 0) xi = std::sqrt(-1.0 / l);
      if (f == Function::rsqrt && l < 0) xi = std::pow(-2.0 * l, -2.0 / 3.0);
      if (f == Function::sqrt && l < 0) xi = 1.0 / (4.0 * l * l);
      xi = std::clamp(std::isfinite(xi) ? xi : a, a, b);
      // exp is its own derivative: one enclosure of e^ξ serves both.
      const I f_xi = value_at(I(xi)), e_xi = f_xi - I(l) * I(xi);
      const I de_xi = (f == Function::exp ? f_xi : slope_at(I(xi))) - I(l);
      const double top = hi(max(fa - I(l) * I(a), fb - I(l) * I(b)));
      const double bottom = min(e_xi + de_xi * (I(a) - I(xi)), e_xi + de_xi * (I(b) - I(xi))).lower();
      if (!std::isfinite(bottom) || !(bottom <= top)) throw Vacuous{};
      const I E = I::hull(bottom, top);
      const double m = mid(E);
      lambda[std::size_t(i)] = I(flip ? -l : l);
      M[std::size_t(i)] = I(flip ? -m : m);
      beta(i) = halfwidth(E, m);
      continue;
    }
    I fp, dfp, d2;  // f(p), f′(p), and f″ over J
    switch (f) {
      case Function::erf: {  // erf′ = (2/√π)e^{−x²}, erf″ = −2x·erf′
        const I two_over_root_pi = I(2.0) / sqrt(I::hull(std::nextafter(std::numbers::pi, 0.0),
                                                         std::nextafter(std::numbers::pi, 4.0)));
        fp = erf_point(P.lower());
        dfp = two_over_root_pi * exp(-square(P));
        d2 = intersect(I(-2.0) * J * two_over_root_pi * exp(-square(J)),
                       I::hull(-erf_curvature, erf_curvature));
        break;
      }
      case Function::gelu_erf:
      case Function::gelu_tanh:
      case Function::tanh:
      case Function::silu:
        fp = value(i, 0);
        dfp = slope(i, 0);
        d2 = curvature(i, 0);
        break;
      default:
        break;
    }
    // f(x) = f(p) + f′(p)(x − p) + ½f″(ξ)(x − p)² = l·x + μ + err with err ∈ E below, for x ∈ J.
    const double l = mid(dfp);
    const I D = J - P;
    const I base = fp - I(l) * P;
    const double mu = mid(base);
    const I E = (base - I(mu)) + (dfp - I(l)) * D + I(0.5) * d2 * square(D);
    if (!isfinite(E)) throw Vacuous{};
    const double m = mid(E);
    lambda[std::size_t(i)] = I(l);
    M[std::size_t(i)] = I(mu) + I(m);
    beta(i) = halfwidth(E, m);
  }
  return out;
}

/// y = f(x) entrywise: linearise, then one fresh symbol per entry for the remainder.
/// `own` (when given): per entry, a column that no other entry of F nor any later step reads (−1: none).
/// There the entry's remainder joins that symbol instead of a fresh one: α·η + β·η′ with both symbols read
/// by this entry alone takes exactly the values of (|α| + β)·η″, |η″| ≤ 1.
Form nonlinear(const Form& F, Function f, const Pass& p, double floor, const std::vector<Index>* own) {
  Linearisation l = linearise(F, f, p, floor);
  if (!own) {
    Form out = affine_entries(F, l.lambda, l.M, p, fresh_count(l.beta));
    add_fresh(out, l.beta, p);
    return out;
  }
  Vector<double> joined = Vector<double>::Zero(F.size());
  for (Index e = 0; e < F.size(); ++e)
    if ((*own)[std::size_t(e)] >= 0) std::swap(joined(e), l.beta(e));
  Form out = affine_entries(F, l.lambda, l.M, p, fresh_count(l.beta));
  for (Index e = 0; e < F.size(); ++e)
    if (joined(e) > 0) {
      double& a = out.A(e, (*own)[std::size_t(e)]);
      a = hi(I(std::fabs(a)) + I(joined(e)));
    }
  out.forget();
  add_fresh(out, l.beta, p);
  return out;
}

}  // namespace regatta::operators::affine
