#pragma once
// The rotary θ of a rotary embedding the fusion pass recorded (graph::RotaryPattern, docs/graph.md#fusion):
// recovered from the tables' angles and accepted only when operators' own binary64 tables for that θ
// (layer.hpp, "Rotary position embeddings") equal the graph's bit for bit, so that the layer read back
// rotates as the graph does up to the tables' rounding.
#include <optional>
#include <string>

#include <regatta/graph/patterns.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::operators {

/// The Rotary whose binary64 tables for `head_dim` are the pattern's, or nullopt with a one-line reason in
/// *why_not. With one token or head_dim 2 the tables do not depend on θ (all angles are i·θ⁰ or 0): the
/// default θ (10000) is returned when it regenerates them.
std::optional<Rotary> rotary_of(const graph::RotaryPattern& pattern, int head_dim, std::string* why_not);

/// The Rotary of an attention layer, as operators' AttentionLayer holds it: queries and keys both rotated,
/// by tables of the same θ; nullopt with the reason otherwise (also for a layer without rotary embedding).
std::optional<Rotary> rotary_of(const graph::AttentionPattern& layer, std::string* why_not);

}  // namespace regatta::operators
