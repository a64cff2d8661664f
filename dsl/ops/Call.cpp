// Calling operators by name with JSON attributes: one table for Python, the
// CLI and graph importers. Each entry checks its input count and attributes;
// an attribute that no entry reads (a typo) is an error naming the valid ones.
#include <algorithm>
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
    return opt<T>(key).value_or(std::move(def));
  }
  template <typename T>
  std::optional<T> opt(const std::string& key) {
    used_.push_back(key);
    if (!j_.contains(key)) return std::nullopt;
    try {
      return j_.at(key).get<T>();
    } catch (const json::exception&) {
      throw DefinitionError(op_ + ": attribute '" + key + "' has the wrong type: " + j_.at(key).dump());
    }
  }
  template <typename T>
  T req(const std::string& key) {
    auto v = opt<T>(key);
    if (!v) throw DefinitionError(op_ + ": attribute '" + key + "' is required");
    return *v;
  }
  DType dtype(const std::string& key, DType def) {
    const auto s = opt<std::string>(key);
    return s ? parse_dtype(*s) : def;
  }
  // A shape: integers and symbolic size names.
  Shape shape(const std::string& key) {
    used_.push_back(key);
    if (!j_.contains(key) || !j_.at(key).is_array())
      throw DefinitionError(op_ + ": attribute '" + key + "' must be a list of sizes and symbol names");
    Shape s;
    for (const auto& d : j_.at(key)) {
      if (d.is_number_integer()) s.push_back(Dim(d.get<int64_t>()));
      else if (d.is_string()) s.push_back(Dim::symbol(d.get<std::string>()));
      else throw DefinitionError(op_ + ": attribute '" + key + "' has a bad size " + d.dump());
    }
    return s;
  }
  // All attributes, passed through to an operator that validates them itself.
  json all() {
    for (const auto& [k, v] : j_.items()) used_.push_back(k);
    return j_;
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

using Ins = std::vector<Tensor>;
using Fn = std::function<Tensor(const Ins&, Attrs&, const std::string&)>;
struct Entry {
  size_t min_inputs, max_inputs;
  Fn fn;
};

Tensor opt(const Ins& in, size_t i) { return i < in.size() ? in[i] : Tensor(); }

ConvParams conv_params(Attrs& a) {
  ConvParams p;
  p.stride = a.get<std::vector<int>>("stride", {});
  p.padding = a.get<std::vector<int>>("padding", {});
  p.dilation = a.get<std::vector<int>>("dilation", {});
  p.groups = a.get<int>("groups", 1);
  p.layout = a.get<std::string>("layout", "NCHW");
  return p;
}
PoolParams pool_params(Attrs& a) {
  PoolParams p;
  p.kernel = a.req<std::vector<int>>("kernel");
  p.stride = a.get<std::vector<int>>("stride", {});
  p.padding = a.get<std::vector<int>>("padding", {});
  return p;
}
std::vector<int> axes(Attrs& a) { return a.get<std::vector<int>>("axes", {}); }
bool keepdims(Attrs& a) { return a.get<bool>("keepdims", false); }

std::map<std::string, Entry> build() {
  std::map<std::string, Entry> t;
  for (const std::string& n : unary_op_names())
    t[n] = {1, 1, [n](const Ins& in, Attrs& a, const std::string& name) { return unary_op(n, in[0], a.all(), name); }};
  for (const std::string& n : binary_op_names())
    t[n] = {2, 2, [n](const Ins& in, Attrs&, const std::string& name) { return binary_op(n, in[0], in[1], name); }};
  t["where"] = {3, 3, [](const Ins& in, Attrs&, const std::string& n) { return where(in[0], in[1], in[2], n); }};
  t["cast"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) {
                 const auto to = a.opt<std::string>("dtype");
                 if (!to) throw DefinitionError("cast: attribute 'dtype' is required");
                 return cast(in[0], parse_dtype(*to), n);
               }};

  // Reductions.
  using R = Tensor (*)(const Tensor&, std::vector<int>, bool, const std::string&);
  for (const auto& [n, f] : std::vector<std::pair<std::string, R>>{
           {"reduce_sum", reduce_sum}, {"reduce_max", reduce_max}, {"reduce_min", reduce_min},
           {"reduce_prod", reduce_prod}, {"reduce_mean", reduce_mean}, {"reduce_l1", reduce_l1},
           {"reduce_l2", reduce_l2}, {"reduce_sum_square", reduce_sum_square}, {"reduce_logsumexp", reduce_logsumexp}})
    t[n] = {1, 1, [f = f](const Ins& in, Attrs& a, const std::string& name) { return f(in[0], axes(a), keepdims(a), name); }};
  t["reduce_var"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) {
                       return reduce_var(in[0], axes(a), keepdims(a), a.get<int>("ddof", 0), n);
                     }};
  t["reduce_std"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) {
                       return reduce_std(in[0], axes(a), keepdims(a), a.get<int>("ddof", 0), n);
                     }};
  t["argmax"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) { return argmax(in[0], a.get<int>("axis", 0), keepdims(a), n); }};
  t["argmin"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) { return argmin(in[0], a.get<int>("axis", 0), keepdims(a), n); }};
  t["cumsum"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) {
                   return cumsum(in[0], a.get<int>("axis", 0), a.get<bool>("exclusive", false), a.get<bool>("reverse", false), n);
                 }};
  t["cumprod"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) {
                    return cumprod(in[0], a.get<int>("axis", 0), a.get<bool>("exclusive", false), a.get<bool>("reverse", false), n);
                  }};

  // Contractions and convolutions.
  t["matmul"] = {2, 2, [](const Ins& in, Attrs&, const std::string& n) { return matmul(in[0], in[1], n); }};
  t["linear"] = {2, 3, [](const Ins& in, Attrs&, const std::string& n) { return linear(in[0], in[1], opt(in, 2), n); }};
  t["einsum"] = {1, 8, [](const Ins& in, Attrs& a, const std::string& n) { return einsum(a.req<std::string>("equation"), in, n); }};
  t["conv1d"] = {2, 3, [](const Ins& in, Attrs& a, const std::string& n) { return conv("conv1d", 1, in[0], in[1], opt(in, 2), conv_params(a), n); }};
  t["conv2d"] = {2, 3, [](const Ins& in, Attrs& a, const std::string& n) { return conv("conv2d", 2, in[0], in[1], opt(in, 2), conv_params(a), n); }};
  t["conv3d"] = {2, 3, [](const Ins& in, Attrs& a, const std::string& n) { return conv("conv3d", 3, in[0], in[1], opt(in, 2), conv_params(a), n); }};
  t["conv2d_nhwc"] = {2, 3, [](const Ins& in, Attrs& a, const std::string& n) {
                        using A2 = std::array<int, 2>;
                        return conv2d_nhwc(in[0], in[1], opt(in, 2), a.get<A2>("stride", {1, 1}), a.get<A2>("padding", {0, 0}),
                                           a.get<A2>("dilation", {1, 1}), n);
                      }};
  t["conv_transpose2d"] = {2, 3, [](const Ins& in, Attrs& a, const std::string& n) {
                             using A2 = std::array<int, 2>;
                             return conv_transpose2d(in[0], in[1], opt(in, 2), a.get<A2>("stride", {1, 1}),
                                                     a.get<A2>("padding", {0, 0}), a.get<A2>("output_padding", {0, 0}),
                                                     a.get<A2>("dilation", {1, 1}), a.get<int>("groups", 1), n);
                           }};

  // Pooling.
  for (int s = 1; s <= 3; ++s) {
    const std::string d = std::to_string(s) + "d";
    t["max_pool" + d] = {1, 1, [s, d](const Ins& in, Attrs& a, const std::string& n) {
                           return max_pool("max_pool" + d, s, in[0], pool_params(a), n);
                         }};
    t["avg_pool" + d] = {1, 1, [s, d](const Ins& in, Attrs& a, const std::string& n) {
                           PoolParams p = pool_params(a);
                           p.count_include_pad = a.get<bool>("count_include_pad", false);
                           return avg_pool("avg_pool" + d, s, in[0], p, n);
                         }};
  }
  t["global_avg_pool"] = {1, 1, [](const Ins& in, Attrs&, const std::string& n) { return global_avg_pool(in[0], n); }};
  t["global_max_pool"] = {1, 1, [](const Ins& in, Attrs&, const std::string& n) { return global_max_pool(in[0], n); }};

  // Normalization and attention.
  t["softmax"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) { return softmax(in[0], a.get<int>("axis", -1), n); }};
  t["log_softmax"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) { return log_softmax(in[0], a.get<int>("axis", -1), n); }};
  t["layer_norm"] = {1, 3, [](const Ins& in, Attrs& a, const std::string& n) {
                       return layer_norm(in[0], opt(in, 1), opt(in, 2), a.get<double>("eps", 1e-5), n);
                     }};
  t["rms_norm"] = {1, 2, [](const Ins& in, Attrs& a, const std::string& n) { return rms_norm(in[0], opt(in, 1), a.get<double>("eps", 1e-6), n); }};
  t["batch_norm"] = {5, 5, [](const Ins& in, Attrs& a, const std::string& n) {
                       return batch_norm(in[0], in[1], in[2], in[3], in[4], a.get<double>("eps", 1e-5), n);
                     }};
  t["group_norm"] = {1, 3, [](const Ins& in, Attrs& a, const std::string& n) {
                       return group_norm(in[0], a.req<int>("groups"), opt(in, 1), opt(in, 2), a.get<double>("eps", 1e-5), n);
                     }};
  t["instance_norm"] = {1, 3, [](const Ins& in, Attrs& a, const std::string& n) {
                          return instance_norm(in[0], opt(in, 1), opt(in, 2), a.get<double>("eps", 1e-5), n);
                        }};
  t["l2_normalize"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) {
                         return l2_normalize(in[0], a.get<int>("axis", -1), a.get<double>("eps", 1e-12), n);
                       }};
  t["scaled_dot_product_attention"] = {3, 4, [](const Ins& in, Attrs& a, const std::string& n) {
                                         return scaled_dot_product_attention(in[0], in[1], in[2], opt(in, 3),
                                                                             a.get<bool>("causal", false),
                                                                             a.opt<double>("scale"), n);
                                       }};

  // Data movement.
  t["identity"] = {1, 1, [](const Ins& in, Attrs&, const std::string& n) { return identity(in[0], n); }};
  t["transpose"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) { return transpose(in[0], a.get<std::vector<int>>("perm", {}), n); }};
  t["reshape"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) { return reshape(in[0], a.req<std::vector<int64_t>>("shape"), n); }};
  t["flatten"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) { return flatten(in[0], a.get<int>("axis", 1), n); }};
  t["squeeze"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) { return squeeze(in[0], axes(a), n); }};
  t["unsqueeze"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) { return unsqueeze(in[0], a.req<std::vector<int>>("axes"), n); }};
  t["broadcast_to"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) { return broadcast_to(in[0], a.shape("shape"), n); }};
  t["slice"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) {
                  return slice(in[0], a.req<std::vector<int64_t>>("starts"), a.req<std::vector<int64_t>>("ends"), axes(a),
                               a.get<std::vector<int64_t>>("steps", {}), n);
                }};
  t["concat"] = {1, 64, [](const Ins& in, Attrs& a, const std::string& n) { return concat(in, a.get<int>("axis", 0), n); }};
  t["stack"] = {1, 64, [](const Ins& in, Attrs& a, const std::string& n) { return stack(in, a.get<int>("axis", 0), n); }};
  t["split"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) {
                  const int i = a.get<int>("index", 0);
                  if (i < 0) throw DefinitionError("split: index " + std::to_string(i) + " must be >= 0");
                  return split(in[0], a.get<int>("axis", 0), a.get<std::vector<int64_t>>("sizes", {}), a.get<int>("num", 0), n, i)[0];
                }};
  t["pad"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) {
                return pad(in[0], a.req<std::vector<int64_t>>("pads"), a.get<std::string>("mode", "constant"),
                           a.get<double>("value", 0), n);
              }};
  t["gather"] = {2, 2, [](const Ins& in, Attrs& a, const std::string& n) { return gather(in[0], in[1], a.get<int>("axis", 0), n); }};
  t["gather_elements"] = {2, 2, [](const Ins& in, Attrs& a, const std::string& n) {
                            return gather_elements(in[0], in[1], a.get<int>("axis", 0), n);
                          }};
  t["scatter"] = {3, 3, [](const Ins& in, Attrs& a, const std::string& n) { return scatter(in[0], in[1], in[2], a.get<int>("axis", 0), n); }};
  t["embedding"] = {2, 2, [](const Ins& in, Attrs&, const std::string& n) { return embedding(in[0], in[1], n); }};
  t["tile"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) { return tile(in[0], a.req<std::vector<int64_t>>("repeats"), n); }};
  t["repeat"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) {
                   return repeat(in[0], a.req<int64_t>("repeats"), a.get<int>("axis", 0), n);
                 }};
  t["flip"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) { return flip(in[0], axes(a), n); }};
  t["roll"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) {
                 return roll(in[0], a.req<std::vector<int64_t>>("shifts"), a.req<std::vector<int>>("axes"), n);
               }};
  t["one_hot"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) {
                    return one_hot(in[0], a.req<int64_t>("depth"), a.get<int>("axis", -1), a.get<double>("on_value", 1),
                                   a.get<double>("off_value", 0), a.dtype("dtype", DType::F32), n);
                  }};
  t["tril"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) { return tril(in[0], a.get<int64_t>("k", 0), n); }};
  t["triu"] = {1, 1, [](const Ins& in, Attrs& a, const std::string& n) { return triu(in[0], a.get<int64_t>("k", 0), n); }};
  return t;
}

const std::map<std::string, Entry>& table() {
  static const std::map<std::string, Entry> t = build();
  return t;
}

}  // namespace

std::vector<std::string> callable_ops() {
  std::vector<std::string> r;
  for (const auto& [k, v] : table()) r.push_back(k);
  return r;
}

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
