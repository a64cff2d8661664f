// The operator table (see Registry.h): the rows of every family that is not
// itself a table of formulas, the attribute checks and call().
#include "dsl/ops/Registry.h"

#include <algorithm>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

using json = nlohmann::json;
using Ins = std::vector<Tensor>;

constexpr AttrType I = AttrType::Int, F = AttrType::Float, B = AttrType::Bool, S = AttrType::String,
                   L = AttrType::Ints;
constexpr OpKind kR = OpKind::Reduction, kC = OpKind::Contraction, kV = OpKind::Convolution, kP = OpKind::Pooling,
                 kN = OpKind::Normalization, kD = OpKind::DataMovement;

Tensor opt(const Ins& in, size_t i) { return i < in.size() ? in[i] : Tensor(); }

const json kNone = json::array();
const std::vector<AttrSpec> kReduceAttrs = {{"axes", L, kNone}, {"keepdims", B, false}};
const std::vector<AttrSpec> kScanAttrs = {{"axis", I, 0}, {"exclusive", B, false}, {"reverse", B, false}};
const std::vector<AttrSpec> kConvAttrs = {{"stride", L, kNone},   {"padding", L, kNone},
                                          {"dilation", L, kNone}, {"groups", I, 1},
                                          {"layout", S, "NCHW"},  {"algorithm", S, "auto"}};
const std::vector<AttrSpec> kPoolAttrs = {{"kernel", L, nullptr, true}, {"stride", L, kNone},
                                          {"padding", L, kNone},        {"padding_end", L, kNone},
                                          {"dilation", L, kNone},       {"ceil_mode", B, false},
                                          {"channels_last", B, false}};
std::vector<AttrSpec> with(std::vector<AttrSpec> a, const std::vector<AttrSpec>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

std::vector<int> ints(const Attrs& a, const char* key) { return a.get<std::vector<int>>(key); }
ConvParams conv_params(const Attrs& a) {
  return {ints(a, "stride"),    ints(a, "padding"),           ints(a, "dilation"),
          a.get<int>("groups"), a.get<std::string>("layout"), a.get<std::string>("algorithm")};
}
PoolParams pool_params(const Attrs& a) {
  return {ints(a, "kernel"),        ints(a, "stride"),
          ints(a, "padding"),       a.has("count_include_pad") && a.get<bool>("count_include_pad"),
          ints(a, "padding_end"),   ints(a, "dilation"),
          a.get<bool>("ceil_mode"), a.get<bool>("channels_last")};
}

// A reduction over axes with keepdims: the function's name is the row's.
OpInfo reduction(const std::string& name, const std::string& summary,
                 Tensor (*f)(const Tensor&, std::vector<int>, bool, const std::string&)) {
  return {name, kR, summary, 1, 1, kReduceAttrs, [f](const Ins& in, const Attrs& a, const std::string& n) {
            return f(in[0], a.get<std::vector<int>>("axes"), a.get<bool>("keepdims"), n);
          }};
}

std::vector<OpInfo> rows() {
  std::vector<OpInfo> t = unary_ops();
  for (auto family : {elementwise_ops, loss_ops, sort_ops, indexing_ops, rearrange_ops,
                      neural_net_ops, resize_ops, quantize_ops, recurrent_ops, rotary_ops})
    for (OpInfo& o : family()) t.push_back(std::move(o));
  auto add = [&](OpInfo o) { t.push_back(std::move(o)); };
  add({"cast", OpKind::Elementwise, "convert to dtype (dtype): f64 f32 f16 bf16 i8 i32 i64 bool ...", 1, 1,
       {{"dtype", AttrType::DType, nullptr, true}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return cast(in[0], a.dtype("dtype"), n); }});

  // Reductions.
  add(reduction("reduce_sum", "sum over axes, keepdims", reduce_sum));
  add(reduction("reduce_max", "max over axes, keepdims", reduce_max));
  add(reduction("reduce_min", "min over axes, keepdims", reduce_min));
  add(reduction("reduce_prod", "product over axes, keepdims", reduce_prod));
  add(reduction("reduce_mean", "mean over axes (symbolic ones too), keepdims", reduce_mean));
  add(reduction("reduce_l1", "sum of |x| over axes", reduce_l1));
  add(reduction("reduce_l2", "sqrt of the sum of squares over axes", reduce_l2));
  add(reduction("reduce_sum_square", "sum of x^2 over axes", reduce_sum_square));
  add(reduction("reduce_logsumexp", "log sum exp over axes, max-shifted", reduce_logsumexp));
  using Moment = Tensor (*)(const Tensor&, std::vector<int>, bool, int, const std::string&);
  for (const auto& [name, summary, f] : std::vector<std::tuple<std::string, std::string, Moment>>{
           {"reduce_var", "variance over axes, two-pass (ddof)", reduce_var},
           {"reduce_std", "standard deviation (ddof)", reduce_std}})
    add({name, kR, summary, 1, 1, with(kReduceAttrs, {{"ddof", I, 0}}),
         [f = f](const Ins& in, const Attrs& a, const std::string& n) {
           return f(in[0], a.get<std::vector<int>>("axes"), a.get<bool>("keepdims"), a.get<int>("ddof"), n);
         }});
  using Arg = Tensor (*)(const Tensor&, int, bool, const std::string&);
  for (const auto& [name, summary, f] : std::vector<std::tuple<std::string, std::string, Arg>>{
           {"argmax", "index of the first maximum along axis (i64)", argmax},
           {"argmin", "index of the first minimum along axis (i64)", argmin}})
    add({name, kR, summary, 1, 1, {{"axis", I, 0}, {"keepdims", B, false}},
         [f = f](const Ins& in, const Attrs& a, const std::string& n) {
           return f(in[0], a.get<int>("axis"), a.get<bool>("keepdims"), n);
         }});
  using Scan = Tensor (*)(const Tensor&, int, bool, bool, const std::string&);
  for (const auto& [name, summary, f] : std::vector<std::tuple<std::string, std::string, Scan>>{
           {"cumsum", "running sum along axis (exclusive, reverse)", cumsum},
           {"cumprod", "running product along axis (exclusive, reverse)", cumprod}})
    add({name, kR, summary, 1, 1, kScanAttrs, [f = f](const Ins& in, const Attrs& a, const std::string& n) {
           return f(in[0], a.get<int>("axis"), a.get<bool>("exclusive"), a.get<bool>("reverse"), n);
         }});

  // Contractions and convolutions.
  add({"matmul", kC, "numpy matmul: batch broadcasting, 1-D promotion", 2, 2, {},
       [](const Ins& in, const Attrs&, const std::string& n) { return matmul(in[0], in[1], n); }});
  add({"linear", kC, "x @ W^T + b", 2, 3, {},
       [](const Ins& in, const Attrs&, const std::string& n) { return linear(in[0], in[1], opt(in, 2), n); }});
  add({"einsum", kC, "Einstein summation over explicit subscripts (equation)", 1, 8, {{"equation", S, nullptr, true}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return einsum(a.get<std::string>("equation"), in, n); }});
  for (int s = 1; s <= 3; ++s) {
    const std::string op = "conv" + std::to_string(s) + "d";
    static const char* const kSummary[] = {"1-D convolution NCW/NWC: stride, padding, dilation, groups",
                                           "2-D convolution NCHW/NHWC: stride, padding, dilation, groups (depthwise)",
                                           "3-D convolution NCDHW/NDHWC: stride, padding, dilation, groups"};
    add({op, kV, kSummary[s - 1], 2, 3, kConvAttrs, [op, s](const Ins& in, const Attrs& a, const std::string& n) {
           return conv(op, s, in[0], in[1], opt(in, 2), conv_params(a), n);
         }});
  }
  add({"conv2d_nhwc", kV, "2-D convolution, channels last: input NHWC, weight HWIO; stride, padding, dilation", 2, 3,
       {{"stride", L, {1, 1}}, {"padding", L, {0, 0}}, {"dilation", L, {1, 1}}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         return conv2d_nhwc(in[0], in[1], opt(in, 2), a.pair("stride"), a.pair("padding"), a.pair("dilation"), n);
       }});
  add({"conv_transpose2d", kV, "transposed 2-D convolution: stride, padding, output_padding, dilation, groups", 2, 3,
       {{"stride", L, {1, 1}}, {"padding", L, {0, 0}}, {"output_padding", L, {0, 0}}, {"dilation", L, {1, 1}},
        {"groups", I, 1}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         return conv_transpose2d(in[0], in[1], opt(in, 2), a.pair("stride"), a.pair("padding"),
                                 a.pair("output_padding"), a.pair("dilation"), a.get<int>("groups"), n);
       }});

  // Pooling.
  for (int s = 1; s <= 3; ++s) {
    const std::string d = std::to_string(s) + "-D";
    const std::string mx = "max_pool" + std::to_string(s) + "d", av = "avg_pool" + std::to_string(s) + "d";
    add({mx, kP,
         "max over " + d + " windows (kernel, stride, padding, padding_end, dilation, ceil_mode)",
         1, 1, kPoolAttrs, [mx, s](const Ins& in, const Attrs& a, const std::string& n) {
           return max_pool(mx, s, in[0], pool_params(a), n);
         }});
    add({av, kP, "average over " + d + " windows (count_include_pad)", 1, 1,
         with(kPoolAttrs, {{"count_include_pad", B, false}}),
         [av, s](const Ins& in, const Attrs& a, const std::string& n) { return avg_pool(av, s, in[0], pool_params(a), n); }});
    const std::string lp = "lp_pool" + std::to_string(s) + "d";
    add({lp, kP, "(sum of |x|^p)^(1/p) over " + d + " windows (p)", 1, 1,
         with(kPoolAttrs, {{"p", F, 2.0}}),
         [lp, s](const Ins& in, const Attrs& a, const std::string& n) {
           return lp_pool(lp, s, in[0], pool_params(a), a.get<double>("p"), n);
         }});
  }
  add({"global_avg_pool", kP, "mean over all spatial dims, kept as size 1", 1, 1, {},
       [](const Ins& in, const Attrs&, const std::string& n) { return global_avg_pool(in[0], n); }});
  add({"global_max_pool", kP, "max over all spatial dims, kept as size 1", 1, 1, {},
       [](const Ins& in, const Attrs&, const std::string& n) { return global_max_pool(in[0], n); }});

  // Normalization and attention.
  add({"softmax", kN, "exp(x - max) / sum, along an axis", 1, 1, {{"axis", I, -1}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return softmax(in[0], a.get<int>("axis"), n); }});
  add({"log_softmax", kN, "x - max - log(sum exp(x - max))", 1, 1, {{"axis", I, -1}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return log_softmax(in[0], a.get<int>("axis"), n); }});
  add({"layer_norm", kN, "(x - mean) / sqrt(var + eps) * gamma + beta, last dim", 1, 3, {{"eps", F, 1e-5}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         return layer_norm(in[0], opt(in, 1), opt(in, 2), a.get<double>("eps"), n);
       }});
  add({"rms_norm", kN, "x / sqrt(mean(x^2) + eps) * gamma, last dim", 1, 2, {{"eps", F, 1e-6}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return rms_norm(in[0], opt(in, 1), a.get<double>("eps"), n); }});
  add({"batch_norm", kN, "inference batch norm with running mean/var, channel dim 1", 5, 5, {{"eps", F, 1e-5}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         return batch_norm(in[0], in[1], in[2], in[3], in[4], a.get<double>("eps"), n);
       }});
  add({"group_norm", kN, "per-sample statistics over channel groups and space (groups)", 1, 3,
       {{"groups", I, nullptr, true}, {"eps", F, 1e-5}}, [](const Ins& in, const Attrs& a, const std::string& n) {
         return group_norm(in[0], a.get<int>("groups"), opt(in, 1), opt(in, 2), a.get<double>("eps"), n);
       }});
  add({"instance_norm", kN, "per-sample, per-channel statistics over space", 1, 3, {{"eps", F, 1e-5}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         return instance_norm(in[0], opt(in, 1), opt(in, 2), a.get<double>("eps"), n);
       }});
  add({"l2_normalize", kN, "x / max(||x||_2, eps) along an axis", 1, 1, {{"axis", I, -1}, {"eps", F, 1e-12}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         return l2_normalize(in[0], a.get<int>("axis"), a.get<double>("eps"), n);
       }});
  add({"scaled_dot_product_attention", kN, "softmax(q k^T scale + mask) v, optional causal / additive / bool mask", 3, 4,
       {{"causal", B, false}, {"scale", F}}, [](const Ins& in, const Attrs& a, const std::string& n) {
         return scaled_dot_product_attention(in[0], in[1], in[2], opt(in, 3), a.get<bool>("causal"), a.opt_number("scale"), n);
       }});

  // Data movement.
  using I64s = std::vector<int64_t>;
  add({"identity", kD, "copy", 1, 1, {}, [](const Ins& in, const Attrs&, const std::string& n) { return identity(in[0], n); }});
  add({"transpose", kD, "permute dims (perm)", 1, 1, {{"perm", L, kNone}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return transpose(in[0], a.get<std::vector<int>>("perm"), n); }});
  add({"reshape", kD, "new shape, -1 inferred, 0 copies (shape)", 1, 1, {{"shape", L, nullptr, true}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return reshape(in[0], a.get<I64s>("shape"), n); }});
  add({"flatten", kD, "to 2-D at axis (ONNX)", 1, 1, {{"axis", I, 1}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return flatten(in[0], a.get<int>("axis"), n); }});
  add({"squeeze", kD, "drop size-1 dims (axes)", 1, 1, {{"axes", L, kNone}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return squeeze(in[0], a.get<std::vector<int>>("axes"), n); }});
  add({"unsqueeze", kD, "insert size-1 dims (axes)", 1, 1, {{"axes", L, nullptr, true}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return unsqueeze(in[0], a.get<std::vector<int>>("axes"), n); }});
  add({"broadcast_to", kD, "numpy broadcast to shape", 1, 1, {{"shape", AttrType::Shape, nullptr, true}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return broadcast_to(in[0], a.shape("shape"), n); }});
  add({"slice", kD, "numpy slicing with steps (starts, ends, axes, steps)", 1, 1,
       {{"starts", L, nullptr, true}, {"ends", L, nullptr, true}, {"axes", L, kNone}, {"steps", L, kNone}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         return slice(in[0], a.get<I64s>("starts"), a.get<I64s>("ends"), a.get<std::vector<int>>("axes"), a.get<I64s>("steps"), n);
       }});
  add({"concat", kD, "join along an axis", 1, 64, {{"axis", I, 0}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return concat(in, a.get<int>("axis"), n); }});
  add({"stack", kD, "join along a new axis", 1, 64, {{"axis", I, 0}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return stack(in, a.get<int>("axis"), n); }});
  add({"split", kD, "pieces along an axis (sizes or num; index picks one)", 1, 1,
       {{"axis", I, 0}, {"sizes", L, kNone}, {"num", I, 0}, {"index", I, 0}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         const int i = a.get<int>("index");
         if (i < 0) throw DefinitionError("split: index " + std::to_string(i) + " must be >= 0");
         return split(in[0], a.get<int>("axis"), a.get<I64s>("sizes"), a.get<int>("num"), n, i)[0];
       }});
  add({"pad", kD, "constant / reflect / edge padding (pads, mode, value)", 1, 1,
       {{"pads", L, nullptr, true}, {"mode", S, "constant"}, {"value", F, 0}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         return pad(in[0], a.get<I64s>("pads"), a.get<std::string>("mode"), a.get<double>("value"), n);
       }});
  add({"gather", kD, "take along an axis by an index tensor (ONNX Gather)", 2, 2, {{"axis", I, 0}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return gather(in[0], in[1], a.get<int>("axis"), n); }});
  add({"gather_elements", kD, "per-element gather along an axis (ONNX GatherElements)", 2, 2, {{"axis", I, 0}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return gather_elements(in[0], in[1], a.get<int>("axis"), n); }});
  add({"scatter",
       kD,
       "per-element scatter along an axis: last write wins, or add / mul / max / min (ONNX "
       "ScatterElements)",
       3,
       3,
       {{"axis", I, 0}, {"reduction", S, "none"}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         return scatter(in[0], in[1], in[2], a.get<int>("axis"), n,
                        a.get<std::string>("reduction"));
       }});
  add({"embedding", kD, "rows of a [vocab, dim] table by id", 2, 2, {},
       [](const Ins& in, const Attrs&, const std::string& n) { return embedding(in[0], in[1], n); }});
  add({"tile", kD, "numpy tile (repeats)", 1, 1, {{"repeats", L, nullptr, true}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return tile(in[0], a.get<I64s>("repeats"), n); }});
  add({"repeat", kD, "numpy repeat along an axis (repeats, axis)", 1, 1, {{"repeats", I, nullptr, true}, {"axis", I, 0}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         return repeat(in[0], a.get<int64_t>("repeats"), a.get<int>("axis"), n);
       }});
  add({"flip", kD, "reverse along axes", 1, 1, {{"axes", L, kNone}},
       [](const Ins& in, const Attrs& a, const std::string& n) { return flip(in[0], a.get<std::vector<int>>("axes"), n); }});
  add({"roll", kD, "cyclic shift along axes (shifts, axes)", 1, 1, {{"shifts", L, nullptr, true}, {"axes", L, nullptr, true}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         return roll(in[0], a.get<I64s>("shifts"), a.get<std::vector<int>>("axes"), n);
       }});
  add({"one_hot", kD, "one-hot encoding along a new axis (depth, on_value, off_value, dtype)", 1, 1,
       {{"depth", I, nullptr, true}, {"axis", I, -1}, {"on_value", F, 1}, {"off_value", F, 0}, {"dtype", AttrType::DType, "f32"}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         return one_hot(in[0], a.get<int64_t>("depth"), a.get<int>("axis"), a.get<double>("on_value"),
                        a.get<double>("off_value"), a.dtype("dtype"), n);
       }});
  for (const auto& [name, lower] : {std::pair{"tril", true}, std::pair{"triu", false}})
    add({name, kD, std::string(lower ? "lower" : "upper") + " triangle of the last two dims (k)", 1, 1, {{"k", I, 0}},
         [lower = lower](const Ins& in, const Attrs& a, const std::string& n) {
           return lower ? tril(in[0], a.get<int64_t>("k"), n) : triu(in[0], a.get<int64_t>("k"), n);
         }});
  std::sort(t.begin(), t.end(), [](const OpInfo& a, const OpInfo& b) { return a.name < b.name; });
  return t;
}

bool has_type(const json& v, AttrType t) {
  auto all = [&](auto ok) { return v.is_array() && std::all_of(v.begin(), v.end(), ok); };
  switch (t) {
    case AttrType::Int: return v.is_number_integer();
    case AttrType::Float: return v.is_number();
    case AttrType::Bool: return v.is_boolean();
    case AttrType::String:
    case AttrType::DType: return v.is_string();
    case AttrType::Ints: return all([](const json& e) { return e.is_number_integer(); });
    case AttrType::Floats:
      return all([](const json& e) { return e.is_number(); });
    case AttrType::Shape: return all([](const json& e) { return e.is_number_integer() || e.is_string(); });
  }
  return false;
}

std::string join(const std::vector<std::string>& xs) {
  std::string r;
  for (const auto& x : xs) r += (r.empty() ? "" : ", ") + x;
  return r.empty() ? "none" : r;
}

}  // namespace

std::string_view to_string(AttrType t) {
  switch (t) {
    case AttrType::Int: return "an integer";
    case AttrType::Float: return "a number";
    case AttrType::Bool: return "true or false";
    case AttrType::String: return "a string";
    case AttrType::Ints: return "a list of integers";
    case AttrType::Floats:
      return "a list of numbers";
    case AttrType::Shape: return "a list of sizes and symbol names";
    case AttrType::DType: return "a dtype name";
  }
  return "?";
}

const json& Attrs::at(const std::string& key) const {
  if (!v_.contains(key)) throw DefinitionError(op_ + ": attribute '" + key + "' has no value and no default");
  return v_.at(key);
}

std::array<int, 2> Attrs::pair(const std::string& key) const {
  const auto v = get<std::vector<int>>(key);
  if (v.size() != 2)
    throw DefinitionError(op_ + ": attribute '" + key + "' needs 2 values, got " + std::to_string(v.size()));
  return {v[0], v[1]};
}

Shape Attrs::shape(const std::string& key) const {
  Shape s;
  for (const json& d : at(key)) s.push_back(d.is_string() ? Dim::symbol(d.get<std::string>()) : Dim(d.get<int64_t>()));
  return s;
}

DType Attrs::dtype(const std::string& key) const { return parse_dtype(get<std::string>(key)); }

const std::vector<OpInfo>& registry() {
  static const std::vector<OpInfo> t = rows();
  return t;
}

const OpInfo& op_info(const std::string& op) {
  static const std::map<std::string, const OpInfo*> by_name = [] {
    std::map<std::string, const OpInfo*> m;
    for (const OpInfo& o : registry()) m[o.name] = &o;
    return m;
  }();
  const auto it = by_name.find(op);
  if (it == by_name.end()) {
    std::vector<std::string> names;
    for (const auto& [k, v] : by_name) names.push_back(k);
    throw DefinitionError("unknown operator '" + op + "'; operators: " + join(names));
  }
  return *it->second;
}

Attrs check_attrs(const OpInfo& op, const json& attrs) {
  if (!attrs.is_null() && !attrs.is_object())
    throw DefinitionError(op.name + ": attributes must be a JSON object, got " + attrs.dump());
  std::vector<std::string> valid;
  for (const AttrSpec& s : op.attrs) valid.push_back(s.name);
  json v = json::object();
  if (attrs.is_object())
    for (const auto& [key, value] : attrs.items()) {
      const auto spec = std::find_if(op.attrs.begin(), op.attrs.end(), [&](const AttrSpec& s) { return s.name == key; });
      if (spec == op.attrs.end())
        throw DefinitionError(op.name + ": unknown attribute '" + key + "'; valid: " + join(valid));
      if (value.is_null()) continue;  // null is "not given" (Python's None)
      if (!has_type(value, spec->type))
        throw DefinitionError(op.name + ": attribute '" + key + "' must be " + std::string(to_string(spec->type)) +
                              ", got " + value.dump());
      if (spec->type == AttrType::DType) {
        try {
          parse_dtype(value.get<std::string>());
        } catch (const DTypeError& e) {
          throw DTypeError(op.name + ": attribute '" + key + "': " + e.what());
        }
      }
      v[key] = value;
    }
  for (const AttrSpec& s : op.attrs) {
    if (v.contains(s.name)) continue;
    if (s.required)
      throw DefinitionError(op.name + ": attribute '" + s.name + "' (" + std::string(to_string(s.type)) + ") is required");
    if (!s.def.is_null()) v[s.name] = s.def;
  }
  return Attrs(op.name, std::move(v));
}

Tensor call(const std::string& op, const std::vector<Tensor>& inputs, const json& attrs, const std::string& name) {
  const OpInfo& o = op_info(op);
  if (inputs.size() < o.min_inputs || inputs.size() > o.max_inputs)
    throw DefinitionError(op + ": takes " + std::to_string(o.min_inputs) +
                          (o.max_inputs != o.min_inputs ? "-" + std::to_string(o.max_inputs) : "") + " inputs, got " +
                          std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined()) throw DefinitionError(op + ": input " + std::to_string(i) + " is undefined");
  return o.build(inputs, check_attrs(o, attrs), name);
}

}  // namespace pto::ops
