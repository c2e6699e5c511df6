#pragma once
// Forward-mode derivatives, batched reverse mode, Jacobians and their enclosures over a box, for a Graph with
// one input and one output, both flattened row-major (docs/graph.md#forward-mode-and-jacobian-enclosures).
//
// WHAT IS CERTIFIED. With S = double every result is the binary64 derivative at a point: an ESTIMATE (no
// rounding error is bounded; at the kink of ReLU the derivative 0 is used). With S = interval64 or interval
// (MPFI) and the point x a box (each coordinate an interval), every result is an enclosure, rounded outward,
// of the exact derivative at every point of the box (binary64 constants taken as exact reals), with the
// generalised derivative [0, 1] of ReLU at its kink: CERTIFIED. An entry may be unbounded (or NaN) where a
// range became unbounded or a denominator's range reached 0: nothing is certified for it then.
#include <cstddef>
#include <vector>

#include <regatta/core/scalar.hpp>
#include <regatta/graph/graph.hpp>

namespace regatta::graph {

/// J(x)·v: one forward, one tangent sweep (forward mode). Throws InputError naming graph.source when the
/// graph does not have one input and one output or x or v is not the input's size.
template <class S>
std::vector<S> jvp(const Graph& graph, const std::vector<S>& x, const std::vector<S>& v);

/// J(x)·v for each v, sharing one forward.
template <class S>
std::vector<std::vector<S>> jvps(const Graph& graph, const std::vector<S>& x,
                                 const std::vector<std::vector<S>>& vs);

/// J(x)ᵀ·w (the gradient of Σ_k w_k·y_k) for each w (the output's size), sharing one forward; S = double,
/// interval64 or interval (MPFI). With interval64 over a box this encloses ∇(w·y) over the box at the cost of
/// one reverse sweep, where the whole Jacobian enclosure costs one per output (or per input).
template <class S>
std::vector<std::vector<S>> vjps(const Graph& graph, const std::vector<S>& x,
                                 const std::vector<std::vector<S>>& ws);

/// A Jacobian, outputs × inputs, row-major: ∂y_i/∂x_j at data[i·cols + j].
template <class S>
struct Jacobian {
  std::size_t rows = 0, cols = 0;
  std::vector<S> data;
  const S& operator()(std::size_t i, std::size_t j) const { return data[i * cols + j]; }
};

/// J(x) in binary64 (ESTIMATE): by rows of reverse mode when the output is not larger than the input, by
/// columns of forward mode otherwise (one sweep per row or column after one shared forward).
Jacobian<double> jacobian(const Graph& graph, const std::vector<double>& x);

/// Every entry of J over the box [lo, hi] (lo ≤ hi, finite), in interval64: CERTIFIED. Rows or columns as
/// for jacobian. Throws InputError naming graph.source for a box that is not sized like the input, not
/// finite, or has lo_j > hi_j.
Jacobian<interval64> jacobian_enclosure(const Graph& graph, const std::vector<double>& lo,
                                        const std::vector<double>& hi);

/// Every entry of J at the point x, computed in MPFI at `bits` bits and rounded outward to interval64:
/// CERTIFIED, and far narrower than jacobian_enclosure(x, x) where the binary64 rounding widths of the
/// interval64 sweep are amplified (LayerNorms of rows with a tiny spread). Throws InputError naming
/// graph.source for an x not sized like the input or not finite.
Jacobian<interval64> jacobian_enclosure_at(const Graph& graph, const std::vector<double>& x, int bits = 128);

/// The box [lo, hi] as intervals, checked as for jacobian_enclosure.
std::vector<interval64> input_box(const Graph& graph, const std::vector<double>& lo,
                                  const std::vector<double>& hi);

#define REGATTA_GRAPH_JVP(S)                                                                         \
  extern template std::vector<S> jvp<S>(const Graph&, const std::vector<S>&, const std::vector<S>&); \
  extern template std::vector<std::vector<S>> jvps<S>(const Graph&, const std::vector<S>&,           \
                                                      const std::vector<std::vector<S>>&);
REGATTA_GRAPH_JVP(double)
REGATTA_GRAPH_JVP(::regatta::interval64)
REGATTA_GRAPH_JVP(::regatta::interval)
#undef REGATTA_GRAPH_JVP
extern template std::vector<std::vector<double>> vjps<double>(const Graph&, const std::vector<double>&,
                                                              const std::vector<std::vector<double>>&);
extern template std::vector<std::vector<interval64>> vjps<interval64>(
    const Graph&, const std::vector<interval64>&, const std::vector<std::vector<interval64>>&);
extern template std::vector<std::vector<interval>> vjps<interval>(const Graph&, const std::vector<interval>&,
                                                                  const std::vector<std::vector<interval>>&);

}  // namespace regatta::graph
