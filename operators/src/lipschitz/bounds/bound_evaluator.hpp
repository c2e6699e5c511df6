#pragma once
// Internal: evaluation of the bounds of bounds.hpp in one scalar type, with the per-head matrix norms
// computed once and shared by every bound of one configuration. The caller has checked the input and the
// hypotheses (refusal()); the formulas and their composition rules are documented in bounds.hpp.
#include <optional>
#include <string>
#include <vector>

#include <regatta/operators/lipschitz/bounds.hpp>

namespace regatta::lip::detail {

template <class S>
class BoundEvaluator {
 public:
  /// Keeps references: layer, options and setting must outlive the evaluator. For mpfr/interval, construct
  /// and use it at one working precision.
  BoundEvaluator(const operators::AttentionLayer& layer, const operators::AttentionOptions& options,
                 const BoundSetting& setting);

  /// The bound's formula (its row of bound_table.cpp).
  S operator()(Bound bound);
  S kim_two_quoted();
  S castin_local_code_form();

  /// True when the last evaluation used a certified spectral norm from a looser route than the interval
  /// Cholesky certificate (interval only; large matrices, see matrix_norms.hpp).
  bool last_used_loose_certificate() const { return last_loose_; }

  // ---- building blocks of the formulas (the rows of bound_table.cpp call these) ----

  // Per-head norms (computed on first use).
  const std::vector<S>& query_inf();   // ‖W^Q_h‖∞
  const std::vector<S>& query_one();   // ‖W^Q_h‖₁
  const std::vector<S>& query_two();   // ‖W^Q_h‖₂
  const std::vector<S>& value_one();   // ‖W^V_h‖₁
  const std::vector<S>& value_two();   // ‖W^V_h‖₂
  const S& output_one();               // ‖W^O‖₁
  const S& output_two();               // ‖W^O‖₂
  const std::vector<S>& score_two();   // ‖A_h‖₂ = ‖W^Q_h W^K_hᵀ‖₂/√d_h
  const std::vector<S>& values_two();  // ‖V_h‖₂ = ‖W^V_h W^O_h‖₂
  S bias_norm();                       // ‖Σ_h W^O_hᵀ b_V,h + b_O‖₂
  // The query-bias score term of a biased head (docs/bounds.md, "Biased layers"): c_h = W^K_h b_Q,h/√d_h.
  const std::vector<S>& query_bias_two();  // ‖c_h‖₂ (0 without a query bias)
  // Per head the exponent k of the appended coordinate t_h = 2^k of the augmented tokens (x, t_h), |k| ≤
  // augmentation_exponent_limit, minimising ‖[A_h; c_hᵀ/t]‖₂²(R² + t²)² in double (the same k for every S).
  const std::vector<int>& augmentation_exponents();
  // ‖[A_h; c_hᵀ/t_h]‖₂ = ‖[W^Q_h; b_Q,hᵀ/t_h] W^K_hᵀ‖₂/√d_h, the score matrix of the augmented tokens; for
  // interval the upper end is also capped by (‖A_h‖₂² + ‖c_h‖²/t_h²)^{1/2}, which bounds it.
  const std::vector<S>& augmented_score_two();
  static constexpr int augmentation_exponent_limit = 8;

  S half() { return S(1) / S(2); }  // softmax.half
  S lambda();                       // Λ_n
  S prenorm_lipschitz(Norm norm);
  S attention_radius();                      // R, or the pre-norm radius
  S query_radius();                          // R′, or the pre-norm radius
  S compose(const S& attention, Norm norm);  // [1 +] attention·Lip(N)

  S kim_inf();
  S kim_two(int query_power);
  S castin_sqrt_n();
  S castin_sqrt_n_augmented();
  S castin_local(bool code_form);
  S mf_query();
  S mf_context();
  S mf_self_attention(const S& radius);  // Σ_h L_R(A_h, V_h)
  S mf_depth();

 private:
  const operators::AttentionLayer& layer_;
  const operators::AttentionOptions& options_;
  const BoundSetting& setting_;
  /// Spectral norms with the looseness of their certificates.
  struct Spectral {
    std::vector<S> values;
    bool loose = false;
  };
  const std::vector<S>& use(Spectral& s) {
    last_loose_ = last_loose_ || s.loose;
    return s.values;
  }

  std::optional<std::vector<S>> query_inf_, query_one_, value_one_;
  std::optional<Spectral> query_two_, value_two_, output_two_, score_two_, values_two_, augmented_score_two_;
  std::optional<std::vector<S>> query_bias_two_;
  std::optional<std::vector<int>> augmentation_exponents_;
  std::optional<S> output_one_;
  bool last_loose_ = false;
};

}  // namespace regatta::lip::detail
