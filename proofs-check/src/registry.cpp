#include <regatta/proofs/registry.hpp>

#include "claims/common.hpp"

namespace regatta::proofs {

namespace {

std::vector<ClaimPtr> build() {
  using namespace claims;
  std::vector<ClaimPtr> r;
  r.push_back(make_kim_phi_lambert());
  r.push_back(make_kim_lemma_phi());
  r.push_back(make_kim_kernel_rowsum());
  r.push_back(make_kim_l2_jacobian());
  r.push_back(make_kim_l2_invariances());
  r.push_back(make_kim_thm32_inf());
  r.push_back(make_kim_thm32_2());
  r.push_back(make_kim_thm32_2_quoted());
  r.push_back(make_kim_lower_family_inf());
  r.push_back(make_kim_thm31_dp_unbounded());
  r.push_back(make_kim_l2_necessity_untied());
  r.push_back(make_kim_l2_necessity_masked_diag());
  r.push_back(make_kim_l2_necessity_rank_value());
  r.push_back(make_kim_causal_l2());
  r.push_back(make_resid_fixed_point_inversion());
  r.push_back(make_softmax_half());
  r.push_back(make_layernorm_lip2());
  r.push_back(make_layernorm_lipinf_sqrt_d());
  r.push_back(make_layernorm_lipinf_const_input());
  r.push_back(make_rmsnorm_lip2());
  r.push_back(make_attn_derivatives());
  r.push_back(make_sinkhorn_softmax_first_step());
  r.push_back(make_sinkhorn_doubly_stochastic());
  r.push_back(make_mf_empirical_exact());
  r.push_back(make_mf_causal_lift());
  r.push_back(make_mf_max_entropy());
  r.push_back(make_mf_query_lipschitz());
  r.push_back(make_mf_context_lipschitz());
  r.push_back(make_mf_context_general());
  r.push_back(make_mf_self_lipschitz());
  r.push_back(make_mf_misspecification());
  r.push_back(make_mf_depth());
  r.push_back(make_mf_infinite_depth());
  r.push_back(make_castin_sqrt_n());
  r.push_back(make_castin_local());
  r.push_back(make_castin_adversarial_regime());
  r.push_back(make_castin_large_radius());
  r.push_back(make_havens_local_delta());
  r.push_back(make_havens_xi_exact());
  r.push_back(make_havens_score_identity());
  r.push_back(make_havens_naive_ordering());
  r.push_back(make_havens_gradnorm_comparator());
  r.push_back(make_havens_certified_radius());
  r.push_back(make_havens_power_iteration());
  r.push_back(make_particles_usa_energy());
  r.push_back(make_ot_elementary_bounds());
  r.push_back(make_ot_one_d_exact());
  r.push_back(make_ot_certified_bracket());
  r.push_back(make_ot_entropic_bracket());
  return r;
}

std::vector<MissingClaim> build_missing() {
  return {
      {"attn.pytorch_equivalence", Expected::identity,
       "its reference is PyTorch's nn.MultiheadAttention, which the checker cannot run; it is checked by "
       "tests/operators/torch_reference_test.cpp against outputs and Jacobians saved by torch 1.13 "
       "(tests/data/torch/generate.py, 29 cases: largest relative error 7.0e-16 forward, 1.3e-15 Jacobians)"},
  };
}

}  // namespace

const std::vector<ClaimPtr>& registry() {
  static const std::vector<ClaimPtr> claims = build();
  return claims;
}

const std::vector<MissingClaim>& missing_claims() {
  static const std::vector<MissingClaim> missing = build_missing();
  return missing;
}

const Claim* find_claim(const std::string& id) {
  for (const ClaimPtr& c : registry())
    if (c->info().id == id) return c.get();
  return nullptr;
}

}  // namespace regatta::proofs
