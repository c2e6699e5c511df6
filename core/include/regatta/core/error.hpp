#pragma once
// The error channel for bad user input (docs/numerics.md#input-checking).
//
// Contract violations inside the library are asserts; numerical outcomes (not converged, not certified) are
// statuses in results. Everything a user can get wrong (shapes, NaN/Inf, weights, files, sizes) throws
// InputError, whose what() is one printable line naming the argument or file and the problem. The CLI prints
// it and exits with code 2.
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace regatta {

class InputError : public std::runtime_error {
 public:
  /// `subject` names the argument or file ("--epsilon", "weights.npy"); `problem` says what is wrong.
  /// what() is printable(subject) + ": " + printable(problem), cut to max_message_bytes: whatever a file
  /// name or a tensor name contains (newlines, terminal escapes, invalid UTF-8), the message stays one
  /// harmless line.
  InputError(std::string subject, std::string problem);
  const std::string& subject() const noexcept { return subject_; }
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::string subject_;
  std::string problem_;
};

/// Longest what() of an InputError, in bytes (longer messages end in "... (N more bytes)").
inline constexpr std::size_t max_message_bytes = 1000;

/// `text` with every byte that could break a one-line message escaped as \xNN: C0 and C1 control characters
/// (a C1 character as both of its UTF-8 bytes, \xc2\x9b), DEL, and bytes that are not valid UTF-8. Valid
/// printable UTF-8 (non-ASCII letters, mathematical symbols) is kept, and so is a backslash, which makes
/// printable idempotent: text that is already printable passes through unchanged.
std::string printable(std::string_view text);

/// printable(text) in single quotes: 'name'.
std::string quoted(std::string_view text);

/// The first `max_shown` names, each quoted(), separated by ", ", followed by " and N more" when the list is
/// longer: a bounded message however many names a file holds.
std::string name_list(std::span<const std::string> names, std::size_t max_shown = 8);

}  // namespace regatta
