// The resumable state of the branch and bound (branch_bound.hpp, docs/branch-and-bound.md): the problem and
// the state as JSON, and the checks a resumed state must pass (its witness and its frontier's bounds are
// evaluated again).
#include <regatta/operators/lipschitz/branch_bound.hpp>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <numbers>
#include <set>
#include <utility>

#include <mpfi.h>
#include <mpfr.h>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include <regatta/operators/lipschitz/region.hpp>
#include "box_bounds.hpp"

namespace regatta::lip {

namespace {

using Eigen::Index;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Prenorm;

nlohmann::json matrix_json(const Matrix<double>& m) {
  nlohmann::json rows = nlohmann::json::array();
  for (Index i = 0; i < m.rows(); ++i) {
    nlohmann::json row = nlohmann::json::array();
    for (Index j = 0; j < m.cols(); ++j) row.push_back(m(i, j));
    rows.push_back(std::move(row));
  }
  return rows;
}

nlohmann::json vectors_json(const std::vector<Vector<double>>& vs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : vs) out.push_back(std::vector<double>(v.data(), v.data() + v.size()));
  return out;
}

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

std::vector<double> read_vector(const nlohmann::json& v, std::size_t size, const std::string& source,
                                const std::string& what) {
  if (!v.is_array() || v.size() != size)
    throw InputError(source, what + " must be an array of " + std::to_string(size) + " numbers");
  std::vector<double> out;
  out.reserve(size);
  for (const auto& x : v) {
    if (!x.is_number() || !std::isfinite(x.get<double>()))
      throw InputError(source, what + " holds an entry that is not a finite number");
    out.push_back(x.get<double>());
  }
  return out;
}

}  // namespace

void BranchBound::check_resumed(const BnbState& state, const std::string& source) const {
  const BnbBox root = root_box();
  const Index n = domain_.n, d = layer_.d;
  std::set<std::uint64_t> ids;
  for (const BnbBox& b : state.frontier) {
    if (!ids.insert(b.id).second)
      throw InputError(source, "two frontier boxes have the id " + std::to_string(b.id));
    for (std::size_t k = 0; k < b.lo.size(); ++k)
      if (!(b.lo[k] >= root.lo[k] && b.hi[k] <= root.hi[k]))
        throw InputError(source, "frontier box " + std::to_string(b.id) + " is not inside the domain");
  }
  if (state.evaluated < state.frontier.size())
    throw InputError(source, "'evaluated' is below the number of frontier boxes");
  // The lower end: re-certified at its witness, which must lie in D.
  if (state.witness.empty()) {
    if (state.lower != 0) throw InputError(source, "'lower' is positive but there is no witness");
  } else {
    Matrix<double> P(n, d);
    for (Index i = 0; i < n; ++i)
      for (Index a = 0; a < d; ++a) P(i, a) = state.witness[std::size_t(i * d + a)];
    for (Index i = 0; i < n; ++i) {
      interval64 sq(0.0);
      for (Index a = 0; a < d; ++a) {
        if (!(std::fabs(P(i, a)) <= domain_.radius))
          throw InputError(source, "the witness is not in the domain");
        sq = sq + interval64(P(i, a)) * interval64(P(i, a));
      }
      if (domain_.shape == DomainShape::ball && !(sqrt(sq).upper() <= domain_.radius))
        throw InputError(source, "the witness is not in the domain");
    }
    const double certified = detail::norm_lower(
        block_dense_jacobian_on_box<interval64>(layer_, options_, P.cast<interval64>()), bnb_.norm);
    if (!(state.lower <= certified))
      throw InputError(source, "'lower' is above the certified norm at its witness");
  }
  // Each frontier box's bound, evaluated again (deterministic: the same number when the file is the run's).
  std::vector<double> again(state.frontier.size());
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 16)
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(again.size()); ++i) {
    try {
      const BnbEvaluation e = evaluate(state.frontier[std::size_t(i)], infinity);
      again[std::size_t(i)] = e.feasible ? e.upper : 0;
    } catch (...) {
#pragma omp critical(regatta_bnb_resume_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  for (std::size_t i = 0; i < again.size(); ++i)
    if (!(state.frontier[i].upper >= again[i]))
      throw InputError(source, "frontier box " + std::to_string(state.frontier[i].id) +
                                   " has an 'upper' below its evaluation");
}

nlohmann::json BranchBound::problem_json() const {
  const AttentionLayer& l = layer_;
  nlohmann::json WQ = nlohmann::json::array(), WK = nlohmann::json::array(), WV = nlohmann::json::array();
  for (int h = 0; h < l.heads; ++h) {
    WQ.push_back(matrix_json(l.WQ[h]));
    WK.push_back(matrix_json(l.WK[h]));
    WV.push_back(matrix_json(l.WV[h]));
  }
  const auto vec = [](const Vector<double>& v) { return std::vector<double>(v.data(), v.data() + v.size()); };
  // Keys for the polar coordinates and the rotation only where they are used: checkpoints of other problems
  // read as before.
  nlohmann::json domain = {{"shape", to_string(domain_.shape)}, {"radius", domain_.radius}, {"n", domain_.n}};
  if (polar_) domain["coordinates"] = "polar";
  nlohmann::json symmetries = {{"permutation", symmetries_.permutation},
                               {"translation", symmetries_.translation},
                               {"sign", symmetries_.sign}};
  if (symmetries_.rotation) symmetries["rotation"] = true;
  return {{"layer",
           {{"kind", operators::to_string(l.kind)},
            {"d", l.d},
            {"heads", l.heads},
            {"head_dim", l.head_dim},
            {"value_dim", l.value_dim},
            {"WQ", WQ},
            {"WK", WK},
            {"WV", WV},
            {"WO", matrix_json(l.WO)},
            {"bQ", vectors_json(l.bQ)},
            {"bK", vectors_json(l.bK)},
            {"bV", vectors_json(l.bV)},
            {"bO", vec(l.bO)},
            {"norm_gamma", vec(l.norm_gamma)},
            {"norm_beta", vec(l.norm_beta)},
            {"norm_eps", l.norm_eps}}},
          {"options",
           {{"causal", options_.causal},
            {"residual", options_.residual},
            {"allow_untied_l2", options_.allow_untied_l2},
            {"prenorm", operators::to_string(options_.prenorm)},
            {"sinkhorn_iterations", options_.sinkhorn_iterations}}},
          {"domain", domain},
          {"norm", to_string(bnb_.norm)},
          {"symmetries", symmetries},
          {"batch", bnb_.batch}};
}

std::optional<std::string> BranchBound::describe_mismatch(const nlohmann::json& mine,
                                                          const nlohmann::json& theirs) {
  if (!theirs.is_object()) return "it holds no problem description";
  for (const char* key : {"layer", "options", "domain", "norm", "symmetries", "batch"}) {
    if (!theirs.contains(key)) return std::string("its problem has no '") + key + "'";
    if (mine.at(key) != theirs.at(key))
      return std::string("the ") + key + " differs" +
             (std::string(key) == "layer" || std::string(key) == "options"
                  ? std::string()
                  : " (this run: " + mine.at(key).dump() + ", the file: " + theirs.at(key).dump() + ")");
  }
  return std::nullopt;
}

nlohmann::json state_to_json(const BnbState& state) {
  nlohmann::json frontier = nlohmann::json::array();
  for (const BnbBox& b : state.frontier)
    frontier.push_back({{"id", b.id}, {"upper", number_or_null(b.upper)}, {"lo", b.lo}, {"hi", b.hi}});
  return {{"lower", state.lower},     {"witness", state.witness},     {"pruned_upper", state.pruned_upper},
          {"next_id", state.next_id}, {"evaluated", state.evaluated}, {"steps", state.steps},
          {"frontier", frontier}};
}

BnbState state_from_json(const nlohmann::json& v, Eigen::Index dimension, const std::string& source) {
  const std::size_t k = std::size_t(dimension);
  if (!v.is_object()) throw InputError(source, "'state' must be an object");
  BnbState s;
  try {
    const auto finite = [&](const char* key) {
      const double x = v.at(key).get<double>();
      if (!std::isfinite(x) || x < 0)
        throw InputError(source, std::string("'") + key + "' must be finite, >= 0");
      return x;
    };
    s.lower = finite("lower");
    s.pruned_upper = finite("pruned_upper");
    s.next_id = v.at("next_id").get<std::uint64_t>();
    s.evaluated = v.at("evaluated").get<std::uint64_t>();
    s.steps = v.at("steps").get<std::uint64_t>();
    if (!v.at("witness").empty()) s.witness = read_vector(v.at("witness"), k, source, "'witness'");
    for (const auto& b : v.at("frontier")) {
      BnbBox box;
      box.id = b.at("id").get<std::uint64_t>();
      if (box.id >= s.next_id) throw InputError(source, "a frontier box has an id >= next_id");
      box.upper = b.at("upper").is_null() ? infinity : b.at("upper").get<double>();
      if (std::isnan(box.upper) || box.upper < 0)
        throw InputError(source, "a frontier box has a bad 'upper'");
      box.lo = read_vector(b.at("lo"), k, source, "a frontier box's 'lo'");
      box.hi = read_vector(b.at("hi"), k, source, "a frontier box's 'hi'");
      for (std::size_t j = 0; j < k; ++j)
        if (box.lo[j] > box.hi[j]) throw InputError(source, "a frontier box has lo > hi");
      s.frontier.push_back(std::move(box));
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(source, std::string("malformed checkpoint state: ") + e.what());
  }
  std::make_heap(s.frontier.begin(), s.frontier.end(), detail::heap_less);
  return s;
}

}  // namespace regatta::lip
