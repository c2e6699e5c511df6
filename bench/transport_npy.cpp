// regatta_transport_npy: times one optimal-transport solve on .npy atom files (uniform weights), for the
// side-by-side comparison with POT in bench/compare/ot_vs_pot.py. Only the solve is timed (file reading and
// measure construction are not).
//
//   regatta_transport_npy exact    A.npy B.npy P
//   regatta_transport_npy sinkhorn A.npy B.npy P EPSILON TOLERANCE [THREADS]
//   regatta_transport_npy sinkhorn_attention A.npy B.npy 2 EPSILON TOLERANCE [THREADS [float32|float64
//   [MAX_ITERATIONS [OVER_RELAXATION [streamed|dense|automatic]]]]]
//       (sinkhorn_sq_euclidean: the fused attention-kernel Sinkhorn for ||x - y||^2)
//
// Prints one JSON line: method, n, m, d, p, value (W_p or <P_ε, C>^(1/p)), cost (W_p^p or <P_ε, C>),
// objective (Sinkhorn), status, iterations, marginal_error (Sinkhorn), seconds.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/measures/sinkhorn.hpp>
#include <regatta/measures/sinkhorn_attention.hpp>
#include <regatta/measures/wasserstein.hpp>
#include <string>

int main(int argc, char** argv) try {
  using namespace regatta;
  if (argc < 5) {
    std::cerr << "usage: regatta_transport_npy exact|sinkhorn A.npy B.npy P [EPSILON TOLERANCE [THREADS]]\n";
    return 2;
  }
  const std::string method = argv[1];
  const double p = std::atof(argv[4]);
  const auto mu = measures::DiscreteMeasure<double>::empirical(io::read_npy(argv[2]).matrix());
  const auto nu = measures::DiscreteMeasure<double>::empirical(io::read_npy(argv[3]).matrix());
  nlohmann::json out{{"method", method}, {"n", mu.size()}, {"m", nu.size()}, {"d", mu.dim()}, {"p", p}};
  const auto start = std::chrono::steady_clock::now();
  if (method == "exact") {
    const measures::WassersteinResult w = measures::wasserstein_exact(mu, nu, p);
    out["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out["value"] = w.value;
    out["cost"] = w.cost;
    out["status"] = measures::to_string(w.status);
    out["iterations"] = w.plan.iterations;
  } else if (method == "sinkhorn" && argc >= 7) {
    measures::SinkhornOptions o;
    o.epsilon = std::atof(argv[5]);
    o.tolerance = std::atof(argv[6]);
    if (argc >= 8) o.reduce_options.threads = std::atoi(argv[7]);
    o.kernel = measures::SinkhornKernel::streamed;  // this row measures the streamed pairwise::reduce path
    const measures::SinkhornResult<double> r = measures::sinkhorn(mu, nu, p, o);
    out["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out["value"] = std::pow(std::max(r.cost, 0.0), 1 / p);
    out["cost"] = r.cost;
    out["objective"] = r.objective;
    out["status"] = measures::to_string(r.status);
    out["iterations"] = r.iterations;
    out["marginal_error"] = r.marginal_error;
  } else if (method == "sinkhorn_attention" && argc >= 7 && p == 2) {
    measures::AttentionSinkhornOptions o;
    o.sinkhorn.epsilon = std::atof(argv[5]);
    o.sinkhorn.tolerance = std::atof(argv[6]);
    if (argc >= 8) o.sinkhorn.reduce_options.threads = std::atoi(argv[7]);
    if (argc >= 9 && std::string(argv[8]) == "float32") o.storage = measures::SinkhornStorage::float32;
    if (argc >= 10) o.sinkhorn.max_iterations = std::atoll(argv[9]);
    if (argc >= 11) o.over_relaxation = std::atof(argv[10]);
    if (argc >= 12) {
      const std::string kernel = argv[11];
      o.sinkhorn.kernel = kernel == "dense"      ? measures::SinkhornKernel::dense
                          : kernel == "streamed" ? measures::SinkhornKernel::streamed
                                                 : measures::SinkhornKernel::automatic;
    }
    const bool dense = measures::uses_dense_kernel(mu, nu, o);
    const measures::SinkhornResult<double> r = measures::sinkhorn_sq_euclidean(mu, nu, o);
    out["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out["value"] = std::sqrt(std::max(r.cost, 0.0));
    out["cost"] = r.cost;
    out["objective"] = r.objective;
    out["status"] = measures::to_string(r.status);
    out["storage"] = measures::to_string(o.storage);
    out["over_relaxation"] = o.over_relaxation;
    out["kernel"] = dense ? "dense" : "streamed";
    out["iterations"] = r.iterations;
    out["marginal_error"] = r.marginal_error;
  } else {
    std::cerr << "regatta_transport_npy: unknown method or missing EPSILON TOLERANCE\n";
    return 2;
  }
  std::cout << out.dump() << "\n";
  return 0;
} catch (const regatta::InputError& e) {
  std::cerr << "regatta_transport_npy: " << e.what() << "\n";
  return 2;
}
