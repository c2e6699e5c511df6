#pragma once
// Whole models from named tensors already in memory (a PyTorch state dict handed over by the Python module),
// in the layout of load_model (model.hpp): the same adapter, the same checks, the same messages.
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>
#include <regatta/core/io/array.hpp>
#include <regatta/operators/model.hpp>

namespace regatta::operators {

/// The model held by `tensors` (name -> array; each array's `source` names it in messages, e.g.
/// "state_dict:head.weight"); `file` names the collection ("state_dict"). `config` is called once, after the
/// layout has been recognised, and returns the JSON config (it throws InputError itself when there is none);
/// `config_source` names the config in messages. Layout, checks and messages as load_model, which reads the
/// file and calls this.
Model model_from_tensors(std::map<std::string, io::Array> tensors, const std::string& file,
                         const std::function<nlohmann::json()>& config, const std::string& config_source);

}  // namespace regatta::operators
