#pragma once
// regatta::pairwise::cuda — the streamed pairwise reduction (pairwise.hpp) on an NVIDIA GPU.
//
// Plain C++: no CUDA type appears here, and the header is usable whether or not regatta was built with CUDA
// (REGATTA_CUDA=AUTO|ON|OFF). The kernels live in a private library (core/cuda) that share the reduction
// object LogSumExp (online_softmax.hpp) with the CPU paths.
//
// What the GPU path computes: lse_i = log Σ_j exp(t_ij) and out_i = Σ_j π_ij v_j (Request::out) for every
// score (dot, neg_sq_dist, neg_dist_pow), every mask and log-weights ω_j ∈ [−inf, inf), with the optional
// linear maps of Problem applied on the host first. Distance scores use the difference form ‖x_i − y_j‖²
// (no cancellation). Arithmetic and accumulation are in S (float or double) on device 0, so the accuracy is
// that of the CPU path at the same S; tests/core/pairwise/cuda_test.cpp compares the two.
//
// Limits and errors (InputError, subject "cuda reduce"):
//   * every problem of pairwise::validate (shapes, non-finite inputs, rows with no visible key, ...);
//   * feature_mean, cross_moment, feature_second_moment, expected_score: not supported on the GPU path (use
//     pairwise::reduce);
//   * d (after the maps) and e at most max_dimension (256);
//   * the GPU path is unavailable (built without CUDA, or no usable device): availability().reason says why.
//     There is no silent fallback to the CPU.
// A failing CUDA call (out of device memory, a launch error) throws std::runtime_error carrying CUDA's
// error string. Memory: O((n + m)·(d + e)) on the device, as on the host.
#include <cstdint>
#include <string>

#include <regatta/core/pairwise.hpp>

namespace regatta::pairwise::cuda {

/// Whether cuda::reduce can run here, and why not.
struct Availability {
  bool available = false;
  std::string reason;       ///< why not (empty when available)
  std::string device_name;  ///< the device used (device 0) when available
};

/// Checks the build (REGATTA_CUDA) and the devices present (cudaGetDeviceCount), once per process.
Availability availability();

/// The largest d (after the maps) and e the GPU path accepts.
inline constexpr std::int64_t max_dimension = 256;

/// The reduction of pairwise.hpp on the GPU, for S = float or double; see the header comment for what is
/// supported and which errors are thrown.
template <class S>
Result<S> reduce(const Problem<S>& problem, const Kernel& kernel, const Request& request = {});

#define REGATTA_PAIRWISE_CUDA_EXTERN(S) \
  extern template Result<S> reduce<S>(const Problem<S>&, const Kernel&, const Request&);
REGATTA_FOR_EACH_HARDWARE_SCALAR(REGATTA_PAIRWISE_CUDA_EXTERN)
#undef REGATTA_PAIRWISE_CUDA_EXTERN

}  // namespace regatta::pairwise::cuda
