// Elementwise nonlinear nodes on affine forms (operands.hpp, docs/models.md#the-graph-pass): relu, gelu, erf,
// tanh, sigmoid, sqrt, reciprocal and pow with a constant exponent, each by nonlinear.hpp's linearisation
// (tangent plus a Lagrange remainder, or a chord) with one fresh symbol per entry; and add, sub, mul, div of
// two forms: sums exactly, products with their deviation product as a fresh symbol (products.hpp), quotients
// as products with the reciprocal. Certified: every output form encloses the exact real function of its
// inputs' forms at every point of the input set.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "../nonlinear.hpp"
#include "../products.hpp"
#include "operands.hpp"

namespace regatta::operators::affine::gp {

namespace {

/// y = λ·x + μ entrywise with point λ, μ.
Form scaled(const Form& F, double lambda, double mu, const Pass& p) {
  return affine_entries(F, I(lambda), std::vector<I>(std::size_t(F.size()), I(mu)), p);
}

/// f on F by linearise (its range of entry e intersected with within[e] when given), one fresh symbol per
/// entry with a remainder, as nonlinear() computes it; `fresh` (when given) gets each entry's column.
Form linearised(const Form& F, Function f, const Pass& p, const std::vector<I>* within,
                std::vector<Index>* fresh) {
  const Linearisation l = linearise(F, f, p, 0, within);
  Form out = affine_entries(F, l.lambda, l.M, p, fresh_count(l.beta));
  if (fresh) {
    fresh->assign(std::size_t(F.size()), -1);
    Index col = p.next;  // add_fresh's numbering
    for (Index e = 0; e < F.size(); ++e)
      if (l.beta(e) > 0) (*fresh)[std::size_t(e)] = col++;
  }
  add_fresh(out, l.beta, p);
  return out;
}

/// The range of each entry of F, intersected with within[e] when given (empty: Vacuous).
std::vector<I> ranges_within(const Form& F, const Pass& p, const std::vector<I>* within) {
  const Vector<double>& rad = radius(F, p);
  std::vector<I> out;
  for (Index e = 0; e < F.size(); ++e) {
    I J = I(F.c(e)) + I::hull(-rad(e), rad(e));
    if (within) {
      const I& w = (*within)[std::size_t(e)];
      const double a = std::max(J.lower(), w.lower()), b = std::min(J.upper(), w.upper());
      if (!(a <= b)) throw Vacuous{};
      J = I::hull(a, b);
    }
    out.push_back(J);
  }
  return out;
}

/// 1/x entrywise, for entries whose range (within within[e] when given) lies on either side of 0: an entry
/// whose range is negative is negated first and its reciprocal negated back (1/x = −1/(−x)), its interval
/// with it. A range that reaches 0: Vacuous.
Form reciprocal_of(const Form& F, const Pass& p, const std::vector<I>* within = nullptr,
                   std::vector<Index>* fresh = nullptr) {
  const std::vector<I> range = ranges_within(F, p, within);
  std::vector<I> sign(std::size_t(F.size()), I(1.0));
  bool flip = false;
  for (Index e = 0; e < F.size(); ++e) {
    if (range[std::size_t(e)].upper() < 0) {
      sign[std::size_t(e)] = I(-1.0);
      flip = true;
    } else if (!(range[std::size_t(e)].lower() > 0)) {
      throw Vacuous{};
    }
  }
  if (!flip) return linearised(F, Function::reciprocal, p, within, fresh);
  std::vector<I> flipped;
  if (within)
    for (Index e = 0; e < F.size(); ++e)
      flipped.push_back(sign[std::size_t(e)].lower() < 0 ? -(*within)[std::size_t(e)]
                                                         : (*within)[std::size_t(e)]);
  const std::vector<I> zero(std::size_t(F.size()), I(0.0));
  return affine_entries(linearised(affine_entries(F, sign, zero, p), Function::reciprocal, p,
                                   within ? &flipped : nullptr, fresh),
                        sign, zero, p);
}

/// The operand broadcast to `out` as a form: a computed operand's own form when no entry moves, else a
/// form made in `storage`.
const Form& spread(const Operand& x, const Shape& out, Form& storage) {
  if (*x.shape == out && !x.constant()) return *x.form;
  storage = *x.shape == out ? form_of(x) : gather_or_zero(form_of(x), broadcast_index(*x.shape, out));
  return storage;
}

/// σ(x) = ½ + ½·tanh(x/2) (exact identity; the halvings are exact in binary64), the intervals halved with x
/// (outward).
Form sigmoid(const Form& F, const Pass& p, const std::vector<I>* within = nullptr,
             std::vector<Index>* fresh = nullptr) {
  std::vector<I> halved;
  if (within)
    for (const I& w : *within) halved.push_back(w * I(0.5));
  return scaled(linearised(scaled(F, 0.5, 0.0, p), Function::tanh, p, within ? &halved : nullptr, fresh), 0.5,
                0.5, p);
}

}  // namespace

bool splittable(graph::Op op) {
  using graph::Op;
  return op == Op::relu || op == Op::gelu || op == Op::erf || op == Op::tanh || op == Op::sigmoid ||
         op == Op::sqrt || op == Op::reciprocal;
}

Form split_transfer(const graph::Node& node, const Form& F, const Pass& p, const std::vector<I>* within,
                    std::vector<Index>* fresh, std::vector<I>* range) {
  using graph::Op;
  if (range) {
    *range = ranges_within(F, p, within);
    if (node.op == Op::sqrt)  // the domain [0, ∞), as linearise takes it
      for (I& J : *range) J = I::hull(std::max(J.lower(), 0.0), std::max(J.upper(), 0.0));
  }
  switch (node.op) {
    case Op::relu:
      return linearised(F, Function::relu, p, within, fresh);
    case Op::gelu:
      return linearised(F,
                        std::get<graph::GeluAttrs>(node.attributes).tanh_approximation ? Function::gelu_tanh
                                                                                       : Function::gelu_erf,
                        p, within, fresh);
    case Op::erf:
      return linearised(F, Function::erf, p, within, fresh);
    case Op::tanh:
      return linearised(F, Function::tanh, p, within, fresh);
    case Op::sigmoid:
      return sigmoid(F, p, within, fresh);
    case Op::sqrt:  // on the domain [0, ∞) of the real function (nonlinear.hpp)
      return linearised(F, Function::sqrt, p, within, fresh);
    case Op::reciprocal:
      return reciprocal_of(F, p, within, fresh);
    default:
      throw std::logic_error("split_transfer: not a splittable node");
  }
}

std::string pow_unsupported(const std::vector<double>& exponent) {
  if (exponent.empty()) return "";
  const double k = exponent.front();
  for (double v : exponent)
    if (v != k) return "an exponent that differs between entries";
  if (k == 0 || k == 1 || k == 2 || k == 3 || k == 0.5 || k == -1) return "";
  return "the exponent " + std::to_string(k) + " (supported: 0, 1, 2, 3, 0.5, -1)";
}

Form elementwise_node(const graph::Node& node, const std::vector<Operand>& in, const Shape& out,
                      const Pass& p) {
  using graph::Op;
  if (splittable(node.op)) return split_transfer(node, *in[0].form, p, nullptr);
  Form first, second;  // the operands' broadcast copies, where they need one
  switch (node.op) {
    case Op::pow: {
      const Form& X = spread(in[0], out, first);
      const double k = in[1].data->empty() ? 1.0 : in[1].data->front();
      if (!pow_unsupported(*in[1].data).empty()) throw std::logic_error("pow: unsupported exponent");
      if (k == 0) return constant_form(std::vector<double>(std::size_t(X.size()), 1.0));
      if (k == 1) return X;
      if (k == 0.5) return nonlinear(X, Function::sqrt, p);
      if (k == -1) return reciprocal_of(X, p);
      const Form square = product(X, X, p);
      return k == 2 ? square : product(square, X, p);
    }
    case Op::add:
    case Op::sub:
      return combine(spread(in[0], out, first), spread(in[1], out, second), node.op == Op::add ? 1.0 : -1.0,
                     p);
    case Op::mul:
      return product(spread(in[0], out, first), spread(in[1], out, second), p);
    case Op::div: {  // x · (1/y); a constant numerator is a constant factor of 1/y
      const Form R = reciprocal_of(spread(in[1], out, second), p);
      if (in[0].constant()) {
        const Form& c = spread(in[0], out, first);
        std::vector<I> lambda(std::size_t(c.size()));
        for (Index e = 0; e < c.size(); ++e)  // the slack: the constant's enclosure radius
          lambda[std::size_t(e)] = I(c.c(e)) + I::hull(-c.s(e), c.s(e));
        return affine_entries(R, lambda, std::vector<I>(lambda.size(), I(0.0)), p);
      }
      return product(spread(in[0], out, first), R, p);
    }
    default:
      throw std::logic_error("elementwise_node: not an elementwise node");
  }
}

}  // namespace regatta::operators::affine::gp
