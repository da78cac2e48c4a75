// Counts of the aten ops that ran natively on neuron and of those that fell back to the CPU
// (torch_neuronx.get_executed_ops() / get_fallback_ops()).
#pragma once

#include <map>
#include <string>

namespace torch_neuronx {

// `op` must live for the process (a literal, or op_name<Op>()).
void track_native(const char* op);
// Returns true the first time `op` falls back (so the caller warns once).
bool track_fallback(const std::string& op);
std::map<std::string, int64_t> executed_ops();
std::map<std::string, int64_t> fallback_ops();
void clear_op_tracking();

} // namespace torch_neuronx
