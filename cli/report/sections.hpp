#pragma once
// The sections of `regatta report`, one function per file (section_<key>.cpp). Each returns a Section with
// its configurations and seeds, its tables and figures (not yet written) and its findings; a section whose
// ingredient is unavailable returns produced = false with the reason, never made-up numbers. With a user
// layer (--layer/--random), sections 1–4 add tables and figures for that layer.
#include "context.hpp"
#include "document.hpp"

namespace regatta::cli::report {

/// 1. L2 vs dot-product attention (Kim et al. 2021): Theorem 3.2 upper bounds against n with certified lower
///    bounds from adversarial search, Λ_n = φ⁻¹(n − 1), and ‖J‖ of dot-product attention along Theorem 3.1.
Section section_kim(const Context& ctx);
/// 2. Dot-product attention on a bounded domain (Castin et al. 2024): ‖J‖ on the adversarial inputs against
///    √n and the √n bound, saturation past n ≈ e^{γR²}, causal against unmasked.
Section section_castin(const Context& ctx);
/// 3. Measure level (Vuckovic et al. 2020): W₁ Lipschitz ratios of self-attention against Theorem C, and
///    cross-attention in the query against the context.
Section section_measure(const Context& ctx);
/// 4. Local sensitivity (Havens et al. 2024): δ(X, ε), its naive variants, the gradient-norm comparator and a
///    PGD lower bound over ε; certified radii for a small margin.
Section section_local(const Context& ctx);
/// 5. proofs-check: the verdict table of the claims catalogue.
Section section_proofs(const Context& ctx);
/// 6. Mean field: attention on a grid measure against n samples of the same density.
Section section_mean_field(const Context& ctx);

/// 8. The true constant on bounded domains by branch and bound (Kim's L2 layer on boxes, dot-product
///    attention on balls) against every published bound that applies there.
Section section_true_constant(const Context& ctx);
/// 9. Certified robustness of a trained ViT: `regatta certify` on the first images of a labelled test set
///    (certified, attack and naive radii; accuracy against the radius).
Section section_robustness(const Context& ctx);

/// Runs every section (progress on stderr), writes every file under options.out. Returns the sections.
std::vector<Section> run_report(const ReportOptions& options, const std::string& version);

}  // namespace regatta::cli::report
