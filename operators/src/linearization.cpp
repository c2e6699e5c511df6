// The linearisation of a block or stack at a point: JVP and VJP chained through the blocks (pre-norm and
// residual included), and the dense Jacobian column by column (see differentiable.hpp;
// docs/math/jacobian.md).
#include <string>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/scalar.hpp>

#include "block_state.hpp"
#include "tangent_stack.hpp"

namespace regatta::operators {

namespace {
using detail::Mat;
using detail::owning;
}  // namespace

// ---- Linearization ----

namespace {

template <class S>
void check_tangent(const char* name, MatrixRef<S> T, Eigen::Index rows, Eigen::Index cols) {
  check_shape(name, T.rows(), T.cols(), rows, cols);
}

}  // namespace

template <class S>
Eigen::Index Linearization<S>::input_cols() const {
  return states_.front()->X.cols();
}

template <class S>
Mat<S> Linearization<S>::jvp(MatrixRef<S> Xdot) const {
  check_tangent<S>("Xdot", Xdot, rows(), input_cols());
  Mat<S> T = regatta::detail::at_working_precision_all(Xdot);
  for (const auto& st : states_) {
    const Mat<S> Tn = st->norm_jvp(st->X, T);
    Mat<S> next = st->attention_jvp(Tn, Tn);
    if (st->block->options().residual) next += T;
    T = std::move(next);
  }
  return T;
}

template <class S>
std::vector<Mat<S>> Linearization<S>::jvp_all(const std::vector<Mat<S>>& tangents) const {
  for (const auto& t : tangents) check_tangent<S>("Xdot", t, rows(), input_cols());
  if (tangents.empty()) return {};
  Mat<S> T = regatta::detail::at_working_precision_all(detail::stack_tangents(tangents));
  for (const auto& st : states_) T = st->self_jvp_stacked(T, Eigen::Index(tangents.size()));
  return detail::unstack_tangents(T, tangents.size());
}

template <class S>
Mat<S> Linearization<S>::vjp(MatrixRef<S> Fbar) const {
  check_tangent<S>("Fbar", Fbar, rows(), value_.cols());
  Mat<S> G = regatta::detail::at_working_precision_all(Fbar);
  for (auto it = states_.rbegin(); it != states_.rend(); ++it) {
    const BlockState<S>& st = **it;
    Mat<S> Xn_bar, Yn_bar;
    st.attention_vjp(G, Xn_bar, Yn_bar);
    Mat<S> prev = st.norm_vjp(st.X, Mat<S>(Xn_bar + Yn_bar));
    if (st.block->options().residual) prev += G;
    G = std::move(prev);
  }
  return G;
}

template <class S>
Mat<S> CrossLinearization<S>::jvp_query(MatrixRef<S> Xdot) const {
  check_tangent<S>("Xdot", Xdot, state_->X.rows(), state_->X.cols());
  const Mat<S> T = regatta::detail::at_working_precision_all(Xdot);
  Mat<S> out = state_->attention_jvp(state_->norm_jvp(state_->X, T), Mat<S>());
  if (state_->block->options().residual) out += T;
  return out;
}

template <class S>
Mat<S> CrossLinearization<S>::jvp_context(MatrixRef<S> Ydot) const {
  check_tangent<S>("Ydot", Ydot, state_->Y.rows(), state_->Y.cols());
  const Mat<S> T = regatta::detail::at_working_precision_all(Ydot);
  return state_->attention_jvp(Mat<S>(), state_->norm_jvp(state_->Y, T));
}

template <class S>
Mat<S> CrossLinearization<S>::vjp_query(MatrixRef<S> Fbar) const {
  check_tangent<S>("Fbar", Fbar, value_.rows(), value_.cols());
  const Mat<S> G = regatta::detail::at_working_precision_all(Fbar);
  Mat<S> Xn_bar, Yn_bar;
  state_->attention_vjp(G, Xn_bar, Yn_bar);
  Mat<S> out = state_->norm_vjp(state_->X, Xn_bar);
  if (state_->block->options().residual) out += G;
  return out;
}

template <class S>
Mat<S> CrossLinearization<S>::vjp_context(MatrixRef<S> Fbar) const {
  check_tangent<S>("Fbar", Fbar, value_.rows(), value_.cols());
  const Mat<S> G = regatta::detail::at_working_precision_all(Fbar);
  Mat<S> Xn_bar, Yn_bar;
  state_->attention_vjp(G, Xn_bar, Yn_bar);
  return state_->norm_vjp(state_->Y, Yn_bar);
}

// ---- Stack ----

template <class S>
Stack<S>::Stack(std::vector<Block<S>> blocks) : blocks_(std::move(blocks)) {
  if (blocks_.empty()) throw InputError("stack", "needs at least one block");
  for (std::size_t l = 1; l < blocks_.size(); ++l)
    if (blocks_[l].d() != blocks_[0].d())
      throw InputError("stack", "block " + std::to_string(l) + " has d = " + std::to_string(blocks_[l].d()) +
                                    ", block 0 has d = " + std::to_string(blocks_[0].d()));
}

template <class S>
Mat<S> Stack<S>::forward(const Mat<S>& X) const {
  Mat<S> Z = X;
  for (const auto& b : blocks_) Z = b.forward(Z);
  return Z;
}

template <class S>
Linearization<S> Stack<S>::linearize(MatrixRef<S> X) const {
  Linearization<S> lin;
  Mat<S> Z = X;
  for (const auto& b : blocks_) {
    auto st = owning(b.state(Z, Z, true), b);
    Z = st->value();
    lin.states_.push_back(std::move(st));
  }
  lin.value_ = std::move(Z);
  return lin;
}

// ---- dense Jacobians ----

namespace {

template <class S, class Apply>
Mat<S> columns_from(Apply apply, Eigen::Index in_rows, Eigen::Index in_cols, Eigen::Index out_size) {
  Mat<S> J(out_size, in_rows * in_cols);
  Mat<S> E = Mat<S>::Zero(in_rows, in_cols);
  for (Eigen::Index j = 0; j < in_rows; ++j)
    for (Eigen::Index b = 0; b < in_cols; ++b) {
      E(j, b) = S(1);
      const Mat<S> col = apply(E);
      E(j, b) = S(0);
      for (Eigen::Index r = 0; r < col.rows(); ++r)
        for (Eigen::Index c = 0; c < col.cols(); ++c) J(r * col.cols() + c, j * in_cols + b) = col(r, c);
    }
  return J;
}

}  // namespace

template <class S>
Mat<S> dense_jacobian(const Linearization<S>& lin) {
  return columns_from<S>([&](const Mat<S>& E) { return lin.jvp(E); }, lin.rows(), lin.input_cols(),
                         lin.value().size());
}

template <class S>
Mat<S> dense_jacobian_query(const CrossLinearization<S>& lin, Eigen::Index n, Eigen::Index d) {
  return columns_from<S>([&](const Mat<S>& E) { return lin.jvp_query(E); }, n, d, lin.value().size());
}

template <class S>
Mat<S> dense_jacobian_context(const CrossLinearization<S>& lin, Eigen::Index m, Eigen::Index d) {
  return columns_from<S>([&](const Mat<S>& E) { return lin.jvp_context(E); }, m, d, lin.value().size());
}

#define REGATTA_INSTANTIATE(S)                                                                          \
  template class Linearization<S>;                                                                      \
  template class CrossLinearization<S>;                                                                 \
  template class Stack<S>;                                                                              \
  template Matrix<S> dense_jacobian<S>(const Linearization<S>&);                                        \
  template Matrix<S> dense_jacobian_query<S>(const CrossLinearization<S>&, Eigen::Index, Eigen::Index); \
  template Matrix<S> dense_jacobian_context<S>(const CrossLinearization<S>&, Eigen::Index, Eigen::Index);
REGATTA_FOR_EACH_EXACT64_SCALAR(REGATTA_INSTANTIATE)
#undef REGATTA_INSTANTIATE

}  // namespace regatta::operators
