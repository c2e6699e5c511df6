#include <algorithm>
#include <limits>
#include <regatta/core/checks.hpp>
#include <regatta/core/decimal.hpp>
#include <sstream>

namespace regatta {

double normalisation_tolerance(std::size_t n) {
  return 64.0 * static_cast<double>(n) * std::numeric_limits<double>::epsilon();
}

double stored_weights_tolerance(std::size_t n, double roundoff) {
  return std::max(normalisation_tolerance(n), std::min(4.0 * static_cast<double>(n) * roundoff, 0x1p-7));
}

namespace {
std::string str(std::string_view s) { return std::string(s); }
}  // namespace

void check_shape(std::string_view name, Eigen::Index rows, Eigen::Index cols, Eigen::Index expected_rows,
                 Eigen::Index expected_cols) {
  if (rows != expected_rows || cols != expected_cols) {
    std::ostringstream os;
    os << "expected shape (" << expected_rows << ", " << expected_cols << "), got (" << rows << ", " << cols
       << ")";
    throw InputError(str(name), os.str());
  }
}

void check_rows(std::string_view name, Eigen::Index rows, Eigen::Index expected_rows) {
  if (rows != expected_rows)
    throw InputError(str(name),
                     "expected " + std::to_string(expected_rows) + " rows, got " + std::to_string(rows));
}

void check_cols(std::string_view name, Eigen::Index cols, Eigen::Index expected_cols) {
  if (cols != expected_cols)
    throw InputError(str(name),
                     "expected " + std::to_string(expected_cols) + " columns, got " + std::to_string(cols));
}

void check_nonempty(std::string_view name, Eigen::Index size) {
  if (size <= 0) throw InputError(str(name), "is empty");
}

void check_positive(std::string_view name, double value) {
  if (!(value > 0) || !std::isfinite(value)) {
    std::ostringstream os;
    os << "must be positive and finite, got " << value;
    throw InputError(str(name), os.str());
  }
}

void check_in_range(std::string_view name, double value, double lo, double hi) {
  if (!(value >= lo && value <= hi)) {
    std::ostringstream os;
    os << "must lie in [" << lo << ", " << hi << "], got " << value;
    throw InputError(str(name), os.str());
  }
}

namespace detail {

void fail_entry(std::string_view name, Eigen::Index row, Eigen::Index col, Eigen::Index cols,
                std::string_view problem) {
  std::ostringstream os;
  if (cols == 1)
    os << "entry " << row << " " << problem;
  else
    os << "entry (" << row << ", " << col << ") " << problem;
  throw InputError(str(name), os.str());
}

void fail_sum(std::string_view name, double sum, double tolerance) {
  throw InputError(str(name), "weights must sum to 1 (tolerance " + nearest_decimal(tolerance, 17) +
                                  "), they sum to " + nearest_decimal(sum, 17));
}

}  // namespace detail
}  // namespace regatta
