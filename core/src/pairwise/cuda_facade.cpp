// The plain C++ facade of the GPU path (pairwise_cuda.hpp). Always compiled: without REGATTA_HAVE_CUDA it
// reports why the GPU path is unavailable; with it, it validates, applies the linear maps on the host and
// forwards to the private library regatta_cuda (core/cuda/pairwise_kernels.hpp).
#include <regatta/core/error.hpp>
#include <regatta/core/pairwise_cuda.hpp>
#include <stdexcept>
#include <string>

#if defined(REGATTA_HAVE_CUDA)
#include "../../cuda/pairwise_kernels.hpp"
#endif

namespace regatta::pairwise::cuda {
namespace {

constexpr const char* kSubject = "cuda reduce";

#if defined(REGATTA_HAVE_CUDA)
static_assert(detail::max_dimension == max_dimension, "the facade and the kernels disagree on the limit");

detail::Score to_detail(ScoreKind kind) {
  switch (kind) {
    case ScoreKind::dot:
      return detail::Score::dot;
    case ScoreKind::neg_sq_dist:
      return detail::Score::neg_sq_dist;
    case ScoreKind::neg_dist_pow:
      return detail::Score::neg_dist_pow;
  }
  return detail::Score::dot;
}

detail::Mask to_detail(MaskKind kind) {
  switch (kind) {
    case MaskKind::none:
      return detail::Mask::none;
    case MaskKind::causal:
      return detail::Mask::causal;
    case MaskKind::anticausal:
      return detail::Mask::anticausal;
  }
  return detail::Mask::none;
}

void launch(const float* x, const float* y, const float* w, const float* v, float* lse, float* out,
            const detail::Shape& shape) {
  detail::reduce_f32(x, y, w, v, lse, out, shape);
}
void launch(const double* x, const double* y, const double* w, const double* v, double* lse, double* out,
            const detail::Shape& shape) {
  detail::reduce_f64(x, y, w, v, lse, out, shape);
}

void check_dimension(Eigen::Index value, const char* what) {
  if (value > max_dimension) {
    throw InputError(kSubject, std::string(what) + " = " + std::to_string(value) +
                                   " exceeds the GPU path's limit of " + std::to_string(max_dimension) +
                                   ": use the CPU path (regatta::pairwise::reduce)");
  }
}
#endif

void reject_unsupported(const Request& request) {
  const auto reject = [](const char* field) {
    throw InputError(kSubject,
                     std::string("Request::") + field +
                         " is not supported on the GPU path: use the CPU path (regatta::pairwise::reduce)");
  };
  if (request.feature_mean) reject("feature_mean");
  if (request.cross_moment) reject("cross_moment");
  if (request.feature_second_moment) reject("feature_second_moment");
  if (request.expected_score) reject("expected_score");
}

}  // namespace

Availability availability() {
  // Devices do not come and go within a process: ask the CUDA runtime once.
  static const Availability once = [] {
#if defined(REGATTA_HAVE_CUDA)
    Availability result;
    try {
      std::string error;
      if (detail::device_count(&error) <= 0) {
        result.reason = "no CUDA device: " + error;
        return result;
      }
      result.available = true;
      result.device_name = detail::device_name();
    } catch (const std::exception& e) {
      result = Availability{false, std::string("no usable CUDA device: ") + e.what(), {}};
    }
    return result;
#else
    return Availability{
        false,
        "regatta was built without CUDA (REGATTA_CUDA=OFF, or no nvcc was found at configure time)",
        {}};
#endif
  }();
  return once;
}

template <class S>
Result<S> reduce(const Problem<S>& problem, const Kernel& kernel, const Request& request) {
  const Availability gpu = availability();
  if (!gpu.available) {
    throw InputError(kSubject, "the GPU path is unavailable: " + gpu.reason +
                                   "; use the CPU path (regatta::pairwise::reduce)");
  }
  validate(problem, kernel, request);
  reject_unsupported(request);

#if defined(REGATTA_HAVE_CUDA)
  // The linear maps, on the host: X·query_map and Y·key_map; the distance scores apply one map to both.
  const bool distance = kernel.score != ScoreKind::dot;
  const Matrix<S>* query_map = problem.query_map;
  const Matrix<S>* key_map = problem.key_map;
  if (distance) {
    const Matrix<S>* map = query_map != nullptr ? query_map : key_map;
    query_map = map;
    key_map = map;
  }
  Matrix<S> mapped_queries;
  Matrix<S> mapped_keys;
  if (query_map != nullptr) mapped_queries = (*problem.queries) * (*query_map);
  if (key_map != nullptr) mapped_keys = (*problem.keys) * (*key_map);
  const Matrix<S>& x = query_map != nullptr ? mapped_queries : *problem.queries;
  const Matrix<S>& y = key_map != nullptr ? mapped_keys : *problem.keys;

  const Matrix<S>* values = request.out ? problem.values : nullptr;
  detail::Shape shape;
  shape.n = x.rows();
  shape.m = y.rows();
  shape.d = x.cols();
  shape.e = values != nullptr ? values->cols() : 0;
  shape.score = to_detail(kernel.score);
  shape.mask = to_detail(kernel.mask);
  shape.scale = kernel.scale;
  shape.power = kernel.power;
  check_dimension(shape.d, "d (the query/key dimension after the maps)");
  check_dimension(shape.e, "e (the value dimension)");
  if (shape.d < 1) throw InputError(kSubject, "queries and keys need at least one coordinate");

  Result<S> result;
  result.lse.resize(shape.n);
  if (values != nullptr) result.out.resize(shape.n, shape.e);
  try {
    launch(x.data(), y.data(), problem.log_weights != nullptr ? problem.log_weights->data() : nullptr,
           values != nullptr ? values->data() : nullptr, result.lse.data(),
           values != nullptr ? result.out.data() : nullptr, shape);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("regatta::pairwise::cuda::reduce on ") + gpu.device_name +
                             ": CUDA error: " + e.what());
  }
  return result;
#else
  return {};  // unreachable: availability() is false without CUDA
#endif
}

#define REGATTA_PAIRWISE_CUDA(S) \
  template Result<S> reduce<S>(const Problem<S>&, const Kernel&, const Request&);
REGATTA_FOR_EACH_HARDWARE_SCALAR(REGATTA_PAIRWISE_CUDA)
#undef REGATTA_PAIRWISE_CUDA

}  // namespace regatta::pairwise::cuda
