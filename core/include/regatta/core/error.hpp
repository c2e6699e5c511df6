#pragma once
// The error channel for bad user input (design.md, "Errors").
//
// Contract violations inside the library are asserts; numerical outcomes (not converged, not certified) are
// statuses in results. Everything a user can get wrong (shapes, NaN/Inf, weights, files, sizes) throws
// InputError, whose what() is one line naming the argument or file and the problem. The CLI prints it and
// exits with code 2.
#include <stdexcept>
#include <string>

namespace regatta {

class InputError : public std::runtime_error {
 public:
  /// `subject` names the argument or file ("--epsilon", "weights.npy", "X"); `problem` says what is wrong.
  InputError(std::string subject, std::string problem);
  const std::string& subject() const noexcept { return subject_; }
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::string subject_;
  std::string problem_;
};

}  // namespace regatta
