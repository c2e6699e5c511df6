#include <regatta/core/resources.hpp>

#include <omp.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <Eigen/Core>

#include <regatta/core/error.hpp>

namespace regatta {

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? int(online) : 1;
}

ThreadSetting configure_threads(int requested) {
  ThreadSetting s;
  const int cores = available_cores();
  if (requested > 0) {
    s.threads = std::min(requested, cores);
    if (requested > cores)
      s.note = "--threads " + std::to_string(requested) + " exceeds the " + std::to_string(cores) +
               " cores this process may use; using " + std::to_string(cores);
  } else {
    s.threads = cores;
    if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr && *env != '\0') {
      // OMP_NUM_THREADS may be a list ("4,2" for nested levels); the first level is what regatta uses.
      const std::string_view text(env);
      const std::string_view first = text.substr(0, text.find(','));
      int value = 0;
      const auto [end, error] = std::from_chars(first.data(), first.data() + first.size(), value);
      const bool number = error == std::errc() && end == first.data() + first.size() && value >= 1;
      if (number && value <= cores) {
        s.threads = value;
      } else {
        s.note = "OMP_NUM_THREADS=" + printable(text) +
                 (number ? " exceeds the " + std::to_string(cores) + " cores this process may use"
                         : " is not a positive number") +
                 "; using " + std::to_string(cores) + " threads (--threads N to choose)";
      }
    }
  }
  omp_set_dynamic(0);
  omp_set_max_active_levels(1);  // no nested teams: an inner parallel region runs on its caller's thread
  omp_set_num_threads(s.threads);
  Eigen::setNbThreads(1);  // see the file comment of resources.hpp
  return s;
}

int current_threads() { return omp_get_max_threads(); }

int threads_for(double work) {
  const double useful = std::floor(work / min_parallel_work);
  const int limit = current_threads();
  return useful >= double(limit) ? limit : std::max(1, int(useful));
}

namespace {

std::uint64_t cgroup_limit() {
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text) || text == "max") continue;
    std::uint64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error == std::errc() && value > 0) return value;
  }
  return UINT64_MAX;
}

}  // namespace

std::uint64_t available_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  std::uint64_t bytes = pages > 0 && page > 0 ? std::uint64_t(pages) * std::uint64_t(page) : UINT64_MAX;
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    bytes = std::min<std::uint64_t>(bytes, limit.rlim_cur);
  return std::min(bytes, cgroup_limit());
}

std::string format_bytes(double bytes) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  std::ostringstream os;
  os << std::setprecision(u == 0 ? 6 : 3) << bytes << " " << units[u];
  return os.str();
}

void check_memory(std::string_view subject, double bytes, std::string_view what) {
  const double available = double(available_memory_bytes());
  if (!(bytes <= available))
    throw InputError(std::string(subject), std::string(what) + " would need about " +
                                               (std::isfinite(bytes) ? format_bytes(bytes) : "unbounded") +
                                               ", more than the " + format_bytes(available) +
                                               " of memory available");
}

void retain_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest allowed value on 64-bit systems
#endif
}

}  // namespace regatta
