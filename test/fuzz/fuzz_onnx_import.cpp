// fuzz_onnx_import: the ONNX importer against mutated models.
//
//   fuzz_onnx_import [cases=10000] [seed=1] [save=FILE]
//
// With a third argument the first failing model is written there (for
// `pto import FILE` or a debugger).
// Seed models (an MLP, a conv net, the Shape -> Gather -> Concat -> Reshape
// chain exporters emit, resize / top-k / slice / pad / where, an LSTM) are
// built with onnx.proto's C++ classes; each case copies one and applies
// structural mutations (op types, inputs rewired to later values or to
// nothing, attributes of the wrong type or absurd value, initializers with
// negative, zero or 2^40 dims, short or typed-instead-of-raw data, unknown
// element types, input shapes, opsets, node order) and, half of the time,
// byte-level ones on the serialized file (bit flips, truncation, splices).
// Every case must import or fail with a pto::Error; anything else (another
// exception type, a crash or a sanitizer report in the ASan + UBSan build of
// scripts/fuzz_sanitized.sh) is a failure. Import builds the program and
// folds constants with the interpreter; nothing is compiled, so the run is
// quick and the unsanitized libHalide is not involved.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "dsl/Error.h"
#include "frontends/onnx/Import.h"
#include "onnx/onnx.pb.h"

namespace {

using ::onnx::AttributeProto;
using ::onnx::GraphProto;
using ::onnx::ModelProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;

void value_info(::onnx::ValueInfoProto* v, const std::string& name,
                const std::vector<int64_t>& dims, int elem = TensorProto::FLOAT) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

void initializer(GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                 std::mt19937_64& rng, int type = TensorProto::FLOAT,
                 const std::vector<int64_t>& ints = {}) {
  TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  if (type == TensorProto::INT64) {
    for (int64_t v : ints) t->add_int64_data(v);
    return;
  }
  std::uniform_real_distribution<float> u(-1, 1);
  std::string raw(static_cast<size_t>(n) * 4, '\0');
  for (int64_t i = 0; i < n; ++i) {
    const float f = u(rng);
    std::memcpy(&raw[static_cast<size_t>(i) * 4], &f, 4);
  }
  t->set_raw_data(raw);
}

NodeProto* node(GraphProto* g, const std::string& op, const std::vector<std::string>& in,
                const std::vector<std::string>& out) {
  NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + std::to_string(g->node_size()));
  for (const auto& s : in) n->add_input(s);
  for (const auto& s : out) n->add_output(s);
  return n;
}
void attr_int(NodeProto* n, const std::string& name, int64_t v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INT);
  a->set_i(v);
}
void attr_ints(NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

ModelProto model(int opset) {
  ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  return m;
}

std::vector<ModelProto> seeds(std::mt19937_64& rng) {
  std::vector<ModelProto> r;
  {  // MLP
    ModelProto m = model(17);
    GraphProto* g = m.mutable_graph();
    value_info(g->add_input(), "x", {2, 8});
    initializer(g, "W", {8, 4}, rng);
    initializer(g, "B", {4}, rng);
    node(g, "MatMul", {"x", "W"}, {"h"});
    node(g, "Add", {"h", "B"}, {"a"});
    node(g, "Relu", {"a"}, {"r"});
    attr_int(node(g, "Softmax", {"r"}, {"y"}), "axis", -1);
    value_info(g->add_output(), "y", {2, 4});
    r.push_back(m);
  }
  {  // conv net
    ModelProto m = model(13);
    GraphProto* g = m.mutable_graph();
    value_info(g->add_input(), "x", {1, 3, 8, 8});
    initializer(g, "w", {4, 3, 3, 3}, rng);
    for (const char* s : {"scale", "bias", "mean", "var"}) initializer(g, s, {4}, rng);
    initializer(g, "fc", {5, 4}, rng);
    NodeProto* c = node(g, "Conv", {"x", "w"}, {"c"});
    attr_ints(c, "pads", {1, 1, 1, 1});
    attr_ints(c, "strides", {1, 1});
    attr_ints(c, "kernel_shape", {3, 3});
    node(g, "Abs", {"var"}, {"var_pos"});
    node(g, "BatchNormalization", {"c", "scale", "bias", "mean", "var_pos"}, {"bn"});
    node(g, "Relu", {"bn"}, {"r"});
    attr_ints(node(g, "MaxPool", {"r"}, {"p"}), "kernel_shape", {2, 2});
    node(g, "GlobalAveragePool", {"p"}, {"gap"});
    node(g, "Flatten", {"gap"}, {"f"});
    attr_int(node(g, "Gemm", {"f", "fc"}, {"y"}), "transB", 1);
    value_info(g->add_output(), "y", {1, 5});
    r.push_back(m);
  }
  {  // the shape chain exporters emit
    ModelProto m = model(13);
    GraphProto* g = m.mutable_graph();
    value_info(g->add_input(), "x", {2, 3, 4});
    initializer(g, "zero", {}, rng, TensorProto::INT64, {0});
    initializer(g, "minus1", {1}, rng, TensorProto::INT64, {-1});
    initializer(g, "axes0", {1}, rng, TensorProto::INT64, {0});
    node(g, "Shape", {"x"}, {"s"});
    node(g, "Gather", {"s", "zero"}, {"n"});
    node(g, "Unsqueeze", {"n", "axes0"}, {"n1"});
    attr_int(node(g, "Concat", {"n1", "minus1"}, {"shape"}), "axis", 0);
    node(g, "Reshape", {"x", "shape"}, {"flat"});
    attr_ints(node(g, "Transpose", {"flat"}, {"t"}), "perm", {1, 0});
    NodeProto* red = node(g, "ReduceMean", {"t"}, {"y"});
    attr_ints(red, "axes", {0});
    attr_int(red, "keepdims", 1);
    value_info(g->add_output(), "y", {1, 2});
    r.push_back(m);
  }
  {  // resize, top-k, slice, pad, where, cast
    ModelProto m = model(13);
    GraphProto* g = m.mutable_graph();
    value_info(g->add_input(), "x", {1, 2, 4, 4});
    TensorProto* sc = g->add_initializer();
    sc->set_name("scales");
    sc->set_data_type(TensorProto::FLOAT);
    sc->add_dims(4);
    for (float f : {1.f, 1.f, 2.f, 2.f}) sc->add_float_data(f);
    initializer(g, "k", {1}, rng, TensorProto::INT64, {3});
    initializer(g, "starts", {1}, rng, TensorProto::INT64, {1});
    initializer(g, "ends", {1}, rng, TensorProto::INT64, {3});
    initializer(g, "axes", {1}, rng, TensorProto::INT64, {3});
    initializer(g, "pads", {8}, rng, TensorProto::INT64, {0, 0, 1, 1, 0, 0, 1, 1});
    NodeProto* rs = node(g, "Resize", {"x", "", "scales"}, {"big"});
    AttributeProto* mode = rs->add_attribute();
    mode->set_name("mode");
    mode->set_type(AttributeProto::STRING);
    mode->set_s("linear");
    node(g, "TopK", {"big", "k"}, {"vals", "idx"});
    node(g, "Slice", {"vals", "starts", "ends", "axes"}, {"sl"});
    node(g, "Pad", {"sl", "pads"}, {"pd"});
    node(g, "Greater", {"pd", "pd"}, {"gt"});
    node(g, "Where", {"gt", "pd", "pd"}, {"w"});
    attr_int(node(g, "Cast", {"idx"}, {"y2"}), "to", TensorProto::FLOAT);
    node(g, "Neg", {"w"}, {"y"});
    value_info(g->add_output(), "y", {});
    value_info(g->add_output(), "y2", {});
    r.push_back(m);
  }
  {  // LSTM
    ModelProto m = model(14);
    GraphProto* g = m.mutable_graph();
    value_info(g->add_input(), "x", {3, 1, 2});
    initializer(g, "W", {1, 16, 2}, rng);
    initializer(g, "R", {1, 16, 4}, rng);
    initializer(g, "B", {1, 32}, rng);
    attr_int(node(g, "LSTM", {"x", "W", "R", "B"}, {"y", "yh"}), "hidden_size", 4);
    value_info(g->add_output(), "y", {});
    value_info(g->add_output(), "yh", {});
    r.push_back(m);
  }
  return r;
}

const std::vector<std::string> kOps = {"Add",      "Relu",      "Conv",      "Reshape",
                                       "Gather",   "Concat",    "Slice",     "TopK",
                                       "Resize",   "LSTM",      "MatMul",    "Gemm",
                                       "Softmax",  "Transpose", "Pad",       "ConstantOfShape",
                                       "Expand",   "Tile",      "ScatterND", "GatherND",
                                       "NoSuchOp", "Split",     "Squeeze",   "Unsqueeze",
                                       "Range",    "OneHot",    "Einsum",    "Cast"};

int64_t wild(std::mt19937_64& rng) {
  static const int64_t kValues[] = {0,
                                    1,
                                    -1,
                                    2,
                                    3,
                                    7,
                                    -2,
                                    64,
                                    1 << 20,
                                    int64_t{1} << 31,
                                    int64_t{1} << 40,
                                    int64_t{1} << 62,
                                    -(int64_t{1} << 62),
                                    INT64_MAX,
                                    INT64_MIN};
  return kValues[rng() % (sizeof(kValues) / sizeof(kValues[0]))];
}

void mutate(ModelProto& m, std::mt19937_64& rng) {
  GraphProto* g = m.mutable_graph();
  const int kinds = 14;
  const int steps = 1 + static_cast<int>(rng() % 3);
  for (int s = 0; s < steps; ++s) {
    const int nn = g->node_size();
    NodeProto* n =
        nn ? g->mutable_node(static_cast<int>(rng() % static_cast<uint64_t>(nn))) : nullptr;
    switch (rng() % kinds) {
      case 0:  // another op type
        if (n) n->set_op_type(kOps[rng() % kOps.size()]);
        break;
      case 1:  // an input rewired to any value name (later: out of order; own output: a cycle)
        if (n && n->input_size()) {
          const NodeProto& other = g->node(static_cast<int>(rng() % static_cast<uint64_t>(nn)));
          const std::string to = other.output_size() ? other.output(0) : "";
          n->set_input(static_cast<int>(rng() % static_cast<uint64_t>(n->input_size())),
                       rng() % 4 ? to : "nowhere");
        }
        break;
      case 2:  // an input dropped or added
        if (n && n->input_size() && rng() % 2)
          n->mutable_input()->RemoveLast();
        else if (n)
          n->add_input(n->input_size() ? n->input(0) : "x");
        break;
      case 3:  // an attribute of an unexpected type, value or name
        if (n) {
          AttributeProto* a = n->attribute_size() && rng() % 2
                                  ? n->mutable_attribute(static_cast<int>(
                                        rng() % static_cast<uint64_t>(n->attribute_size())))
                                  : n->add_attribute();
          static const char* kNames[] = {"axis",    "axes",     "perm", "pads", "kernel_shape",
                                         "strides", "k",        "to",   "mode", "hidden_size",
                                         "transB",  "keepdims", "typo"};
          if (a->name().empty() || rng() % 4 == 0) a->set_name(kNames[rng() % 13]);
          switch (rng() % 5) {
            case 0:
              a->set_type(AttributeProto::INT);
              a->set_i(wild(rng));
              break;
            case 1:
              a->set_type(AttributeProto::INTS);
              a->clear_ints();
              for (uint64_t i = rng() % 9; i > 0; --i) a->add_ints(wild(rng));
              break;
            case 2:
              a->set_type(AttributeProto::FLOAT);
              a->set_f(rng() % 2 ? NAN : -1e30f);
              break;
            case 3:
              a->set_type(AttributeProto::STRING);
              a->set_s(rng() % 2 ? "" : "nearest");
              break;
            default:
              a->set_type(static_cast<AttributeProto::AttributeType>(rng() % 16));
              break;
          }
        }
        break;
      case 4:
      case 5:  // an initializer's dims, type or data
        if (g->initializer_size()) {
          TensorProto* t = g->mutable_initializer(
              static_cast<int>(rng() % static_cast<uint64_t>(g->initializer_size())));
          switch (rng() % 6) {
            case 0:
              if (t->dims_size())
                t->set_dims(static_cast<int>(rng() % static_cast<uint64_t>(t->dims_size())),
                            wild(rng));
              break;
            case 1:
              t->add_dims(wild(rng));
              break;
            case 2:
              if (t->has_raw_data())
                t->mutable_raw_data()->resize(rng() % (t->raw_data().size() + 1));
              break;
            case 3:
              t->set_data_type(static_cast<int>(rng() % 30));
              break;
            case 4:
              t->clear_raw_data();
              for (uint64_t i = rng() % 5; i > 0; --i) t->add_float_data(1.5f);
              break;
            default:
              t->set_name(g->node_size() ? g->node(0).output(0) : "x");
              break;
          }
        }
        break;
      case 6:  // a graph input's shape or type
        if (g->input_size()) {
          auto* tt = g->mutable_input(0)->mutable_type()->mutable_tensor_type();
          if (rng() % 3 == 0)
            tt->set_elem_type(static_cast<int>(rng() % 30));
          else if (tt->shape().dim_size()) {
            auto* d = tt->mutable_shape()->mutable_dim(
                static_cast<int>(rng() % static_cast<uint64_t>(tt->shape().dim_size())));
            if (rng() % 2)
              d->set_dim_value(wild(rng));
            else
              d->set_dim_param("batch");
          } else {
            tt->mutable_shape()->add_dim()->set_dim_value(wild(rng));
          }
        }
        break;
      case 7:  // a node deleted
        if (nn) {
          g->mutable_node()->SwapElements(static_cast<int>(rng() % static_cast<uint64_t>(nn)),
                                          nn - 1);
          g->mutable_node()->RemoveLast();
        }
        break;
      case 8:  // two nodes swapped (out of order)
        if (nn > 1)
          g->mutable_node()->SwapElements(static_cast<int>(rng() % static_cast<uint64_t>(nn)),
                                          static_cast<int>(rng() % static_cast<uint64_t>(nn)));
        break;
      case 9:  // a node duplicated (a value defined twice)
        if (n) *g->add_node() = *n;
        break;
      case 10:  // the opset
        m.mutable_opset_import(0)->set_version(static_cast<int64_t>(rng() % 30));
        if (rng() % 8 == 0) m.mutable_opset_import(0)->set_domain("ai.onnx.ml");
        break;
      case 11:  // an output renamed or removed
        if (n && n->output_size())
          n->set_output(0, rng() % 2 ? "" : n->input_size() ? n->input(0) : "y");
        break;
      case 12:  // a Constant node with an odd tensor
      {
        NodeProto* c =
            node(g, "Constant", {},
                 {g->node_size() && g->node(0).input_size() ? g->node(0).input(0) : "k"});
        AttributeProto* a = c->add_attribute();
        a->set_name("value");
        a->set_type(AttributeProto::TENSOR);
        TensorProto* t = a->mutable_t();
        t->set_data_type(static_cast<int>(rng() % 17));
        for (uint64_t i = rng() % 3; i > 0; --i) t->add_dims(wild(rng));
        for (uint64_t i = rng() % 4; i > 0; --i) t->add_int64_data(wild(rng));
      } break;
      default:  // an output's declared type
        if (g->output_size())
          g->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
              static_cast<int>(rng() % 30));
        break;
    }
  }
}

void mutate_bytes(std::string& b, std::mt19937_64& rng) {
  if (b.empty()) return;
  switch (rng() % 4) {
    case 0:
      for (uint64_t i = 1 + rng() % 8; i > 0; --i)
        b[rng() % b.size()] ^= static_cast<char>(1u << (rng() % 8));
      break;
    case 1:
      b.resize(rng() % b.size());
      break;
    case 2: {  // a chunk duplicated somewhere
      const size_t at = rng() % b.size(), len = rng() % std::min<size_t>(64, b.size() - at) + 1;
      b.insert(rng() % b.size(), b.substr(at, len));
      break;
    }
    default:
      for (uint64_t i = 1 + rng() % 4; i > 0; --i)
        b[rng() % b.size()] = static_cast<char>(rng() % 2 ? 0xff : 0x80);
      break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int cases = argc > 1 ? std::atoi(argv[1]) : 10000;
  const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  std::mt19937_64 rng(seed);
  const std::vector<ModelProto> base = seeds(rng);
  pto::onnx::ImportOptions opt;
  opt.max_tensor_elements = int64_t{1} << 22;  // a hostile file may not make import allocate more
  opt.max_nodes = 4096;
  opt.max_model_bytes = uint64_t{1} << 26;
  int imported = 0, rejected = 0, foreign = 0;
  const bool trace = argc > 3 && std::getenv("PTO_FUZZ_TRACE");
  int slowest = -1;
  double slowest_ms = 0;
  std::string first_foreign;
  // The seeds themselves import.
  for (const ModelProto& m : base) {
    try {
      pto::onnx::import_onnx(m.SerializeAsString(), opt);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fuzz_onnx_import: a seed model does not import: %s\n", e.what());
      return 2;
    }
  }
  for (int c = 0; c < cases; ++c) {
    ModelProto m = base[rng() % base.size()];
    mutate(m, rng);
    std::string bytes = m.SerializeAsString();
    if (rng() % 2) mutate_bytes(bytes, rng);
    if (trace)
      std::ofstream(argv[3], std::ios::binary) << bytes;  // PTO_FUZZ_TRACE: every case, for a crash
    const auto t0 = std::chrono::steady_clock::now();
    try {
      pto::onnx::import_onnx(bytes, opt);
      ++imported;
    } catch (const pto::Error&) {
      ++rejected;
    } catch (const std::exception& e) {
      if (!foreign++) {
        first_foreign = "case " + std::to_string(c) + ": " + e.what();
        if (argc > 3) std::ofstream(argv[3], std::ios::binary) << bytes;
      }
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (ms > slowest_ms) slowest_ms = ms, slowest = c;
  }
  std::printf(
      "fuzz_onnx_import: %d cases (seed %llu): %d imported, %d rejected with pto::Error, %d other "
      "failures; "
      "slowest case %d: %.1f ms\n",
      cases, static_cast<unsigned long long>(seed), imported, rejected, foreign, slowest,
      slowest_ms);
  if (foreign) std::printf("first: %s\n", first_foreign.c_str());
  return foreign == 0 && imported + rejected == cases && imported > 0 && rejected > 0 ? 0 : 1;
}
