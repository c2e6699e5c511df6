#pragma once
// Attention layers from named tensors already in memory (a PyTorch state dict handed over by the Python
// module), in the layouts of load_layer (layer.hpp): the same adapter, the same checks, the same messages.
#include <map>
#include <string>

#include <regatta/core/io/array.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::operators {

/// The layer held by `tensors` (name -> array; each array's `source` names it in messages, e.g.
/// "state_dict:in_proj_weight"); `file` names the collection ("state_dict"). Layouts, the prefix rule and
/// every error as load_layer, which reads a file and calls this.
AttentionLayer layer_from_tensors(std::map<std::string, io::Array> tensors, const std::string& file,
                                  int heads, AttentionKind kind = AttentionKind::dot,
                                  const std::string& prefix = "",
                                  OutputProjection output = OutputProjection::from_file,
                                  const RotaryStatement& rope = {});

}  // namespace regatta::operators
