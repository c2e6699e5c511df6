// Section 7 — attention dynamics and clustering (docs/flow.md): n tokens uniform on S², the normalised sphere
// model of Geshkovski, Letrouit, Polyanskiy and Rigollet, dx_i/dt = P⊥_{x_i} Σ_j softmax_j(β⟨x_i, x_j⟩) x_j,
// integrated by RK4. At β = 1 the tokens collapse to one cluster; at β = 9 they first form several clusters
// that then merge one pair at a time after long plateaus (metastability). Cluster count: components of the
// graph ‖x_i − x_j‖ ≤ 10⁻²; energy E_β = (1/2β) Σ_ij e^{β⟨x_i,x_j⟩}/n². Every number is an estimate.
#include <algorithm>
#include <cmath>

#include <regatta/measures/sampling.hpp>
#include <regatta/operators/flow.hpp>
#include <regatta/operators/flow_stability.hpp>

#include "common.hpp"
#include "section_flow.hpp"

namespace regatta::cli::report {

namespace {

namespace fl = operators::flow;

constexpr double cluster_radius = 1e-2;

struct Run {
  double beta = 0;
  fl::Trajectory trajectory;
  std::vector<double> energy, clusters;
};

/// Orthographic view from (1, 1, 1)/√3: the front and back hemispheres as two point series.
void add_particles(Figure& fig, const Matrix<double>& X) {
  const Eigen::Vector3d view = Eigen::Vector3d(1, 1, 1).normalized();
  const Eigen::Vector3d e1 = Eigen::Vector3d(1, -1, 0).normalized(),
                        e2 = Eigen::Vector3d(1, 1, -2).normalized();  // view × e1
  Series front{"front hemisphere", Kind::estimate, {}, {}, false, true, 0};
  Series back{"back hemisphere", Kind::estimate, {}, {}, false, true, 8};  // grey
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const Eigen::Vector3d x(X(i, 0), X(i, 1), X(i, 2));
    Series& s = x.dot(view) >= 0 ? front : back;
    s.x.push_back(x.dot(e1));
    s.y.push_back(x.dot(e2));
  }
  Series rim{"unit circle (outline of the sphere)", Kind::input, {}, {}, true, false, 8};
  for (int k = 0; k <= 96; ++k) {
    rim.x.push_back(std::cos(2 * M_PI * k / 96));
    rim.y.push_back(std::sin(2 * M_PI * k / 96));
  }
  fig.add(rim).add(back).add(front);
}

/// Two flows at β = 1 from X0 and from X0 moved by 10⁻⁶ (a-weighted ℓ², projected back onto S²): their
/// distance (estimate) against the certified Grönwall bound e^{Lt} d₀ (docs/flow.md#flow-stability).
void add_stability(Section& s, const Context& ctx, const Matrix<double>& X0) {
  const double beta = 1, perturbation = 1e-6, horizon = 2, record = 0.1;
  fl::ModelSpec spec;
  spec.model = fl::Model::sphere;
  spec.beta = beta;
  fl::IntegratorOptions o;
  o.step = 0.05;
  o.horizon = horizon;
  for (int k = 1; k * record < horizon; ++k) o.output_times.push_back(k * record);
  Matrix<double> G =
      measures::sample_gaussian(Vector<double>::Zero(X0.cols()), 1.0, X0.rows(), ctx.seed(7, 2));
  Matrix<double> Y0 =
      X0 + (perturbation / fl::weighted_distance(G, Matrix<double>::Zero(G.rows(), G.cols()))) * G;
  Y0.rowwise().normalize();
  const fl::Trajectory tx = fl::integrate(spec, X0, {}, o), ty = fl::integrate(spec, Y0, {}, o);
  const fl::FieldLipschitz L = fl::certified_field_lipschitz(spec);
  const interval64 d0 = fl::projected_distance(X0, Y0);
  Series measured{
      "distance of the two integrated flows |X_t − Y_t|_a", Kind::estimate, {}, {}, true, true, 0};
  Series bound{"Grönwall bound e^{Lt} d₀", Kind::certified_upper, {}, {}, true, true, 1};
  double vacuous = NAN;  // first recorded time where the bound exceeds the diameter 2 of the sphere
  for (std::size_t k = 0; k < tx.times.size() && k < ty.times.size(); ++k) {
    const double t = tx.times[k];
    measured.x.push_back(t);
    measured.y.push_back(fl::weighted_distance(tx.states[k], ty.states[k]));
    bound.x.push_back(t);
    bound.y.push_back(fl::gronwall_upper(L.constant.upper(), d0.upper(), t));
    if (std::isnan(vacuous) && bound.y.back() > 2) vacuous = t;
  }
  Figure fig("flow_stability",
             "Two nearby flows (sphere model, β = 1): distance and certified Grönwall bound",
             "time t (depth)", "a-weighted ℓ² distance (index coupling)");
  fig.logy = true;
  fig.add(measured).add(bound);
  fig.caption =
      "The tokens of this section and a copy moved by 10⁻⁶ (Gaussian direction, projected back onto S²), "
      "both integrated by RK4 with step 0.05. Dashed: the distance of the two computed states under the "
      "coupling by index, an upper estimate of W₂ (estimate). Solid: e^{Lt} d₀ with L = 2 + β + (1 + β)e^β "
      "the certified Lipschitz constant of the field on the product of unit balls and d₀ the certified "
      "initial distance — a certified upper bound on W₂ between the exact flows "
      "(docs/flow.md#flow-stability). The bound "
      "is a worst case over all configurations; the gap shows how far the typical flow is from it.";
  s.figures.push_back(std::move(fig));
  s.findings.push_back("Stability at β = 1: certified L ≤ " +
                       said(L.constant.upper(), Kind::certified_upper, 6) +
                       "; distance of two flows 10⁻⁶ apart at t = " + format_number(horizon, Kind::input, 3) +
                       ": " + said(measured.y.back(), Kind::estimate, 3) + ", Grönwall bound " +
                       said(bound.y.back(), Kind::certified_upper, 3) +
                       (std::isnan(vacuous) ? std::string()
                                            : " (above the sphere's diameter 2, i.e. vacuous, from t = " +
                                                  format_number(vacuous, Kind::input, 3) + ")"));
}

}  // namespace

Section section_flow(const Context& ctx) {
  Section s;
  s.title = "Attention dynamics and clustering";
  s.text.push_back(
      "Self-attention with tied, identity weights acting on tokens on the sphere is an interacting particle "
      "system (Geshkovski, Letrouit, Polyanskiy, Rigollet, *A mathematical perspective on Transformers*): "
      "dx_i/dt = P⊥_{x_i} Σ_j softmax_j(β⟨x_i, x_j⟩) x_j, depth playing the role of time. For small β the "
      "tokens collapse quickly to one point; for large β they first gather into several clusters that "
      "persist "
      "on long plateaus before merging (metastability). `regatta flow` runs this and the other models of "
      "docs/flow.md; here the sphere model in d = 3.");
  const Eigen::Index n = ctx.size<Eigen::Index>(128, 512);
  const double step = 0.1;
  const double record = ctx.size(1.0, 0.5);
  const std::vector<std::pair<double, double>> settings = {{1.0, ctx.size(20.0, 30.0)},
                                                           {9.0, ctx.size(60.0, 200.0)}};
  const std::uint64_t seed = ctx.seed(7, 1);
  const Matrix<double> X0 = measures::sample_sphere(3, 1.0, n, seed);
  s.configuration.push_back("tokens: n = " + std::to_string(n) + " i.i.d. uniform on S², seed " +
                            std::to_string(seed) + "; uniform weights");
  s.configuration.push_back("sphere model, RK4 with step " + format_number(step, Kind::input, 3) +
                            " (renormalised onto S² after each step); states recorded every " +
                            format_number(record, Kind::input, 3));
  s.configuration.push_back("clusters: connected components of ‖x_i − x_j‖ ≤ " +
                            format_number(cluster_radius, Kind::input, 3));

  std::vector<Run> runs;
  auto bar =
      ctx.progress("7 flow: " + std::to_string(settings.size()) + " temperatures", long(settings.size()));
  for (const auto& [beta, horizon] : settings) {
    fl::ModelSpec spec;
    spec.model = fl::Model::sphere;
    spec.beta = beta;
    fl::IntegratorOptions o;
    o.step = step;
    o.horizon = horizon;
    for (int k = 1; k * record < horizon; ++k) o.output_times.push_back(k * record);
    Run r;
    r.beta = beta;
    r.trajectory = fl::integrate(spec, X0, {}, o);
    const Vector<double> w = Vector<double>::Constant(n, 1.0 / double(n));
    for (const Matrix<double>& X : r.trajectory.states) {
      r.energy.push_back(fl::interaction_energy(X, w, beta));
      r.clusters.push_back(double(fl::pair_statistics(X, cluster_radius).clusters));
    }
    runs.push_back(std::move(r));
    bar->advance();
  }
  bar->finish();

  Figure stairs("flow_clusters",
                "Cluster count against time (sphere model, d = 3, n = " + std::to_string(n) + ")",
                "time t (depth)", "number of clusters");
  stairs.logy = true;
  Figure energy("flow_energy", "Interaction energy against time, divided by its value at t = 0",
                "time t (depth)", "E_β(μ_t) / E_β(μ_0)");
  Table t("flow_plateaus", "Cluster plateaus along the sphere flow");
  t.column("beta", "β", Kind::input)
      .column("clusters", "clusters", Kind::estimate, "components of the threshold graph")
      .column("from", "from t", Kind::estimate, "first recorded time with this count")
      .column("to", "to t", Kind::estimate, "last recorded time with this count")
      .column("energy", "E_β at the end", Kind::estimate,
              "interaction energy at the last time of the plateau");
  for (const Run& r : runs) {
    Series c{"β = " + format_number(r.beta, Kind::input, 3),
             Kind::estimate,
             r.trajectory.times,
             r.clusters,
             true,
             false};
    stairs.add(c);
    Series e{
        "β = " + format_number(r.beta, Kind::input, 3), Kind::estimate, r.trajectory.times, {}, true, false};
    for (double v : r.energy) e.y.push_back(v / r.energy.front());
    energy.add(e);
    std::size_t start = 0;
    const auto& times = r.trajectory.times;
    for (std::size_t k = 1; k <= times.size(); ++k) {
      if (k < times.size() && r.clusters[k] == r.clusters[start]) continue;
      t.add_row({r.beta, std::int64_t(r.clusters[start]), times[start], times[k - 1], r.energy[k - 1]});
      start = k;
    }
    double one = NAN;
    for (std::size_t k = 0; k < times.size(); ++k)
      if (r.clusters[k] == 1) {
        one = times[k];
        break;
      }
    s.findings.push_back("β = " + format_number(r.beta, Kind::input, 3) + ": " +
                         (std::isnan(one)
                              ? "still " + format_number(r.clusters.back(), Kind::estimate, 4) +
                                    " clusters at t = " + format_number(times.back(), Kind::input, 4)
                              : "one cluster from t = " + said(one, Kind::estimate, 3)) +
                         " (" + std::to_string(r.trajectory.steps) + " RK4 steps)");
  }
  stairs.caption =
      "Estimates: components of the graph ‖x_i − x_j‖ ≤ 10⁻² at the recorded times. β = 1 falls to one "
      "cluster; "
      "β = 9 shows the metastable staircase, long plateaus between merges.";
  energy.caption =
      "Estimates. The normalised model is not a gradient flow of E_β in the Euclidean metric, but "
      "E_β rises as the tokens gather; each merge of two clusters is a step up.";
  t.caption = "Each row is a run of recorded times with the same cluster count (estimates).";
  s.figures.push_back(std::move(stairs));
  s.figures.push_back(std::move(energy));
  const Run& slow = runs.back();
  const auto& times = slow.trajectory.times;
  const std::vector<std::size_t> picks = {0, times.size() / 20, times.size() / 4, times.size() - 1};
  for (std::size_t p = 0; p < picks.size(); ++p) {
    Figure fig("flow_particles_" + std::to_string(p),
               "β = 9, t = " + format_number(times[picks[p]], Kind::input, 4) + " (orthographic view of S²)",
               "⟨x, e₁⟩", "⟨x, e₂⟩");
    fig.key = "below";
    add_particles(fig, slow.trajectory.states[picks[p]]);
    if (p + 1 == picks.size()) {
      // The last view also carries the animation over every recorded state (at most 120 frames).
      fig.equal_axes = true;
      const std::size_t count = times.size(), frames = std::min<std::size_t>(count, 120);
      for (std::size_t f = 0; f < frames; ++f) {
        const std::size_t k = frames == count ? f : f * (count - 1) / (frames - 1);
        Figure frame;
        add_particles(frame, slow.trajectory.states[k]);
        fig.frames.push_back(frame.series);
        fig.frame_titles.push_back("β = 9, t = " + format_number(times[k], Kind::input, 4) +
                                   " (orthographic view of S²)");
      }
    }
    fig.caption =
        "Tokens seen from (1, 1, 1)/√3 (e₁ ∝ (1, −1, 0), e₂ = view × e₁): front hemisphere and back "
        "hemisphere. Positions are estimates (RK4 in double precision)." +
        std::string(p + 1 == picks.size() ? " The animation shows every recorded state (at most 120 frames)."
                                          : "");
    s.figures.push_back(std::move(fig));
  }
  s.tables.push_back(std::move(t));
  add_stability(s, ctx, X0);
  s.omissions.push_back(
      "Certified quantities: only the Grönwall bound of the stability figure. The trajectories are "
      "floating-point integrations (no validated enclosure of the ODE), so clusters, energies and distances "
      "are estimates (docs/flow.md#not-certified).");
  return s;
}

}  // namespace regatta::cli::report
