#pragma once
// Small helpers shared by the report sections: grids, the built-in one-dimensional layers, interval
// endpoints as doubles rounded outward, and the wording of numbers in findings.
#include <cstdint>
#include <string>
#include <vector>

#include <regatta/core/scalar.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>

#include "table.hpp"

namespace regatta::cli::report {

/// `count` ≥ 2 values from lo to hi (> 0), equally spaced in log scale (both ends included).
std::vector<double> log_grid(double lo, double hi, int count);
/// Distinct integers from lo to hi, about `count` of them, equally spaced in log scale (both ends included).
std::vector<std::int64_t> integer_log_grid(std::int64_t lo, std::int64_t hi, int count);

/// The single-head layer on R¹ with scalar weights W^Q = q, W^K = k, W^V = v, W^O = o (d = d_h = d_v = 1):
/// dot-product scores q·k·x_i·x_j, or L2 (tied when q = k) with values A·x·v·o, A = q².
operators::AttentionLayer scalar_layer(operators::AttentionKind kind, double q, double k, double v, double o);

/// Interval endpoints as doubles: the lower end rounded down, the upper end rounded up (±inf on overflow).
double lower_double(const interval& x);
double upper_double(const interval& x);

/// "12.3456 (certified lower bound)": a number with its kind, rounded outward when certified.
std::string said(double value, Kind kind, int digits = 6);

}  // namespace regatta::cli::report
