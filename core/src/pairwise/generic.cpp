// The generic path of regatta::pairwise::reduce: one key at a time through LogSumExp<S>, for every scalar
// type (the only path for mpfr and interval; a second implementation of the float / double results).
//
// Per query row i, every visible key j (mask, finite log-weight) is scored and pushed as t_ij = s_ij + ω_j;
// the Rescale factors {self, other} returned by push keep every vector accumulator expressed relative to the
// running shift (acc ← self·acc + other·term), and the outputs are acc / scaled_sum at the end.
//
// Scores use the difference form ‖x − y‖² (docs/math/attention.md#l2-score): no cancellation, and for
// interval
// the squares are evaluated with mpfi_sqr, so each score is a certified enclosure. All arithmetic for
// interval is outward rounded (kernel.scale and kernel.power enter as intervals enclosing the doubles), hence
// lse and every output entry enclose the exact value. The multiprecision inputs are first carried to the
// working precision (Boost.Multiprecision computes at the precision of the operands).
#include <mpfi.h>
#include <mpfr.h>

#include <cmath>
#include <regatta/core/convert.hpp>
#include <regatta/core/detail/pairwise_paths.hpp>
#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/log_sum_exp.hpp>
#include <regatta/core/pairwise.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/resources.hpp>
#include <type_traits>
#include <utility>
#include <vector>

namespace regatta::pairwise::detail {

namespace {

template <class S>
constexpr bool is_ieee = std::is_floating_point_v<S>;

/// The double v as S (scalar_cast: exact for mpfr at >= 53 bits, an outward enclosure for interval at any
/// precision, rounded to nearest for float).
template <class S>
S from_double(double v) {
  return scalar_cast<S>(v);
}

template <class M>
M lift(const M& a) {
  return regatta::detail::at_working_precision_all(a);
}

/// Scoring of one (query, key) pair; rows are contiguous (Matrix is row-major).
template <class S>
struct Scorer {
  ScoreKind kind;
  S scale;
  S power;
  bool power_is_one;
  bool power_is_two;
  Eigen::Index d;

  S operator()(const S* x, const S* y) const {
    S acc(0);
    if (kind == ScoreKind::dot) {
      for (Eigen::Index k = 0; k < d; ++k) acc += x[k] * y[k];
      return scale * acc;
    }
    for (Eigen::Index k = 0; k < d; ++k)
      acc += regatta::detail::square<S>(x[k] - y[k]);  // ‖x − y‖², difference form
    if (kind == ScoreKind::neg_sq_dist || power_is_two) return -(scale * acc);
    using std::sqrt;
    const S dist = sqrt(acc);
    if (power_is_one) return -(scale * dist);
    return -(scale * regatta::detail::pow_nonnegative<S>(dist, power));
  }
};

/// acc ← self·acc + other·term (or acc ← other·term for the first term, acc += other·term when the shift
/// did not move: push then returns self = 1 exactly).
template <class S>
void absorb(S& acc, const S& term, const Rescale<S>& r, bool first, bool rescaled) {
  if (first)
    acc = r.other * term;
  else if (rescaled)
    acc = r.self * acc + r.other * term;
  else
    acc += r.other * term;
}

template <class S>
struct Inputs {
  const Matrix<S>* x;
  const Matrix<S>* y;
  const Vector<S>* w;  // may be null
  const Matrix<S>* v;  // may be null
  const Matrix<S>* b;  // may be null
};

/// Reduces query row i into row i of every requested output.
template <class S>
void reduce_row(Eigen::Index i, const Inputs<S>& in, const Scorer<S>& score, MaskKind mask,
                const Request& request, Result<S>& result) {
  using Ops = ReductionOps<S>;
  const Eigen::Index m = in.y->rows();
  const Eigen::Index e = in.v ? in.v->cols() : 0;
  const Eigen::Index f = in.b ? in.b->cols() : 0;
  const bool want_out = request.out, want_mean = request.feature_mean, want_cross = request.cross_moment,
             want_second = request.feature_second_moment, want_score = request.expected_score;

  // Visible keys [begin, end): causal j <= i, anticausal j >= i.
  Eigen::Index begin = 0, end = m;
  if (mask == MaskKind::causal) end = std::min(m, i + 1);
  if (mask == MaskKind::anticausal) begin = std::min(m, i);

  std::vector<S> out(want_out ? e : 0, S(0)), mean(want_mean ? f : 0, S(0)),
      cross(want_cross ? e * f : 0, S(0)), second(want_second ? f * f : 0, S(0));
  S expected(0);
  auto acc = LogSumExp<S>::identity();
  const S* xi = in.x->data() + i * in.x->cols();
  for (Eigen::Index j = begin; j < end; ++j) {
    if (in.w != nullptr && Ops::is_neg_inf((*in.w)(j))) continue;  // zero weight: contributes nothing
    const S s = score(xi, in.y->data() + j * in.y->cols());
    const S t = in.w != nullptr ? S(s + (*in.w)(j)) : s;
    const bool first = acc.empty;
    const bool rescaled = first || Ops::greater(Ops::pivot(t), acc.shift);
    const Rescale<S> r = acc.push(t);
    const S* vj = in.v ? in.v->data() + j * e : nullptr;
    const S* bj = in.b ? in.b->data() + j * f : nullptr;
    for (Eigen::Index c = 0; c < Eigen::Index(out.size()); ++c) absorb(out[c], vj[c], r, first, rescaled);
    for (Eigen::Index c = 0; c < Eigen::Index(mean.size()); ++c) absorb(mean[c], bj[c], r, first, rescaled);
    if (want_cross)
      for (Eigen::Index c = 0; c < e; ++c)
        for (Eigen::Index k = 0; k < f; ++k) absorb(cross[c * f + k], S(vj[c] * bj[k]), r, first, rescaled);
    if (want_second)
      for (Eigen::Index c = 0; c < f; ++c)
        for (Eigen::Index k = 0; k < f; ++k) {
          const S term = c == k ? regatta::detail::square<S>(bj[c]) : S(bj[c] * bj[k]);
          absorb(second[c * f + k], term, r, first, rescaled);
        }
    if (want_score) absorb(expected, s, r, first, rescaled);
  }

  result.lse(i) = acc.finalize();
  // Validation guarantees a visible key; only an overflowing score (|scale·s| beyond the range of S) can
  // leave no finite mass, and then the weighted means are undefined: NaN.
  const bool mass = acc.has_mass();
  const S nan = scalar_traits<S>::quiet_nan();
  auto finish = [&](const S& a) { return mass ? S(a / acc.scaled_sum) : nan; };
  for (Eigen::Index c = 0; c < Eigen::Index(out.size()); ++c) result.out(i, c) = finish(out[c]);
  for (Eigen::Index c = 0; c < Eigen::Index(mean.size()); ++c) result.feature_mean(i, c) = finish(mean[c]);
  for (Eigen::Index c = 0; c < Eigen::Index(cross.size()); ++c) result.cross_moment(i, c) = finish(cross[c]);
  for (Eigen::Index c = 0; c < Eigen::Index(second.size()); ++c)
    result.feature_second_moment(i, c) = finish(second[c]);
  if (want_score) result.expected_score(i) = finish(expected);
}

}  // namespace

template <class S>
Result<S> reduce_generic(const Problem<S>& projected, const Kernel& kernel, const Request& request) {
  // Multiprecision inputs are copied at the working precision; IEEE inputs are used in place.
  Matrix<S> x_lifted, y_lifted, v_lifted, b_lifted;
  Vector<S> w_lifted;
  Inputs<S> in{projected.queries, projected.keys, projected.log_weights, projected.values,
               projected.features};
  if constexpr (!is_ieee<S>) {
    x_lifted = lift(*in.x);
    in.x = &x_lifted;
    y_lifted = lift(*in.y);
    in.y = &y_lifted;
    if (in.w) {
      w_lifted = lift(*in.w);
      in.w = &w_lifted;
    }
    if (in.v) {
      v_lifted = lift(*in.v);
      in.v = &v_lifted;
    }
    if (in.b) {
      b_lifted = lift(*in.b);
      in.b = &b_lifted;
    }
  }
  const Eigen::Index n = in.x->rows();
  const Eigen::Index d = in.x->cols();
  const Eigen::Index e = in.v ? in.v->cols() : 0;
  const Eigen::Index f = in.b ? in.b->cols() : 0;
  const Scorer<S> score{kernel.score,        from_double<S>(kernel.scale), from_double<S>(kernel.power),
                        kernel.power == 1.0, kernel.power == 2.0,          d};

  Result<S> result;
  result.lse.resize(n);
  if (request.out) result.out.resize(n, e);
  if (request.feature_mean) result.feature_mean.resize(n, f);
  if (request.cross_moment) result.cross_moment.resize(n, e * f);
  if (request.feature_second_moment) result.feature_second_moment.resize(n, f * f);
  if (request.expected_score) result.expected_score.resize(n);

  if constexpr (is_ieee<S>) {
    // Rows are independent. (Not for mpfr / interval: Boost keeps the default precision per thread.)
    const int threads = threads_for(double(n) * double(in.y->rows()) * double(d + e + f));
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads) if (threads > 1)
    for (Eigen::Index i = 0; i < n; ++i) reduce_row(i, in, score, kernel.mask, request, result);
  } else {
    for (Eigen::Index i = 0; i < n; ++i) reduce_row(i, in, score, kernel.mask, request, result);
  }
  return result;
}

#define REGATTA_PAIRWISE_GENERIC(S) \
  template Result<S> reduce_generic<S>(const Problem<S>&, const Kernel&, const Request&);
REGATTA_FOR_EACH_SCALAR(REGATTA_PAIRWISE_GENERIC)
#undef REGATTA_PAIRWISE_GENERIC

}  // namespace regatta::pairwise::detail
