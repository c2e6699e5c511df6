#pragma once
// Internal interface of the private library regatta_cuda (core/cuda/pairwise_kernels.cu): plain C++
// declarations, no CUDA types, so that the facade core/src/pairwise/cuda_facade.cpp compiles with the host
// compiler alone. Not installed; users call regatta::pairwise::cuda (pairwise_cuda.hpp).
//
// Every function throws std::runtime_error carrying the CUDA error string when a CUDA call fails; device
// memory is released on every path.
#include <cstdint>
#include <string>

namespace regatta::pairwise::cuda::detail {

/// The largest feature dimension d (after the linear maps) and value dimension e the kernel supports:
/// each lane of a warp holds max_dimension / 32 coordinates of its query and of its output accumulator.
inline constexpr std::int64_t max_dimension = 256;

/// ScoreKind and MaskKind of pairwise.hpp as plain integers (this header does not include Eigen).
enum class Score : int { dot = 0, neg_sq_dist = 1, neg_dist_pow = 2 };
enum class Mask : int { none = 0, causal = 1, anticausal = 2 };

/// Shapes and kernel parameters of one reduction. Row-major host arrays: x n×d, y m×d, v m×e.
struct Shape {
  std::int64_t n = 0;
  std::int64_t m = 0;
  std::int64_t d = 0;
  std::int64_t e = 0;  ///< 0: no values, out is not written
  Score score = Score::dot;
  Mask mask = Mask::none;
  double scale = 1.0;
  double power = 1.0;
};

/// Number of CUDA devices; 0 with *error set to the reason when none is usable (error may be null).
int device_count(std::string* error);

/// Name of device 0 (empty when it cannot be read).
std::string device_name();

/// lse (n) and, when shape.e > 0, out (n×e, row-major) of the streamed reduction on device 0. Host pointers;
/// log_weights may be null (all 0), values may be null when shape.e == 0. Inputs must already be validated
/// (d, e ≤ max_dimension).
void reduce_f32(const float* x, const float* y, const float* log_weights, const float* values, float* lse,
                float* out, const Shape& shape);
void reduce_f64(const double* x, const double* y, const double* log_weights, const double* values,
                double* lse, double* out, const Shape& shape);

/// As reduce_*, then `repetitions` more launches on the same device data; returns the mean kernel time in
/// milliseconds (CUDA events; no transfers). For bench/gpu.
double time_f32(const float* x, const float* y, const float* log_weights, const float* values, float* lse,
                float* out, const Shape& shape, int repetitions);
double time_f64(const double* x, const double* y, const double* log_weights, const double* values,
                double* lse, double* out, const Shape& shape, int repetitions);

}  // namespace regatta::pairwise::cuda::detail
