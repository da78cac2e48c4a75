#include "aten/OpTracking.h"

#include <mutex>
#include <set>
#include <unordered_map>

namespace torch_neuronx {
namespace {

struct Tracker {
  std::mutex lock;
  // Keyed by the name's address: names live for the process (a launch keeps its op's name for
  // error messages), and hashing a pointer is cheaper than a string on every op.
  std::unordered_map<const char*, int64_t> executed;
  std::unordered_map<std::string, int64_t> fallback;
  std::set<std::string> warned;  // survives clear_op_tracking(): warn once per process
};

Tracker& tracker() {
  static Tracker* t = new Tracker();  // never destroyed: ops may run during exit
  return *t;
}

std::map<std::string, int64_t> sorted(const std::unordered_map<std::string, int64_t>& m) {
  return {m.begin(), m.end()};
}

} // namespace

void track_native(const char* op) {
  Tracker& t = tracker();
  std::lock_guard<std::mutex> g(t.lock);
  t.executed[op]++;
}

bool track_fallback(const std::string& op) {
  Tracker& t = tracker();
  std::lock_guard<std::mutex> g(t.lock);
  t.fallback[op]++;
  return t.warned.insert(op).second;
}

std::map<std::string, int64_t> executed_ops() {
  Tracker& t = tracker();
  std::lock_guard<std::mutex> g(t.lock);
  std::map<std::string, int64_t> counts;
  for (const auto& [name, n] : t.executed) counts[name] += n;  // one name may have two addresses
  return counts;
}

std::map<std::string, int64_t> fallback_ops() {
  Tracker& t = tracker();
  std::lock_guard<std::mutex> g(t.lock);
  return sorted(t.fallback);
}

void clear_op_tracking() {
  Tracker& t = tracker();
  std::lock_guard<std::mutex> g(t.lock);
  t.executed.clear();
  t.fallback.clear();
}

} // namespace torch_neuronx
