#pragma once
// Allocation checks of the file readers: sizes taken from a file are compared with the memory the process
// can still get before anything is allocated for them, so an absurd but self-consistent shape (2^40
// elements) fails with one line instead of std::bad_alloc or the OOM killer.
#include <cstddef>
#include <string_view>

namespace regatta::io::detail {

/// Bytes this process can still allocate: MemAvailable (/proc/meminfo) plus free swap, lowered to the
/// cgroup v2 limit minus current usage where a limit is set; SIZE_MAX when none of them can be read.
std::size_t available_memory_bytes();

/// Throws InputError(subject, "needs N bytes of memory for <what>, more than the M bytes available") when
/// `bytes` exceeds available_memory_bytes(). Cheap enough to call once per array.
void require_memory(std::size_t bytes, std::string_view subject, std::string_view what);

}  // namespace regatta::io::detail
