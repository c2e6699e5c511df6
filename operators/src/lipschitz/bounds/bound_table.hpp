#pragma once
// Internal: the table of theoretical bounds. A bound is ONE row of bound_table.cpp: its claim ID, name,
// norm, provenance, hypotheses and source (the public BoundInfo), the norms it covers, whether it bounds the
// n-token map (bracket), its refusal rule, the note of its parameters, and its formula. Everything else
// (all_bounds, info, refusal, evaluate, theoretical_bounds, the bracket, `regatta bound`) reads the table;
// bound_table.cpp checks at compile time that the table has one row per enumerator of Bound, in enum order,
// with distinct IDs and every field filled. docs/adding-a-bound.md walks through adding a row.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

#include <regatta/operators/lipschitz/bounds.hpp>
#include "bound_evaluator.hpp"

namespace regatta::lip::detail {

/// What a refusal rule and a note see: the configuration (already validated).
struct BoundContext {
  const operators::AttentionLayer& layer;
  const operators::AttentionOptions& options;
  const BoundSetting& setting;
};

/// Why the bound does not apply, or nullopt. Runs after validate(): the input is well formed.
using RefusalRule = std::optional<std::string> (*)(const BoundContext&);
/// The parameters the bound was evaluated with, for the report ("" for none).
using NoteRule = std::string (*)(const BoundContext&);

/// The formula in each scalar type: one generic lambda `[](auto& e) { return ...; }` over the evaluator's
/// building blocks (bound_evaluator.hpp) converts to the three pointers.
template <class S>
using Formula = S (*)(BoundEvaluator<S>&);
template <class List>
struct FormulaTuple;
template <class... Ts>
struct FormulaTuple<scalars::list<Ts...>> {
  using type = std::tuple<Formula<Ts>...>;
};

/// One formula pointer per type of the exact64 scalar list (the types the operators are instantiated for),
/// all converted from the same generic lambda: a new scalar type in that list needs no edit here.
struct Formulas {
  template <class F>
  constexpr Formulas(F f) : pointers(make(f, static_cast<scalars::exact64*>(nullptr))) {}  // NOLINT: implicit
  typename FormulaTuple<scalars::exact64>::type pointers;
  template <class S>
  constexpr Formula<S> of() const {
    return std::get<Formula<S>>(pointers);
  }
  /// Every pointer set (the table's completeness check).
  constexpr bool complete() const {
    return std::apply([](auto... p) { return ((p != nullptr) && ...); }, pointers);
  }

 private:
  template <class F, class... Ts>
  static constexpr typename FormulaTuple<scalars::exact64>::type make(F f, scalars::list<Ts...>*) {
    return {static_cast<Formula<Ts>>(f)...};
  }
};

/// The token-matrix norms a bound covers (W_p bounds count as Euclidean, "2").
enum class Covers { two, inf, both };

struct BoundRow {
  Bound bound;
  std::string_view id;          ///< claim ID (docs/math/claims.md, or docs/bounds.md for new ones)
  std::string_view name;        ///< one line
  std::string_view norm;        ///< "2", "inf", "2 and inf", "W_p", "W_1 -> sup_x"
  std::string_view provenance;  ///< "derived": only proved statements are rows
  std::string_view hypotheses;  ///< one paragraph, plain text
  std::string_view source;      ///< where the statement and its proof are (docs/math/bounds.md#…)
  Covers covers;
  bool sequence;  ///< bounds Lip(F) of the n-token map itself (compared by compute_bracket)
  RefusalRule refusal;
  NoteRule note;
  Formulas formula;
};

/// Every row, in the order of docs/bounds.md (= the order of enum Bound).
std::span<const BoundRow> bound_rows();
const BoundRow& row(Bound bound);
bool covers(const BoundRow& row, Norm norm);

}  // namespace regatta::lip::detail
