// The CUDA path of the streamed pairwise reduction (pairwise.hpp): lse_i = log Σ_j exp(t_ij) and
// out_i = Σ_j π_ij v_j with t_ij = s_ij + ω_j (−inf where masked).
//
// Design (simple and checkable, not tuned):
//   * one warp per query i, kWarpsPerBlock queries per thread block;
//   * lane l holds the coordinates c = l + 32·r (r < kPerLane) of its query x_i and of its output
//     accumulator, in registers — hence d, e ≤ 32·kPerLane = detail::max_dimension;
//   * keys are staged through shared memory in tiles of k_tile keys: coordinates y_j (k_tile×d), values
//     v_j (k_tile×e) and log-weights ω_j, loaded cooperatively by the whole block;
//   * for each visible key the warp forms the score by a shuffle reduction of the per-lane partial sums
//     (⟨x_i, y_j⟩ or ‖x_i − y_j‖² in the difference form), every lane pushes the same t_ij into its own copy
//     of LogSumExp<S> (online_softmax.hpp, the reduction object of the CPU paths) and applies the returned
//     Rescale to its slice of the accumulator: acc ← self·acc + other·v_j;
//   * finally lse_i = finalize() and out_i = acc / scaled_sum.
// The mask and ω_j = −inf are tested per (i, j) before any arithmetic; both are uniform within a warp, so
// the shuffles always see all 32 lanes. Accumulation is in S (float or double), like the CPU path.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>

#include <regatta/core/online_softmax.hpp>

#include "pairwise_kernels.hpp"

namespace regatta::pairwise::cuda::detail {
namespace {

constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpSize * kWarpsPerBlock;
constexpr int kPerLane = static_cast<int>(max_dimension / kWarpSize);
static_assert(kPerLane * kWarpSize == max_dimension, "max_dimension must be a multiple of the warp size");
constexpr std::size_t kSharedBytes = 48 * 1024;  // the default dynamic shared-memory limit of a block
constexpr std::int64_t kMaxKeyTile = 64;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorName(status) + ": " +
                             cudaGetErrorString(status));
  }
}

/// Owns one device allocation; freed on every path.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::int64_t count) {
    if (count > 0) check(cudaMalloc(reinterpret_cast<void**>(&data_), bytes(count)), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  void upload(const T* host, std::int64_t count) {
    if (count > 0)
      check(cudaMemcpy(data_, host, bytes(count), cudaMemcpyHostToDevice), "cudaMemcpy (to device)");
  }
  void download(T* host, std::int64_t count) const {
    if (count > 0)
      check(cudaMemcpy(host, data_, bytes(count), cudaMemcpyDeviceToHost), "cudaMemcpy (to host)");
  }

 private:
  static std::size_t bytes(std::int64_t count) { return static_cast<std::size_t>(count) * sizeof(T); }
  T* data_ = nullptr;
};

/// Owns one CUDA event (for timing).
class Event {
 public:
  Event() { check(cudaEventCreate(&event_), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

/// The kernel's parameters, in S.
template <class S>
struct Params {
  std::int64_t n, m;
  int d, e;
  int key_tile;
  Score score;
  Mask mask;
  S scale, power;
};

template <class S>
__device__ S warp_sum(S value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// The score s_ij from the warp-reduced partial sum (⟨x, y⟩ for dot, ‖x − y‖² for the distance scores).
template <class S>
__device__ S score_of(S reduced, const Params<S>& p) {
  switch (p.score) {
    case Score::dot:
      return p.scale * reduced;
    case Score::neg_sq_dist:
      return -p.scale * reduced;
    case Score::neg_dist_pow:
    default: {
      const S distance = sqrt(reduced);
      return -p.scale * (p.power == S(1) ? distance : pow(distance, p.power));
    }
  }
}

template <class S>
__global__ void __launch_bounds__(kThreads)
    pairwise_kernel(const S* __restrict__ x, const S* __restrict__ y, const S* __restrict__ log_weights,
                    const S* __restrict__ values, S* __restrict__ lse, S* __restrict__ out,
                    const Params<S> p) {
  extern __shared__ __align__(16) unsigned char shared_raw[];
  S* const key_tile = reinterpret_cast<S*>(shared_raw);               // key_tile × d
  S* const value_tile = key_tile + std::size_t(p.key_tile) * p.d;     // key_tile × e
  S* const weight_tile = value_tile + std::size_t(p.key_tile) * p.e;  // key_tile

  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const std::int64_t first_query = std::int64_t(blockIdx.x) * kWarpsPerBlock;
  const std::int64_t i = first_query + warp;  // this warp's query (uniform within the warp)
  const bool active = i < p.n;
  const std::int64_t last_query = min(first_query + kWarpsPerBlock, p.n) - 1;

  // Keys that any query of this block can see.
  const std::int64_t key_begin = p.mask == Mask::anticausal ? min(first_query, p.m) : std::int64_t(0);
  const std::int64_t key_end = p.mask == Mask::causal ? min(last_query + 1, p.m) : p.m;

  S query[kPerLane];
  S acc[kPerLane];
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int c = lane + kWarpSize * r;
    query[r] = (active && c < p.d) ? x[i * p.d + c] : S(0);
    acc[r] = S(0);
  }
  LogSumExp<S> reduction = LogSumExp<S>::identity();
  const S neg_inf = -std::numeric_limits<S>::infinity();

  for (std::int64_t tile_begin = key_begin; tile_begin < key_end; tile_begin += p.key_tile) {
    const int count = static_cast<int>(min(std::int64_t(p.key_tile), key_end - tile_begin));
    __syncthreads();  // every warp is done with the previous tile
    for (int k = static_cast<int>(threadIdx.x); k < count * p.d; k += kThreads)
      key_tile[k] = y[tile_begin * p.d + k];
    for (int k = static_cast<int>(threadIdx.x); k < count * p.e; k += kThreads)
      value_tile[k] = values[tile_begin * p.e + k];
    for (int k = static_cast<int>(threadIdx.x); k < count; k += kThreads)
      weight_tile[k] = log_weights != nullptr ? log_weights[tile_begin + k] : S(0);
    __syncthreads();
    if (!active) continue;

    for (int k = 0; k < count; ++k) {
      const std::int64_t j = tile_begin + k;
      if ((p.mask == Mask::causal && j > i) || (p.mask == Mask::anticausal && j < i)) continue;
      const S weight = weight_tile[k];
      if (weight == neg_inf) continue;

      const S* const key = key_tile + std::size_t(k) * p.d;
      S partial = S(0);
#pragma unroll
      for (int r = 0; r < kPerLane; ++r) {
        const int c = lane + kWarpSize * r;
        if (c < p.d) {
          if (p.score == Score::dot) {
            partial += query[r] * key[c];
          } else {
            const S difference = query[r] - key[c];
            partial += difference * difference;
          }
        }
      }
      const S t = score_of(warp_sum(partial), p) + weight;
      const Rescale<S> rescale = reduction.push(t);

      const S* const value = value_tile + std::size_t(k) * p.e;
#pragma unroll
      for (int r = 0; r < kPerLane; ++r) {
        const int c = lane + kWarpSize * r;
        if (c < p.e) acc[r] = rescale.self * acc[r] + rescale.other * value[c];
      }
    }
  }

  if (!active) return;
  if (lane == 0) lse[i] = reduction.finalize();
  const bool has_mass = reduction.has_mass();
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int c = lane + kWarpSize * r;
    if (c < p.e)
      out[i * p.e + c] = has_mass ? acc[r] / reduction.scaled_sum : std::numeric_limits<S>::quiet_NaN();
  }
}

/// Uploads the inputs, runs the kernel once (its results are downloaded), then, when repetitions > 0, runs it
/// that many more times on the same device data and returns the mean kernel time in milliseconds.
template <class S>
double reduce_impl(const S* x, const S* y, const S* log_weights, const S* values, S* lse, S* out,
                   const Shape& shape, int repetitions) {
  if (shape.d < 1 || shape.d > max_dimension || shape.e < 0 || shape.e > max_dimension) {
    throw std::runtime_error("regatta_cuda: dimensions outside the kernel's range (d = " +
                             std::to_string(shape.d) + ", e = " + std::to_string(shape.e) + ")");
  }
  if (shape.n == 0) return 0.0;
  check(cudaSetDevice(0), "cudaSetDevice");

  Params<S> p{};
  p.n = shape.n;
  p.m = shape.m;
  p.d = static_cast<int>(shape.d);
  p.e = static_cast<int>(shape.e);
  p.score = shape.score;
  p.mask = shape.mask;
  p.scale = static_cast<S>(shape.scale);
  p.power = static_cast<S>(shape.power);
  const std::int64_t per_key_bytes = (shape.d + shape.e + 1) * std::int64_t(sizeof(S));
  p.key_tile =
      static_cast<int>(std::clamp<std::int64_t>(std::int64_t(kSharedBytes) / per_key_bytes, 1, kMaxKeyTile));
  const std::size_t shared_bytes = std::size_t(p.key_tile) * std::size_t(per_key_bytes);

  DeviceBuffer<S> d_x(shape.n * shape.d);
  DeviceBuffer<S> d_y(shape.m * shape.d);
  DeviceBuffer<S> d_w(log_weights != nullptr ? shape.m : 0);
  DeviceBuffer<S> d_v(shape.m * shape.e);
  DeviceBuffer<S> d_lse(shape.n);
  DeviceBuffer<S> d_out(shape.n * shape.e);
  d_x.upload(x, shape.n * shape.d);
  d_y.upload(y, shape.m * shape.d);
  if (log_weights != nullptr) d_w.upload(log_weights, shape.m);
  if (shape.e > 0) d_v.upload(values, shape.m * shape.e);

  const std::int64_t blocks = (shape.n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > std::int64_t(std::numeric_limits<int>::max()))
    throw std::runtime_error("regatta_cuda: too many queries");
  const auto launch = [&] {
    pairwise_kernel<S><<<static_cast<unsigned>(blocks), kThreads, shared_bytes>>>(
        d_x.get(), d_y.get(), log_weights != nullptr ? d_w.get() : nullptr, d_v.get(), d_lse.get(),
        d_out.get(), p);
    check(cudaGetLastError(), "pairwise kernel launch");
  };
  launch();
  check(cudaDeviceSynchronize(), "pairwise kernel");

  double milliseconds = 0.0;
  if (repetitions > 0) {
    Event start;
    Event stop;
    check(cudaEventRecord(start.get()), "cudaEventRecord");
    for (int r = 0; r < repetitions; ++r) launch();
    check(cudaEventRecord(stop.get()), "cudaEventRecord");
    check(cudaEventSynchronize(stop.get()), "pairwise kernel (timed)");
    float elapsed = 0.0f;
    check(cudaEventElapsedTime(&elapsed, start.get(), stop.get()), "cudaEventElapsedTime");
    milliseconds = static_cast<double>(elapsed) / repetitions;
  }

  d_lse.download(lse, shape.n);
  if (shape.e > 0) d_out.download(out, shape.n * shape.e);
  return milliseconds;
}

}  // namespace

int device_count(std::string* error) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (error != nullptr) {
      *error = std::string("cudaGetDeviceCount returned ") + cudaGetErrorName(status) + " (" +
               cudaGetErrorString(status) + ")";
    }
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  if (count == 0 && error != nullptr) *error = "cudaGetDeviceCount reported 0 devices";
  return count;
}

std::string device_name() {
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, 0) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  return properties.name;
}

void reduce_f32(const float* x, const float* y, const float* log_weights, const float* values, float* lse,
                float* out, const Shape& shape) {
  reduce_impl<float>(x, y, log_weights, values, lse, out, shape, 0);
}

void reduce_f64(const double* x, const double* y, const double* log_weights, const double* values,
                double* lse, double* out, const Shape& shape) {
  reduce_impl<double>(x, y, log_weights, values, lse, out, shape, 0);
}

double time_f32(const float* x, const float* y, const float* log_weights, const float* values, float* lse,
                float* out, const Shape& shape, int repetitions) {
  return reduce_impl<float>(x, y, log_weights, values, lse, out, shape, repetitions);
}

double time_f64(const double* x, const double* y, const double* log_weights, const double* values,
                double* lse, double* out, const Shape& shape, int repetitions) {
  return reduce_impl<double>(x, y, log_weights, values, lse, out, shape, repetitions);
}

}  // namespace regatta::pairwise::cuda::detail
