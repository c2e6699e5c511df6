// The JSON form of a claim's result (engine.hpp, to_json): formatting only, kept apart from the verdict
// logic of engine.cpp.
#include <cmath>

#include <regatta/proofs/engine.hpp>

namespace regatta::proofs {

nlohmann::json to_json(const ClaimResult& r) {
  nlohmann::json parts = nlohmann::json::array();
  for (const PartOutcome& o : r.parts) {
    nlohmann::json j{
        {"name", o.name}, {"evaluated", o.evaluated}, {"certified", o.certified}, {"failed", o.failed}};
    if (o.kind == PartKind::at_most) {
      j["kind"] = "at_most";
      j["max_ratio"] = o.max_ratio;
      j["max_ratio_double"] = o.max_ratio_double;
      j["certified_ratio_upper"] = std::isfinite(o.certified_ratio_upper)
                                       ? nlohmann::json(o.certified_ratio_upper)
                                       : nlohmann::json(nullptr);
    } else if (o.kind == PartKind::equal) {
      j["kind"] = "equal";
      j["error_p"] = o.error_p;
      j["error_2p"] = o.error_2p;
      j["certified_error"] = o.certified_error;
    } else {
      j["kind"] = "growth";
    }
    parts.push_back(j);
  }
  nlohmann::json cx = nullptr;
  if (r.counterexample) {
    const Counterexample& c = *r.counterexample;
    cx = nlohmann::json{{"part", c.part},
                        {"point", c.point},
                        {"lhs", nlohmann::json::array({c.lhs_lower, c.lhs_upper})},
                        {"rhs", nlohmann::json::array({c.rhs_lower, c.rhs_upper})},
                        {"ratio_estimate", c.ratio},
                        {"certified", c.certified},
                        {"file", c.file.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.file)}};
  }
  nlohmann::json growth = nlohmann::json::array();
  for (const GrowthStep& s : r.growth)
    growth.push_back(
        {{"point", s.point}, {"certified_lower", s.certified_lower}, {"certified_upper", s.certified_upper}});
  return nlohmann::json{
      {"id", r.id},
      {"expected", to_string(r.expected)},
      {"verdict", to_string(r.verdict)},
      {"max_ratio", std::isfinite(r.max_ratio) ? nlohmann::json(r.max_ratio) : nlohmann::json(nullptr)},
      {"certified", r.certified},
      {"counterexample", cx},
      {"matches", r.matches()},
      {"parts", parts},
      {"growth", growth},
      {"points",
       {{"family", r.family_points},
        {"random", r.random_points},
        {"climb", r.climb_steps},
        {"skipped", r.skipped_points}}},
      {"seconds", r.seconds},
      {"note", r.note}};
}

}  // namespace regatta::proofs
