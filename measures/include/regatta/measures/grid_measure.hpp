#pragma once
// Grid (discretised) measures on a box (docs/math/transport.md#setting, docs/math/transport.md#quantisation).
//
// The box B = Π_k [lo_k, hi_k] (lo_k < hi_k, finite) is split into cells_k ≥ 1 equal intervals per axis; cell
// widths h_k = (hi_k − lo_k)/cells_k. A GridMeasure holds one mass per cell (nonnegative, finite, summing to
// 1), stored in row-major cell order (the last axis varies fastest). The total number of cells is capped at
// max_grid_cells (InputError "cells" beyond, before any allocation).
//
// Construction:
//   from_density  masses m_c ∝ ρ(centre_c) (midpoint rule; the cell volume is common and cancels), then
//                 normalised. ρ is called once per cell; a negative or non-finite value (InputError
//                 "density", naming the point), or a total that is 0 or not finite, is rejected.
//   from_samples  masses = fraction of the samples in each cell (the box is closed: a sample on hi_k goes to
//                 the last cell). Samples outside the box: OutsideSamples::reject (default) throws
//                 InputError "samples" naming the first one; OutsideSamples::drop discards them, normalises
//                 over the samples inside and reports their number in outside_samples(). NaN/Inf samples
//                 are always rejected.
//
// Quantisation: to_discrete() puts each cell's mass at its centre. Every point of a cell is within
// r = quantisation_radius() = ½ ‖(h_1, …, h_d)‖₂ of its centre, so for any measure ν on B whose cell masses
// are the grid's masses (e.g. the empirical measure of the binned samples, or the density restricted to the
// cells when the masses are the exact cell integrals), moving each cell's mass to the centre is a coupling
// with displacement ≤ r, hence W_p(ν, to_discrete()) ≤ r for every p ≥ 1. For from_density the masses are
// midpoint approximations of the cell integrals: the bound then holds up to the quadrature error, which is
// O(h²) per cell for a C² density (W_p^p ≤ r^p + diam(B)^p · TV(exact masses, midpoint masses)).
#include <cstdint>
#include <functional>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/measures/discrete_measure.hpp>

namespace regatta::measures {

/// Largest number of cells of a grid (10^7 cells: 80 MB of masses, 80·d MB as a discrete measure).
inline constexpr std::int64_t max_grid_cells = 10'000'000;

enum class OutsideSamples { reject, drop };

class GridMeasure {
 public:
  /// Masses given directly (size = total cells; nonnegative, finite, sum 1 within normalisation_tolerance).
  GridMeasure(Vector<double> lo, Vector<double> hi, std::vector<Eigen::Index> cells, Vector<double> masses);

  /// Midpoint quadrature of the density ρ (need not be normalised); see the header comment.
  static GridMeasure from_density(Vector<double> lo, Vector<double> hi, std::vector<Eigen::Index> cells,
                                  const std::function<double(const Vector<double>&)>& density);

  /// Histogram of the rows of `samples` (n × d, n ≥ 1); see the header comment for samples outside the box.
  static GridMeasure from_samples(Vector<double> lo, Vector<double> hi, std::vector<Eigen::Index> cells,
                                  const Matrix<double>& samples,
                                  OutsideSamples outside = OutsideSamples::reject);

  Eigen::Index dim() const { return lo_.size(); }
  const Vector<double>& lo() const { return lo_; }
  const Vector<double>& hi() const { return hi_; }
  const std::vector<Eigen::Index>& cells() const { return cells_; }
  Eigen::Index total_cells() const { return masses_.size(); }
  const Vector<double>& masses() const { return masses_; }
  /// h_k = (hi_k − lo_k)/cells_k.
  Vector<double> cell_widths() const;
  /// Centre of the cell with row-major linear index `cell`.
  Vector<double> cell_centre(Eigen::Index cell) const;
  /// Row-major linear index of the cell containing x (x inside the closed box; asserted).
  Eigen::Index cell_of(const Vector<double>& x) const;
  /// ½ ‖h‖₂: the largest distance from a point of a cell to its centre (the W_p quantisation bound).
  double quantisation_radius() const;
  /// Samples discarded by from_samples(..., OutsideSamples::drop); 0 otherwise.
  std::int64_t outside_samples() const { return outside_samples_; }

  /// Σ_c m_c δ_{centre_c}; cells of mass 0 are omitted unless keep_empty_cells.
  DiscreteMeasure<double> to_discrete(bool keep_empty_cells = false) const;

 private:
  struct Unchecked {};
  GridMeasure(Unchecked, Vector<double> lo, Vector<double> hi, std::vector<Eigen::Index> cells,
              Vector<double> masses, std::int64_t outside = 0)
      : lo_(std::move(lo)),
        hi_(std::move(hi)),
        cells_(std::move(cells)),
        masses_(std::move(masses)),
        outside_samples_(outside) {}
  /// Validates the box and the cell counts, returns the total number of cells.
  static Eigen::Index check_box(const Vector<double>& lo, const Vector<double>& hi,
                                const std::vector<Eigen::Index>& cells);

  Vector<double> lo_, hi_;
  std::vector<Eigen::Index> cells_;
  Vector<double> masses_;
  std::int64_t outside_samples_ = 0;
};

}  // namespace regatta::measures
