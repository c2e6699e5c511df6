#include <regatta/core/error.hpp>

namespace regatta {

InputError::InputError(std::string subject, std::string problem)
    : std::runtime_error(subject + ": " + problem),
      subject_(std::move(subject)),
      problem_(std::move(problem)) {}

}  // namespace regatta
