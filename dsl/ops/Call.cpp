// Calling operators by name with JSON attributes: one table for Python, the
// CLI and graph importers. Each entry checks its input count and attributes.
#include <map>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

using json = nlohmann::json;

// Reads attributes, remembering which were used so that leftovers (typos) are errors.
class Attrs {
 public:
  Attrs(const std::string& op, const json& j) : op_(op), j_(j.is_null() ? json::object() : j) {
    if (!j_.is_object()) throw DefinitionError(op + ": attributes must be a JSON object, got " + j_.dump());
  }
  template <typename T>
  T get(const std::string& key, T def) {
    used_.push_back(key);
    if (!j_.contains(key)) return def;
    try {
      return j_.at(key).get<T>();
    } catch (const json::exception&) {
      throw DefinitionError(op_ + ": attribute '" + key + "' has the wrong type: " + j_.at(key).dump());
    }
  }
  void done() const {
    for (const auto& [k, v] : j_.items())
      if (std::find(used_.begin(), used_.end(), k) == used_.end()) {
        std::string valid;
        for (const auto& u : used_) valid += (valid.empty() ? "" : ", ") + u;
        throw DefinitionError(op_ + ": unknown attribute '" + k + "'; valid: " + (valid.empty() ? "none" : valid));
      }
  }

 private:
  std::string op_;
  json j_;
  std::vector<std::string> used_;
};

using Fn = std::function<Tensor(const std::vector<Tensor>&, Attrs&, const std::string&)>;
struct Entry {
  size_t min_inputs, max_inputs;
  Fn fn;
};

Tensor opt(const std::vector<Tensor>& in, size_t i) { return i < in.size() ? in[i] : Tensor(); }

const std::map<std::string, Entry>& table() {
  static const std::map<std::string, Entry> t = {
      {"add", {2, 2, [](const auto& in, auto&, const auto& n) { return add(in[0], in[1], n); }}},
      {"sub", {2, 2, [](const auto& in, auto&, const auto& n) { return sub(in[0], in[1], n); }}},
      {"mul", {2, 2, [](const auto& in, auto&, const auto& n) { return mul(in[0], in[1], n); }}},
      {"div", {2, 2, [](const auto& in, auto&, const auto& n) { return div(in[0], in[1], n); }}},
      {"maximum", {2, 2, [](const auto& in, auto&, const auto& n) { return maximum(in[0], in[1], n); }}},
      {"minimum", {2, 2, [](const auto& in, auto&, const auto& n) { return minimum(in[0], in[1], n); }}},
      {"relu", {1, 1, [](const auto& in, auto&, const auto& n) { return relu(in[0], n); }}},
      {"gelu", {1, 1, [](const auto& in, auto&, const auto& n) { return gelu(in[0], false, n); }}},
      {"gelu_tanh", {1, 1, [](const auto& in, auto&, const auto& n) { return gelu(in[0], true, n); }}},
      {"matmul", {2, 2, [](const auto& in, auto&, const auto& n) { return matmul(in[0], in[1], n); }}},
      {"linear", {2, 3, [](const auto& in, auto&, const auto& n) { return linear(in[0], in[1], opt(in, 2), n); }}},
      {"softmax", {1, 1, [](const auto& in, auto& a, const auto& n) { return softmax(in[0], a.template get<int>("axis", -1), n); }}},
      {"layer_norm",
       {1, 3, [](const auto& in, auto& a, const auto& n) {
          return layer_norm(in[0], opt(in, 1), opt(in, 2), a.template get<double>("eps", 1e-5), n);
        }}},
      {"reduce_sum",
       {1, 1, [](const auto& in, auto& a, const auto& n) {
          return reduce_sum(in[0], a.template get<std::vector<int>>("axes", {}), a.template get<bool>("keepdims", false), n);
        }}},
      {"reduce_max",
       {1, 1, [](const auto& in, auto& a, const auto& n) {
          return reduce_max(in[0], a.template get<std::vector<int>>("axes", {}), a.template get<bool>("keepdims", false), n);
        }}},
      {"reduce_mean",
       {1, 1, [](const auto& in, auto& a, const auto& n) {
          return reduce_mean(in[0], a.template get<std::vector<int>>("axes", {}), a.template get<bool>("keepdims", false), n);
        }}},
      {"conv2d",
       {2, 3, [](const auto& in, auto& a, const auto& n) {
          return conv2d(in[0], in[1], opt(in, 2), a.template get<std::array<int, 2>>("stride", {1, 1}),
                        a.template get<std::array<int, 2>>("padding", {0, 0}),
                        a.template get<std::array<int, 2>>("dilation", {1, 1}), a.template get<int>("groups", 1), n);
        }}},
  };
  return t;
}

}  // namespace

Tensor call(const std::string& op, const std::vector<Tensor>& inputs, const nlohmann::json& attrs,
            const std::string& name) {
  const auto& t = table();
  const auto it = t.find(op);
  if (it == t.end()) {
    std::string valid;
    for (const auto& [k, v] : t) valid += (valid.empty() ? "" : ", ") + k;
    throw DefinitionError("unknown operator '" + op + "'; operators: " + valid);
  }
  const Entry& e = it->second;
  if (inputs.size() < e.min_inputs || inputs.size() > e.max_inputs)
    throw DefinitionError(op + ": takes " + std::to_string(e.min_inputs) +
                          (e.max_inputs != e.min_inputs ? "-" + std::to_string(e.max_inputs) : "") + " inputs, got " +
                          std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined()) throw DefinitionError(op + ": input " + std::to_string(i) + " is undefined");
  Attrs a(op, attrs);
  Tensor r = e.fn(inputs, a, name);
  a.done();
  return r;
}

}  // namespace pto::ops
