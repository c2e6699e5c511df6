#pragma once
// Internal: the rotary position embedding (RoPE) of queries and keys (layer.hpp, "Rotary position
// embeddings"), shared by the streamed double path (attention.cpp) and the generic blocks (block.cpp,
// block_derivatives.cpp).
//
// Row i of a head's Q (or K) is rotated in the planes (a, a + d_h/2), a = 0..d_h/2−1, by φ_{i,a} =
// i·θ^(−2a/d_h):  (x, y) ↦ (x cos φ − y sin φ, y cos φ + x sin φ). The map is orthogonal for each row, so its
// transpose (the VJP) is the rotation by −φ.
//
// The tables, per scalar type:
//   double          cos and sin (std::) of the binary64 angle i·pow(θ, −2a/d_h): an estimate, as every
//                   double result (the angle is off by a few ulp times i; |Δcos|, |Δsin| ≤ |Δφ|).
//   mpfr            the midpoint of the MPFI enclosure below, at the working precision.
//   interval,       MPFI enclosures, computed at 32 bits above the working precision (interval) or at 85
//   interval64      bits (interval64) and rounded outward: exp(−(2a/d_h)·log θ) times i, then cos and sin,
//                   each rounded outward, so the tables contain cos φ and sin φ of the exact angle for the
//                   binary64 θ stored in the layer, and certified results enclose the exact rotary map.
#include <regatta/core/eigen.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::operators::detail {

/// cos φ_{i,a} and sin φ_{i,a}, i = 0..positions−1, a = 0..d_h/2−1 (positions × d_h/2 each).
template <class S>
struct RotaryTables {
  Matrix<S> cos, sin;
};

/// The tables for rows 0..positions−1 (see the file comment for what they hold per type).
template <class S>
RotaryTables<S> rotary_tables(const Rotary& rotary, Eigen::Index positions, int head_dim);

/// Rotates the head vector z (length d_h: a Vector, or a row of a matrix) in place as the token at
/// `position`: by φ_position (forward) or by −φ_position (transpose = inverse, for cotangents).
template <class S, class HeadVector>
void rotate_at(HeadVector&& z, const RotaryTables<S>& tables, Eigen::Index position, bool transpose = false) {
  const Eigen::Index half = z.size() / 2;
  for (Eigen::Index a = 0; a < half; ++a) {
    const S c = tables.cos(position, a),
            s = transpose ? S(-tables.sin(position, a)) : tables.sin(position, a);
    const S x = z(a), y = z(a + half);
    z(a) = x * c - y * s;
    z(a + half) = y * c + x * s;
  }
}

/// Rotates the rows of Z (n × d_h, n ≤ the table's positions) in place, row i as position i.
template <class S>
void rotate_rows(Matrix<S>& Z, const RotaryTables<S>& tables, bool transpose = false) {
  for (Eigen::Index i = 0; i < Z.rows(); ++i) rotate_at(Z.row(i), tables, i, transpose);
}

}  // namespace regatta::operators::detail
