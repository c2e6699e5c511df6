// The blocked CPU path of pairwise::reduce for float and double (mathematics: pairwise.hpp and
// docs/math/attention.md#streamed-reduction).
//
// Layout. Queries are split into blocks of query_block rows; one OpenMP task owns one query block and streams
// every key through it, key_block keys at a time, so no two threads touch the same output row. For each
// (query block, key block) pair:
//   T   = Q̃_blk · Y_blkᵀ                              one GEMM (Q̃: the query block pre-multiplied, below)
//   T  += bias_j + ω_j;  masked entries → −inf
//   μ_r = max_j T_rj,  P_rj = exp(T_rj − μ_r),  σ_r = Σ_j P_rj        per row, Eigen's packet exp, in L1
//   A   = P · V_blk   (and P·B_blk, P·(v⊗b)_blk, P·(b⊗b)_blk as requested)      GEMMs
//   per row: LogSumExp::merge({μ_r, σ_r}) → Rescale {self, other};  acc_r ← self·acc_r + other·A_r
// and at the end out_r = acc_r / σ_r. A row whose block entries are all −inf gives an empty partial (μ =
// −inf, P row = 0), which merge ignores. Memory: the outputs plus, per thread, O(query_block·(key_block + d +
// e·f)
// + key_block·(e·f + f·f)); the n×m matrix never exists.
//
// Scores. dot: Q̃ = scale·X, bias 0. neg_sq_dist: Q̃ = 2·scale·X, bias −scale‖y_j‖², and the row constant
// −scale‖x_i‖² is added to lse and expected_score at the end (it cancels in π). neg_dist_pow: Q̃ = −2·X, then
// D² = max(T + ‖x_i‖² + ‖y_j‖², 0) and s = −scale·(D²)^{p/2}.
//
// Non-finite scores (only from overflow, the inputs being validated) follow LogSumExp::push exactly: a NaN
// entry sets the row's nan flag, a +inf entry its positive_infinity flag, and neither enters the
// accumulators.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <regatta/core/detail/pairwise_blocks.hpp>
#include <regatta/core/detail/pairwise_paths.hpp>
#include <regatta/core/online_softmax.hpp>
#include <regatta/core/resources.hpp>

namespace regatta::pairwise::detail {
namespace {

using Eigen::Index;

template <class S>
using Block = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Read-only data of one call, shared by all threads.
template <class S>
struct Setup {
  const Matrix<S>& x;
  const Matrix<S>& y;
  const Vector<S>* log_weights;
  const Matrix<S>* values;
  const Matrix<S>* features;
  Kernel kernel;
  Request request;
  BlockPlan plan;
  S query_factor = S(1);  ///< Q̃ = query_factor · X
  Vector<S> key_bias;     ///< neg_sq_dist: −scale‖y_j‖²; neg_dist_pow: ‖y_j‖²; dot: empty
  Vector<S> query_norm2;  ///< ‖x_i‖² for the distance scores; empty for dot
  Index e = 0, f = 0;
};

/// Per-thread buffers, allocated once per call and reused for every block.
template <class S>
struct Workspace {
  Block<S> q, t, score, a_out, a_mean, a_cross, a_second, vb, bb;
  Vector<S> shift, sum, a_score, score_acc;
  std::vector<LogSumExp<S>> state, partial;

  explicit Workspace(const Setup<S>& s) {
    const Index qb = s.plan.query_block, kb = s.plan.key_block;
    q.resize(qb, s.x.cols());
    t.resize(qb, kb);
    shift.resize(qb);
    sum.resize(qb);
    state.resize(qb);
    partial.resize(qb);
    if (s.request.out) a_out.resize(qb, s.e);
    if (s.request.feature_mean) a_mean.resize(qb, s.f);
    if (s.request.cross_moment) {
      a_cross.resize(qb, s.e * s.f);
      vb.resize(kb, s.e * s.f);
    }
    if (s.request.feature_second_moment) {
      a_second.resize(qb, s.f * s.f);
      bb.resize(kb, s.f * s.f);
    }
    if (s.request.expected_score) {
      score.resize(qb, kb);
      a_score.resize(qb);
      score_acc.resize(qb);
    }
  }
};

/// Row-wise outer products: row k of out is (u_k ⊗ w_k) flattened row-major (u_k w_kᵀ).
template <class S, class U, class W, class Out>
void outer_rows(const U& u, const W& w, Out& out) {
  for (Index k = 0; k < u.rows(); ++k)
    for (Index a = 0; a < u.cols(); ++a) out.row(k).segment(a * w.cols(), w.cols()) = u(k, a) * w.row(k);
}

/// One row of the log-kernel block → softmax weights relative to the row maximum; fills the partial state.
template <class S, class Row>
void exponentiate_row(Row row, LogSumExp<S>& partial) {
  constexpr S inf = std::numeric_limits<S>::infinity();
  partial = LogSumExp<S>::identity();
  S mu = row.maxCoeff();
  if (!(mu < inf)) {  // +inf or NaN entries (score overflow): push()'s semantics, then drop them
    mu = -inf;
    for (Index j = 0; j < row.size(); ++j) {
      S& t = row(j);
      if (t != t) {
        partial.nan = true;
        t = -inf;
      } else if (t == inf) {
        partial.positive_infinity = true;
        t = -inf;
      } else {
        mu = std::max(mu, t);
      }
    }
  }
  if (mu == -inf) {                        // every entry hidden or of weight zero: an empty partial
    if (row.hasNaN()) partial.nan = true;  // a NaN that maxCoeff skipped
    row.setZero();
    return;
  }
  row.array() = (row.array() - mu).exp();
  S sigma = row.sum();
  if (sigma != sigma) {  // a NaN entry that maxCoeff skipped
    partial.nan = true;
    for (Index j = 0; j < row.size(); ++j)
      if (row(j) != row(j)) row(j) = S(0);
    sigma = row.sum();
  }
  partial.shift = mu;
  partial.scaled_sum = sigma;
  partial.empty = false;
}

template <class S>
void process_query_block(const Setup<S>& s, Index i0, Index rows, Workspace<S>& ws, Result<S>& result) {
  constexpr S inf = std::numeric_limits<S>::infinity();
  const Index m = s.y.rows();
  const Request& req = s.request;
  auto q = ws.q.topRows(rows);
  q.noalias() = s.query_factor * s.x.middleRows(i0, rows);
  for (Index r = 0; r < rows; ++r) ws.state[r] = LogSumExp<S>::identity();
  if (req.expected_score) ws.score_acc.head(rows).setZero();

  for (Index j0 = 0; j0 < m; j0 += s.plan.key_block) {
    const Index cols = std::min(s.plan.key_block, m - j0);
    const BlockVisibility visibility = block_visibility(s.kernel.mask, i0, i0 + rows, j0, j0 + cols);
    if (visibility == BlockVisibility::hidden) continue;

    auto t = ws.t.topLeftCorner(rows, cols);
    t.noalias() = q * s.y.middleRows(j0, cols).transpose();
    switch (s.kernel.score) {
      case ScoreKind::dot:
        break;
      case ScoreKind::neg_sq_dist:
        t.rowwise() += s.key_bias.segment(j0, cols).transpose();
        break;
      case ScoreKind::neg_dist_pow: {
        const S half_power = S(s.kernel.power / 2), scale = S(s.kernel.scale);
        for (Index r = 0; r < rows; ++r) {
          auto d2 =
              (t.row(r).array() + s.key_bias.segment(j0, cols).transpose().array() + s.query_norm2[i0 + r])
                  .max(S(0));
          if (half_power == S(1))
            t.row(r).array() = -scale * d2;
          else if (half_power == S(0.5))
            t.row(r).array() = -scale * d2.sqrt();
          else
            t.row(r).array() = -scale * (half_power * d2.log()).exp();
        }
        break;
      }
    }
    if (req.expected_score) ws.score.topLeftCorner(rows, cols) = t;
    if (s.log_weights) t.rowwise() += s.log_weights->segment(j0, cols).transpose();
    if (visibility == BlockVisibility::partial) {
      for (Index r = 0; r < rows; ++r) {
        const Index i = i0 + r;
        if (s.kernel.mask == MaskKind::causal) {  // hide j > i
          const Index first = std::clamp<Index>(i + 1 - j0, 0, cols);
          t.row(r).tail(cols - first).setConstant(-inf);
        } else {  // anticausal: hide j < i
          t.row(r).head(std::clamp<Index>(i - j0, 0, cols)).setConstant(-inf);
        }
      }
    }
    for (Index r = 0; r < rows; ++r) exponentiate_row<S>(t.row(r), ws.partial[r]);

    if (req.out) ws.a_out.topRows(rows).noalias() = t * s.values->middleRows(j0, cols);
    if (req.feature_mean) ws.a_mean.topRows(rows).noalias() = t * s.features->middleRows(j0, cols);
    if (req.cross_moment) {
      auto vb = ws.vb.topRows(cols);
      outer_rows<S>(s.values->middleRows(j0, cols), s.features->middleRows(j0, cols), vb);
      ws.a_cross.topRows(rows).noalias() = t * vb;
    }
    if (req.feature_second_moment) {
      auto bb = ws.bb.topRows(cols);
      outer_rows<S>(s.features->middleRows(j0, cols), s.features->middleRows(j0, cols), bb);
      ws.a_second.topRows(rows).noalias() = t * bb;
    }
    if (req.expected_score)
      ws.a_score.head(rows) = t.cwiseProduct(ws.score.topLeftCorner(rows, cols)).rowwise().sum();

    for (Index r = 0; r < rows; ++r) {
      const Rescale<S> k = ws.state[r].merge(ws.partial[r]);
      const Index i = i0 + r;
      if (req.out) result.out.row(i) = k.self * result.out.row(i) + k.other * ws.a_out.row(r);
      if (req.feature_mean)
        result.feature_mean.row(i) = k.self * result.feature_mean.row(i) + k.other * ws.a_mean.row(r);
      if (req.cross_moment)
        result.cross_moment.row(i) = k.self * result.cross_moment.row(i) + k.other * ws.a_cross.row(r);
      if (req.feature_second_moment)
        result.feature_second_moment.row(i) =
            k.self * result.feature_second_moment.row(i) + k.other * ws.a_second.row(r);
      if (req.expected_score) ws.score_acc[r] = k.self * ws.score_acc[r] + k.other * ws.a_score[r];
    }
  }

  // Finalise: lse_i = μ + log σ (+ the row constant of neg_sq_dist), outputs divided by σ.
  for (Index r = 0; r < rows; ++r) {
    const Index i = i0 + r;
    const LogSumExp<S>& state = ws.state[r];
    const S row_constant =
        s.kernel.score == ScoreKind::neg_sq_dist ? S(-s.kernel.scale) * s.query_norm2[i] : S(0);
    result.lse[i] = state.finalize() + row_constant;
    // Without mass (impossible for a validated problem unless a score overflowed) there is no softmax row.
    const S inv = state.has_mass() ? S(1) / state.scaled_sum : std::numeric_limits<S>::quiet_NaN();
    if (req.out) result.out.row(i) *= inv;
    if (req.feature_mean) result.feature_mean.row(i) *= inv;
    if (req.cross_moment) result.cross_moment.row(i) *= inv;
    if (req.feature_second_moment) result.feature_second_moment.row(i) *= inv;
    if (req.expected_score) result.expected_score[i] = ws.score_acc[r] * inv + row_constant;
  }
}

}  // namespace

template <class S>
Result<S> reduce_blocked(const Problem<S>& projected, const Kernel& kernel, const Request& request,
                         const Options& options) {
  const Matrix<S>& x = *projected.queries;
  const Matrix<S>& y = *projected.keys;
  const Index n = x.rows(), m = y.rows();
  Setup<S> s{x,
             y,
             projected.log_weights,
             projected.values,
             projected.features,
             kernel,
             request,
             plan_blocks(n, m, options,
                         threads_for(double(n) * double(m) *
                                     double(x.cols() + (projected.values ? projected.values->cols() : 0) +
                                            (projected.features ? projected.features->cols() : 0)))),
             S(1),
             Vector<S>(),
             Vector<S>(),
             0,
             0};
  s.e = projected.values ? projected.values->cols() : 0;
  s.f = projected.features ? projected.features->cols() : 0;
  const S scale = S(kernel.scale);
  switch (kernel.score) {
    case ScoreKind::dot:
      s.query_factor = scale;
      break;
    case ScoreKind::neg_sq_dist:
      s.query_factor = S(2) * scale;
      s.key_bias = -scale * y.rowwise().squaredNorm();
      s.query_norm2 = x.rowwise().squaredNorm();
      break;
    case ScoreKind::neg_dist_pow:
      s.query_factor = S(-2);
      s.key_bias = y.rowwise().squaredNorm();
      s.query_norm2 = x.rowwise().squaredNorm();
      break;
  }

  Result<S> result;
  result.lse.resize(n);
  if (request.out) result.out = Matrix<S>::Zero(n, s.e);
  if (request.feature_mean) result.feature_mean = Matrix<S>::Zero(n, s.f);
  if (request.cross_moment) result.cross_moment = Matrix<S>::Zero(n, s.e * s.f);
  if (request.feature_second_moment) result.feature_second_moment = Matrix<S>::Zero(n, s.f * s.f);
  if (request.expected_score) result.expected_score.resize(n);

  const Index query_block = s.plan.query_block;
  const Index blocks = (n + query_block - 1) / query_block;
#pragma omp parallel num_threads(s.plan.threads)
  {
    // Eigen parallelises a GEMM itself with omp_get_max_threads() threads when called outside an active
    // parallel region (e.g. here with one thread); keep every GEMM single-threaded inside our tasks.
    omp_set_num_threads(1);
    Workspace<S> ws(s);
#pragma omp for schedule(dynamic, 1)
    for (Index blk = 0; blk < blocks; ++blk) {
      const Index i0 = blk * query_block;
      process_query_block(s, i0, std::min(query_block, n - i0), ws, result);
    }
  }
  return result;
}

#define REGATTA_PAIRWISE_BLOCKED(S) \
  template Result<S> reduce_blocked<S>(const Problem<S>&, const Kernel&, const Request&, const Options&);
REGATTA_FOR_EACH_HARDWARE_SCALAR(REGATTA_PAIRWISE_BLOCKED)
#undef REGATTA_PAIRWISE_BLOCKED

}  // namespace regatta::pairwise::detail
