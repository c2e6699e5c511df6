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
  r.push_back(make_castin_sqrt_n());
  r.push_back(make_castin_local());
  r.push_back(make_castin_large_radius());
  r.push_back(make_particles_usa_energy());
  r.push_back(make_ot_elementary_bounds());
  r.push_back(make_ot_one_d_exact());
  r.push_back(make_ot_certified_bracket());
  r.push_back(make_ot_entropic_bracket());
  return r;
}

constexpr const char* needs_local =
    "needs the local-sensitivity quantities of bounds.md §6 (xi(X), kappa_h(X), delta(X, eps), L_GN), which "
    "no "
    "library function provides yet";

std::vector<MissingClaim> build_missing() {
  return {
      {"resid.fixed_point_inversion", Expected::holds,
       "needs the fixed-point inversion of a contractive L2 block (operators/inversion.hpp, being written) "
       "with a certified B_2 and X* at high precision; no evaluator written yet"},
      {"attn.pytorch_equivalence", Expected::identity,
       "needs PyTorch's nn.MultiheadAttention as the reference; it belongs to the Python test-suite, not to "
       "the "
       "C++ checker"},
      {"mf.context_lipschitz", Expected::holds,
       "needs a certified W_1 lower bound between context measures inside the interval evaluation of "
       "Gamma_mu - Gamma_nu, and the log-domain asymptotic family at 2aRR' >= 30; no evaluator written yet"},
      {"mf.context_general", Expected::holds,
       "needs general (L2 / Gaussian) potentials with oscillation and Lipschitz constants on bounded sets; "
       "no "
       "evaluator written yet"},
      {"mf.self_lipschitz", Expected::holds,
       "needs certified output/input Wasserstein ratios of the measure-level map (KR lower bound over "
       "coupling "
       "upper bound); no evaluator written yet"},
      {"mf.misspecification", Expected::holds,
       "includes a statistical statement (expected W_1 under sampling, a fitted slope with confidence) that "
       "the deterministic checker does not model; no evaluator written yet"},
      {"mf.depth", Expected::holds,
       "needs stacks of measure-level layers with propagated radii; no evaluator written yet"},
      {"mf.infinite_depth", Expected::holds,
       "needs weight-tied measure-level iterations with the fixed point z* = (I - V)^-1 b; no evaluator "
       "written yet"},
      {"castin.adversarial_regime", Expected::holds,
       "needs exact ||J||_2 at n up to 4096: the dense Jacobian (n^2 d^2 entries) is too large for the "
       "interval certification, and no matrix-free certified norm exists yet"},
      {"havens.local_delta", Expected::holds,
       std::string("needs delta(X, eps) and PGD through the VJP; ") + needs_local},
      {"havens.xi_exact", Expected::identity,
       std::string("needs the matrix-free xi(X) operator; ") + needs_local},
      {"havens.score_identity", Expected::identity,
       std::string("needs kappa(X) (Kronecker and matrix-free); ") + needs_local},
      {"havens.naive_ordering", Expected::holds,
       std::string("needs the naive and fine delta variants; ") + needs_local},
      {"havens.gradnorm_comparator", Expected::holds, std::string("needs L_GN(X, eps); ") + needs_local},
      {"havens.certified_radius", Expected::holds,
       "needs a classifier head with margins and layer-wise composed radii; no evaluator written yet"},
      {"havens.power_iteration", Expected::holds,
       std::string("needs the matrix-free xi and kappa operators to compare with dense SVDs; ") +
           needs_local},
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
