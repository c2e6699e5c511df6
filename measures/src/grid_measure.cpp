#include <regatta/core/decimal.hpp>
#include <regatta/measures/grid_measure.hpp>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <sstream>
#include <string>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>

namespace regatta::measures {

namespace {

std::string point_text(const Vector<double>& x) {
  std::string text = "(";
  for (Eigen::Index k = 0; k < x.size(); ++k) text += (k ? ", " : "") + nearest_decimal(x(k));
  return text + ")";
}

}  // namespace

Eigen::Index GridMeasure::check_box(const Vector<double>& lo, const Vector<double>& hi,
                                    const std::vector<Eigen::Index>& cells) {
  if (lo.size() == 0) throw InputError("lo", "the box needs at least one dimension");
  if (hi.size() != lo.size())
    throw InputError("hi",
                     "has " + std::to_string(hi.size()) + " entries, lo has " + std::to_string(lo.size()));
  if (Eigen::Index(cells.size()) != lo.size())
    throw InputError("cells", "has " + std::to_string(cells.size()) + " entries, the box has dimension " +
                                  std::to_string(lo.size()));
  check_finite("lo", lo);
  check_finite("hi", hi);
  std::int64_t total = 1;
  for (Eigen::Index k = 0; k < lo.size(); ++k) {
    if (!(lo(k) < hi(k)))
      throw InputError("hi", "entry " + std::to_string(k) + " must exceed lo (got [" + std::to_string(lo(k)) +
                                 ", " + std::to_string(hi(k)) + "])");
    if (!std::isfinite(hi(k) - lo(k)))
      throw InputError("hi", "the width of axis " + std::to_string(k) + " overflows");
    const Eigen::Index c = cells[std::size_t(k)];
    if (c < 1) throw InputError("cells", "entry " + std::to_string(k) + " must be >= 1");
    if (c > max_grid_cells || total > max_grid_cells / c)
      throw InputError("cells", "the grid has more than " + std::to_string(max_grid_cells) + " cells");
    total *= c;
  }
  return Eigen::Index(total);
}

GridMeasure::GridMeasure(Vector<double> lo, Vector<double> hi, std::vector<Eigen::Index> cells,
                         Vector<double> masses)
    : lo_(std::move(lo)), hi_(std::move(hi)), cells_(std::move(cells)), masses_(std::move(masses)) {
  const Eigen::Index total = check_box(lo_, hi_, cells_);
  if (masses_.size() != total)
    throw InputError("masses", "has " + std::to_string(masses_.size()) + " entries, the grid has " +
                                   std::to_string(total) + " cells");
  check_normalized("masses", masses_);
}

GridMeasure GridMeasure::from_density(Vector<double> lo, Vector<double> hi, std::vector<Eigen::Index> cells,
                                      const std::function<double(const Vector<double>&)>& density) {
  const Eigen::Index total = check_box(lo, hi, cells);
  GridMeasure grid(Unchecked{}, std::move(lo), std::move(hi), std::move(cells), Vector<double>(total));
  long double sum = 0;
  for (Eigen::Index c = 0; c < total; ++c) {
    const Vector<double> x = grid.cell_centre(c);
    const double rho = density(x);
    if (!std::isfinite(rho) || rho < 0)
      throw InputError("density",
                       "is " + std::to_string(rho) + " at " + point_text(x) + " (must be finite and >= 0)");
    grid.masses_(c) = rho;
    sum += rho;
  }
  if (!(sum > 0) || !std::isfinite(double(sum)))
    throw InputError("density", "its midpoint quadrature over the box is " + std::to_string(double(sum)) +
                                    " (must be finite and > 0)");
  grid.masses_ /= double(sum);
  return grid;
}

GridMeasure GridMeasure::from_samples(Vector<double> lo, Vector<double> hi, std::vector<Eigen::Index> cells,
                                      const Matrix<double>& samples, OutsideSamples outside) {
  const Eigen::Index total = check_box(lo, hi, cells);
  check_nonempty("samples", samples.rows());
  check_cols("samples", samples.cols(), lo.size());
  check_finite("samples", samples);
  GridMeasure grid(Unchecked{}, std::move(lo), std::move(hi), std::move(cells), Vector<double>::Zero(total));
  std::int64_t inside = 0;
  for (Eigen::Index i = 0; i < samples.rows(); ++i) {
    const Vector<double> x = samples.row(i).transpose();
    const bool in_box = (x.array() >= grid.lo_.array()).all() && (x.array() <= grid.hi_.array()).all();
    if (!in_box) {
      if (outside == OutsideSamples::reject)
        throw InputError("samples",
                         "row " + std::to_string(i) + " " + point_text(x) +
                             " lies outside the box (use OutsideSamples::drop to discard such samples)");
      ++grid.outside_samples_;
      continue;
    }
    grid.masses_(grid.cell_of(x)) += 1;
    ++inside;
  }
  if (inside == 0) throw InputError("samples", "none lies inside the box");
  grid.masses_ /= double(inside);
  return grid;
}

Vector<double> GridMeasure::cell_widths() const {
  Vector<double> h(dim());
  for (Eigen::Index k = 0; k < dim(); ++k) h(k) = (hi_(k) - lo_(k)) / double(cells_[std::size_t(k)]);
  return h;
}

Vector<double> GridMeasure::cell_centre(Eigen::Index cell) const {
  assert(cell >= 0 && cell < total_cells());
  Vector<double> x(dim());
  for (Eigen::Index k = dim() - 1; k >= 0; --k) {
    const Eigen::Index n = cells_[std::size_t(k)];
    const Eigen::Index index = cell % n;
    cell /= n;
    // lo + (index + ½)·h, written as an interpolation so that the centre stays inside [lo, hi].
    const double t = (double(index) + 0.5) / double(n);
    x(k) = lo_(k) + t * (hi_(k) - lo_(k));
  }
  return x;
}

Eigen::Index GridMeasure::cell_of(const Vector<double>& x) const {
  Eigen::Index cell = 0;
  for (Eigen::Index k = 0; k < dim(); ++k) {
    const Eigen::Index n = cells_[std::size_t(k)];
    assert(x(k) >= lo_(k) && x(k) <= hi_(k));
    const double t = (x(k) - lo_(k)) / (hi_(k) - lo_(k)) * double(n);
    const Eigen::Index index = std::clamp(Eigen::Index(std::floor(t)), Eigen::Index(0), n - 1);
    cell = cell * n + index;
  }
  return cell;
}

double GridMeasure::quantisation_radius() const { return 0.5 * cell_widths().norm(); }

DiscreteMeasure<double> GridMeasure::to_discrete(bool keep_empty_cells) const {
  Eigen::Index kept = 0;
  for (Eigen::Index c = 0; c < total_cells(); ++c) kept += (keep_empty_cells || masses_(c) > 0) ? 1 : 0;
  Matrix<double> atoms(kept, dim());
  Vector<double> weights(kept);
  Eigen::Index row = 0;
  for (Eigen::Index c = 0; c < total_cells(); ++c) {
    if (!keep_empty_cells && !(masses_(c) > 0)) continue;
    atoms.row(row) = cell_centre(c).transpose();
    weights(row) = masses_(c);
    ++row;
  }
  return DiscreteMeasure<double>(std::move(atoms), std::move(weights));
}

}  // namespace regatta::measures
