// The region-enclosure certified radius (operators::certified_radius, model/tangent_region.cpp) of the first
// N images of an
// image test set, timed per image: the cost `regatta certify` pays for a model the affine forms do not
// support, and the figure of bench/RESULTS.md's "Certified robustness of the digits ViT" section.
//
//   regatta_region_certify MODEL.safetensors TEST.npz N THREADS
//
// Prints one line per image (index, label, attack radius (estimate), certified radius (certified, as
// computed), refuted radius, region passes, seconds of that image's certified_radius call) and the totals.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <regatta/core/io/npz.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_robustness.hpp>

int main(int argc, char** argv) try {
  using namespace regatta;
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL TEST.npz N THREADS\n", argv[0]);
    return 2;
  }
  const operators::Model m = operators::load_model(argv[1]);
  const io::Array images = io::read_npz_member(argv[2], "images");
  const io::Array labels =
      io::read_npz_member(argv[2], "labels", io::default_max_file_bytes, io::NonFloat::integers);
  const long count = std::min<long>(std::atol(argv[3]), long(images.shape.at(0)));
  const int threads = std::atoi(argv[4]);
  const std::size_t size = std::size_t(m.input_size());
  configure_threads(threads);  // as the CLI: Eigen's products on one thread
  retain_freed_memory();       // as `regatta certify`
  const operators::ConvertedModel<double> md(m);
  const operators::ConvertedModel<interval64> mi(m);
  struct Row {
    int label = 0, checks = 0;
    double attack = 0, certified = 0, refuted = 0, seconds = 0;
  };
  std::vector<Row> rows(static_cast<std::size_t>(count));
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(dynamic, 1)
  for (long i = 0; i < count; ++i) {
    Row& r = rows[std::size_t(i)];
    const Vector<double> x =
        Eigen::Map<const Vector<double>>(images.data.data() + std::size_t(i) * size, Eigen::Index(size));
    r.label = int(labels.data[std::size_t(i)]);
    const operators::AttackResult a = operators::attack(md, x, r.label);
    r.attack = a.found ? a.radius : 100.0;
    const auto t0 = std::chrono::steady_clock::now();
    const operators::CertifiedRadius c = operators::certified_radius(mi, x, r.label, r.attack);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.certified = c.radius;
    r.refuted = c.refuted;
    r.checks = c.checks;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double sum = 0;
  int passes = 0;
  for (long i = 0; i < count; ++i) {
    const Row& r = rows[std::size_t(i)];
    std::printf("%ld %d %.17g %.17g %.17g %d %.3f\n", i, r.label, r.attack, r.certified, r.refuted, r.checks,
                r.seconds);
    sum += r.seconds;
    passes += r.checks;
  }
  std::printf(
      "# images %ld, threads %d, wall %.2f s, certified_radius time %.2f s (%.3f s per image, %.1f "
      "passes per image)\n",
      count, threads, wall, sum, sum / double(count), double(passes) / double(count));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "regatta_region_certify: %s\n", e.what());
  return 2;
}
