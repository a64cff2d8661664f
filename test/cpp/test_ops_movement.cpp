// Data movement operators against float64 index-mapping references, every
// operator table row built and evaluated on small inputs, attribute checks
// against the rows' schemas, and bad-input errors naming op, tensor and value.
#include <catch2/catch.hpp>
#include <set>

#include "OpsTestUtil.h"

using namespace pto;
using namespace pto::test;
using json = nlohmann::json;
using Catch::Matchers::Contains;

namespace {
const Dim n = Dim::symbol("n");
using V = std::vector<HostTensor>;
// Output element i reads input element f(i): exact (data movement copies values).
Ref moved(Idx shape, std::function<Idx(const Idx&)> f) {
  return [=](const V& v) { return gen(shape, [&](const Idx& i) { return at(v[0], f(i)); }); };
}
}  // namespace

TEST_CASE("data movement operators match float64 index maps", "[ops][movement]") {
  std::vector<Case> c = {
      {"identity", {}, {{{n, 3}}}, ew([](const std::vector<double>& v) { return v[0]; }), 0, 0},
      {"transpose",
       {{"perm", {2, 0, 1}}},
       {{{2, 3, 5}}},
       moved({5, 2, 3},
             [](const Idx& i) {
               return Idx{i[1], i[2], i[0]};
             }),
       0,
       0},
      {"reshape",
       {{"shape", {3, -1, 2}}},
       {{{2, 3, 5}}},
       moved({3, 5, 2},
             [](const Idx& i) {
               const int64_t f = (i[0] * 5 + i[1]) * 2 + i[2];
               return Idx{f / 15, f / 5 % 3, f % 5};
             }),
       0,
       0},
      {"flatten",
       {{"axis", 1}},
       {{{n, 3, 2}}},
       [](const V& v) {
         HostTensor r = v[0];
         r.shape = {r.shape[0], 6};
         return r;
       },
       0,
       0},
      {"squeeze",
       {{"axes", {1}}},
       {{{3, 1, 4}}},
       moved({3, 4},
             [](const Idx& i) {
               return Idx{i[0], 0, i[1]};
             }),
       0,
       0},
      {"unsqueeze",
       {{"axes", {0, 3}}},
       {{{3, 4}}},
       moved({1, 3, 4, 1},
             [](const Idx& i) {
               return Idx{i[1], i[2]};
             }),
       0,
       0},
      {"broadcast_to",
       {{"shape", {2, 3, 4}}},
       {{{3, 1}}},
       moved({2, 3, 4},
             [](const Idx& i) {
               return Idx{i[1], 0};
             }),
       0,
       0},
      {"slice",
       {{"starts", {1, -1}}, {"ends", {7, -100}}, {"axes", {0, 1}}, {"steps", {2, -2}}},
       {{{7, 5}}},
       moved({3, 3},
             [](const Idx& i) {
               return Idx{1 + 2 * i[0], 4 - 2 * i[1]};
             }),
       0,
       0},
      {"concat",
       {{"axis", 1}},
       {{{2, 3}}, {{2, 1}}, {{2, 2}}},
       [](const V& v) {
         return gen({2, 6}, [&](const Idx& i) {
           return i[1] < 3 ? at(v[0], i) : i[1] < 4 ? at(v[1], {i[0], 0}) : at(v[2], {i[0], i[1] - 4});
         });
       },
       0,
       0},
      {"stack",
       {{"axis", 1}},
       {{{n, 2}}, {{n, 2}}},
       [](const V& v) {
         return gen({v[0].shape[0], 2, 2}, [&](const Idx& i) { return at(v[i[1]], {i[0], i[2]}); });
       },
       0,
       0},
      {"split",
       {{"axis", 0}, {"sizes", {2, 5}}, {"index", 1}},
       {{{7, 3}}},
       moved({5, 3},
             [](const Idx& i) {
               return Idx{i[0] + 2, i[1]};
             }),
       0,
       0},
      {"pad",
       {{"pads", {1, 0, 2, 3}}, {"value", 0.5}},
       {{{3, 4}}},
       [](const V& v) {
         return gen({6, 7}, [&](const Idx& i) { return i[0] >= 1 && i[0] < 4 && i[1] < 4 ? at(v[0], {i[0] - 1, i[1]}) : 0.5; });
       },
       0,
       0},
      {"pad",
       {{"pads", {2, 3}}, {"mode", "reflect"}},
       {{{5}}},
       moved({10},
             [](const Idx& i) {
               int64_t j = i[0] - 2;
               j = j < 0 ? -j : j > 4 ? 8 - j : j;
               return Idx{j};
             }),
       0,
       0},
      {"pad",
       {{"pads", {0, 1, 0, 2}}, {"mode", "edge"}},
       {{{n, 3}}},
       [](const V& v) {
         return gen({v[0].shape[0], 6}, [&](const Idx& i) {
           return at(v[0], {i[0], std::clamp<int64_t>(i[1] - 1, 0, 2)});
         });
       },
       0,
       0},
      {"gather",
       {{"axis", 1}},
       {{{3, 5}}, {{2, 2}, DType::I32, -5, 4, true}},
       [](const V& v) {
         return gen({3, 2, 2}, [&](const Idx& i) { int64_t k = static_cast<int64_t>(at(v[1], {i[1], i[2]})); return at(v[0], {i[0], k < 0 ? k + 5 : k}); });
       },
       0,
       0},
      {"gather_elements",
       {{"axis", 0}},
       {{{4, 3}}, {{2, 3}, DType::I64, 0, 3, true}},
       [](const V& v) {
         return gen({2, 3}, [&](const Idx& i) {
           return at(v[0], {static_cast<int64_t>(at(v[1], i)), i[1]});
         });
       },
       0,
       0},
      {"scatter",
       {{"axis", 1}},
       {{{3, 5}}, {{3, 2}, DType::I32, 0, 4, true}, {{3, 2}}},
       [](const V& v) {
         HostTensor r = v[0];
         for_each(v[1].shape, [&](const Idx& i) { at(r, {i[0], static_cast<int64_t>(at(v[1], i))}) = at(v[2], i); });
         return r;
       },
       0,
       0},
      // With a reduction: duplicate targets all combine (indices 0..4 in 3 x 4 draws repeat).
      {"scatter",
       {{"axis", 1}, {"reduction", "add"}},
       {{{3, 5}}, {{3, 4}, DType::I32, 0, 4, true}, {{3, 4}}},
       [](const V& v) {
         HostTensor r = v[0];
         for_each(v[1].shape, [&](const Idx& i) {
           at(r, {i[0], static_cast<int64_t>(at(v[1], i))}) += at(v[2], i);
         });
         return r;
       },
       1e-6,
       1e-6},
      {"scatter",
       {{"axis", 0}, {"reduction", "max"}},
       {{{4, 2}}, {{3, 2}, DType::I64, -4, 3, true}, {{3, 2}}},
       [](const V& v) {
         HostTensor r = v[0];
         for_each(v[1].shape, [&](const Idx& i) {
           const int64_t k = static_cast<int64_t>(at(v[1], i));
           double& d = at(r, {k < 0 ? k + 4 : k, i[1]});
           d = std::max(d, at(v[2], i));
         });
         return r;
       },
       0,
       0},
      {"embedding",
       {},
       {{{6, 3}}, {{n}, DType::I32, 0, 5, true}},
       [](const V& v) {
         return gen({v[1].shape[0], 3}, [&](const Idx& i) {
           return at(v[0], {static_cast<int64_t>(v[1].data[i[0]]), i[1]});
         });
       },
       0,
       0},
      {"tile",
       {{"repeats", {2, 1, 3}}},
       {{{2, 3}}},
       moved({2, 2, 9},
             [](const Idx& i) {
               return Idx{i[1], i[2] % 3};
             }),
       0,
       0},
      {"repeat",
       {{"repeats", 3}, {"axis", 0}},
       {{{2, 3}}},
       moved({6, 3},
             [](const Idx& i) {
               return Idx{i[0] / 3, i[1]};
             }),
       0,
       0},
      {"flip",
       {{"axes", {1}}},
       {{{2, 5}}},
       moved({2, 5},
             [](const Idx& i) {
               return Idx{i[0], 4 - i[1]};
             }),
       0,
       0},
      {"roll",
       {{"shifts", {-2}}, {"axes", {1}}},
       {{{2, 5}}},
       moved({2, 5},
             [](const Idx& i) {
               return Idx{i[0], (i[1] + 2) % 5};
             }),
       0,
       0},
      {"one_hot",
       {{"depth", 4}, {"axis", 0}, {"on_value", 2.0}, {"off_value", -1.0}},
       {{{n}, DType::I32, -4, 3, true}},
       [](const V& v) {
         return gen({4, v[0].shape[0]}, [&](const Idx& i) { int64_t k = static_cast<int64_t>(v[0].data[i[1]]); return (k < 0 ? k + 4 : k) == i[0] ? 2.0 : -1.0; });
       },
       0,
       0},
      {"tril",
       {{"k", 0}},
       {{{2, 3, 4}}},
       [](const V& v) {
         return gen({2, 3, 4}, [&](const Idx& i) { return i[2] <= i[1] ? at(v[0], i) : 0.0; });
       },
       0,
       0},
      {"triu",
       {{"k", 1}},
       {{{3, 4}}},
       [](const V& v) {
         return gen({3, 4}, [&](const Idx& i) { return i[1] - i[0] >= 1 ? at(v[0], i) : 0.0; });
       },
       0,
       0},
  };
  check_cases("movement", c);
}

TEST_CASE("every operator table row has a schema and a builder that runs on small valid inputs", "[ops][registry]") {
  // Small valid inputs per row: the attributes each row requires and input
  // shapes that fit them; every other row takes float tensors of shape [2, 3, 4, 4].
  struct Call {
    std::vector<In> ins;
    json attrs = json::object();
  };
  const In f4{{2, 3, 4, 4}}, idx{{2}, DType::I32, 0, 1, true};
  const std::map<std::string, Call> special = {
      {"batch_norm", {{f4, {{3}}, {{3}}, {{3}}, {{3}, DType::F32, 0.5, 1}}}},
      {"broadcast_to", {{{{3, 1}}}, {{"shape", {2, 3, 4}}}}},
      {"bitwise_and", {{{{2, 3}, DType::I32, -9, 9, true}, {{3}, DType::I32, -9, 9, true}}}},
      {"bitwise_or", {{{{2, 3}, DType::I32, -9, 9, true}, {{3}, DType::I32, -9, 9, true}}}},
      {"bitwise_xor", {{{{2, 3}, DType::I32, -9, 9, true}, {{3}, DType::I32, -9, 9, true}}}},
      {"bitwise_not", {{{{2, 3}, DType::I32, -9, 9, true}}}},
      {"left_shift", {{{{2, 3}, DType::I32, -9, 9, true}, {{3}, DType::I32, 0, 3, true}}}},
      {"right_shift", {{{{2, 3}, DType::I32, -9, 9, true}, {{3}, DType::I32, 0, 3, true}}}},
      {"cast", {{f4}, {{"dtype", "f16"}}}},
      {"conv1d", {{{{1, 2, 5}}, {{3, 2, 2}}}}},
      {"conv2d", {{f4, {{2, 3, 3, 3}}}}},
      {"conv2d_nhwc", {{f4, {{3, 3, 4, 5}}}}},
      {"conv3d", {{{{1, 2, 3, 3, 3}}, {{2, 2, 2, 2, 2}}}}},
      {"conv_transpose2d", {{f4, {{3, 2, 2, 2}}}}},
      {"einsum", {{{{2, 3}}, {{3, 4}}}, {{"equation", "ij,jk->ik"}}}},
      {"embedding", {{{{5, 3}}, idx}}},
      {"gather", {{f4, idx}}},
      {"gather_elements", {{f4, {{2, 3, 4, 4}, DType::I32, 0, 1, true}}}},
      {"group_norm", {{f4}, {{"groups", 3}}}},
      {"linear", {{{{2, 3}}, {{4, 3}}, {{4}}}}},
      {"matmul", {{{{2, 3}}, {{3, 4}}}}},
      {"max_pool1d", {{{{2, 3, 4}}}, {{"kernel", {2}}}}},
      {"max_pool2d", {{f4}, {{"kernel", {2, 2}}}}},
      {"max_pool3d", {{{{1, 2, 4, 4, 4}}}, {{"kernel", {2, 2, 2}}}}},
      {"avg_pool1d", {{{{2, 3, 4}}}, {{"kernel", {2}}}}},
      {"avg_pool2d", {{f4}, {{"kernel", {2, 2}}}}},
      {"avg_pool3d", {{{{1, 2, 4, 4, 4}}}, {{"kernel", {2, 2, 2}}}}},
      {"one_hot", {{idx}, {{"depth", 3}}}},
      {"pad", {{f4}, {{"pads", {0, 0, 1, 1, 0, 0, 1, 1}}}}},
      {"repeat", {{f4}, {{"repeats", 2}}}},
      {"reshape", {{f4}, {{"shape", {6, -1}}}}},
      {"roll", {{f4}, {{"shifts", {1}}, {"axes", {2}}}}},
      {"scaled_dot_product_attention", {{{{2, 3, 4}}, {{2, 5, 4}}, {{2, 5, 4}}}}},
      {"scatter", {{f4, {{2, 3, 4, 4}, DType::I32, 0, 1, true}, f4}}},
      {"slice", {{f4}, {{"starts", {1}}, {"ends", {3}}}}},
      {"split", {{f4}, {{"num", 2}}}},
      {"tile", {{f4}, {{"repeats", {2}}}}},
      {"unsqueeze", {{f4}, {{"axes", {0}}}}},
      {"where", {{{{2, 3}, DType::Bool, 0, 1, true}, {{2, 3}}, {{1, 3}}}}},
      {"nll_loss", {{f4, {{2, 4, 4}, DType::I64, 0, 2, true}}}},
      {"cross_entropy", {{f4, {{2, 4, 4}, DType::I64, 0, 2, true}}}},
      {"topk", {{f4}, {{"k", 2}}}},
      {"topk_indices", {{f4}, {{"k", 2}}}},
      {"gather_nd", {{f4, {{2, 2}, DType::I32, 0, 1, true}}}},
      {"scatter_nd", {{f4, {{2, 1}, DType::I32, 0, 1, true}, {{2, 3, 4, 4}}}}},
      {"depth_to_space", {{{{1, 4, 2, 2}}}, {{"block", 2}}}},
      {"space_to_depth", {{f4}, {{"block", 2}}}},
      {"reverse_sequence", {{f4, {{3}, DType::I32, 0, 2, true}}}},
      {"eye_like", {{{{3, 4}}}}},
      {"resize", {{f4}, {{"sizes", {2, 3, 8, 2}}, {"mode", "linear"}}}},
      {"quantize_linear", {{f4, {{}, DType::F32, 0.1, 0.2}}}},
      {"dequantize_linear", {{{{2, 3}, DType::U8, 0, 255, true}, {{}, DType::F32, 0.1, 0.2}}}},
      {"lrn", {{f4}, {{"size", 3}}}},
      {"lp_pool1d", {{{{2, 3, 4}}}, {{"kernel", {2}}}}},
      {"lp_pool2d", {{f4}, {{"kernel", {2, 2}}}}},
      {"lp_pool3d", {{{{1, 2, 4, 4, 4}}}, {{"kernel", {2, 2, 2}}}}},
      {"gemm", {{{{2, 3}}, {{3, 4}}, {{4}}}}},
      {"rnn", {{{{3, 2, 4}}, {{1, 5, 4}}, {{1, 5, 5}}}}},
      {"gru", {{{{3, 2, 4}}, {{1, 15, 4}}, {{1, 15, 5}}}}},
      {"lstm", {{{{3, 2, 4}}, {{1, 20, 4}}, {{1, 20, 5}}}}},
      {"rotary_embedding", {{f4, {{2, 4, 2}}, {{2, 4, 2}}}}},
  };
  const auto& reg = ops::registry();
  CHECK(reg.size() >= 100);
  for (size_t r = 0; r < reg.size(); ++r) {
    const ops::OpInfo& o = reg[r];
    INFO("operator '" << o.name << "'");
    if (r) CHECK(reg[r - 1].name < o.name);  // sorted, no repeats
    CHECK(!o.summary.empty());
    REQUIRE(o.build);
    REQUIRE(o.min_inputs >= 1);
    REQUIRE(o.max_inputs >= o.min_inputs);
    for (const ops::AttrSpec& a : o.attrs) CHECK((a.required ? a.def.is_null() : true));
    const auto it = special.find(o.name);
    const Call c = it != special.end() ? it->second : Call{std::vector<In>(o.min_inputs, f4)};
    // Every input of a row without special inputs, and every required attribute, is given above.
    for (const ops::AttrSpec& a : o.attrs)
      if (a.required) CHECK(c.attrs.contains(a.name));
    Program p(o.name);
    std::vector<Tensor> ts;
    for (size_t i = 0; i < c.ins.size(); ++i) ts.push_back(p.input("in" + std::to_string(i), c.ins[i].shape, c.ins[i].dtype));
    const Tensor y = ops::call(o.name, ts, c.attrs, "out");
    p.output(y);
    // Its stages evaluate: the output has as many finite-or-bool values as its shape says.
    std::mt19937 rng(3);
    std::map<std::string, HostTensor> in;
    for (size_t i = 0; i < c.ins.size(); ++i) {
      std::vector<int64_t> shape;
      for (const Dim& d : c.ins[i].shape) shape.push_back(d.value);
      HostTensor h = random_tensor(shape, rng, c.ins[i].lo, c.ins[i].hi);
      if (c.ins[i].integer)
        for (double& v : h.data) v = std::round(v);
      in["in" + std::to_string(i)] = h;
    }
    const HostTensor out = interpret(p, in).at("out");
    int64_t n = 1;
    for (const Dim& d : y.shape()) n *= d.value;
    CHECK(static_cast<int64_t>(out.data.size()) == n);
  }
}

TEST_CASE("call() checks attributes against the row's schema", "[ops][registry][errors]") {
  Program p("attrs");
  const Tensor x = p.input("x", {4, 3});
  // Unknown names list the valid ones in schema order, or say there are none.
  CHECK_THROWS_WITH(ops::call("reduce_sum", {x}, {{"axis", 0}}), Contains("reduce_sum: unknown attribute 'axis'; valid: axes, keepdims"));
  CHECK_THROWS_WITH(ops::call("relu", {x}, {{"alpha", 0.1}}), Contains("relu: unknown attribute 'alpha'; valid: none"));
  // Wrong types name the attribute, the type wanted and the value given.
  CHECK_THROWS_AS(ops::call("softmax", {x}, {{"axis", "last"}}), DefinitionError);
  CHECK_THROWS_WITH(ops::call("softmax", {x}, {{"axis", "last"}}), Contains("softmax: attribute 'axis' must be an integer, got \"last\""));
  CHECK_THROWS_WITH(ops::call("softmax", {x}, {{"axis", 1.5}}), Contains("must be an integer, got 1.5"));
  CHECK_THROWS_WITH(ops::call("reduce_max", {x}, {{"keepdims", 1}}), Contains("reduce_max: attribute 'keepdims' must be true or false, got 1"));
  CHECK_THROWS_WITH(ops::call("transpose", {x}, {{"perm", {1, "0"}}}), Contains("transpose: attribute 'perm' must be a list of integers"));
  CHECK_THROWS_WITH(ops::call("leaky_relu", {x}, {{"alpha", "big"}}), Contains("leaky_relu: attribute 'alpha' must be a number"));
  CHECK_THROWS_WITH(ops::call("conv2d_nhwc", {p.input("i", {1, 4, 4, 3}), p.input("w", {1, 1, 3, 2})}, {{"stride", {1, 1, 1}}}),
                    Contains("conv2d_nhwc: attribute 'stride' needs 2 values, got 3"));
  CHECK_THROWS_AS(ops::call("cast", {x}, {{"dtype", "f128"}}), DTypeError);
  CHECK_THROWS_WITH(ops::call("cast", {x}, {{"dtype", "f128"}}), Contains("cast: attribute 'dtype': unknown dtype 'f128'"));
  // Required attributes; attributes must be an object; null is "not given".
  CHECK_THROWS_WITH(ops::call("reshape", {x}), Contains("reshape: attribute 'shape' (a list of integers) is required"));
  CHECK_THROWS_WITH(ops::call("relu", {x}, json::array({1})), Contains("relu: attributes must be a JSON object"));
  CHECK(ops::call("scaled_dot_product_attention", {x, x, x}, {{"scale", nullptr}}).shape() == x.shape());
  // Defaults come from the schema: softmax's axis is -1, reduce_sum's axes all.
  CHECK(ops::call("reduce_sum", {x}).shape().empty());
  CHECK(ops::op_info("softmax").attrs.at(0).def == -1);
}

TEST_CASE("operator errors are typed and name the operator, tensor and value", "[ops][errors]") {
  Program p("bad");
  const Tensor x = p.input("x", {4, 3});
  const Tensor y = p.input("y", {5, 3});
  const Tensor s = p.input("s", {n, 3});
  const Tensor t = p.input("t", {Dim::symbol("m"), 3});
  const Tensor i = p.input("idx", {2}, DType::I32);
  const Tensor img = p.input("img", {1, 3, 5, 5});
  // shape mismatch / broadcasting / conflicting symbolic sizes
  CHECK_THROWS_AS(ops::add(x, y), ShapeError);
  CHECK_THROWS_WITH(ops::add(x, y), Contains("add: shapes [4, 3] and [5, 3] do not broadcast"));
  CHECK_THROWS_WITH(ops::call("mul", {s, t}), Contains("mul") && Contains("n vs m"));
  CHECK_THROWS_WITH(ops::concat({x, p.input("z", {4, 2})}, 0), Contains("concat") && Contains("differ in dim 1"));
  // rank
  CHECK_THROWS_WITH(ops::call("conv2d", {x, x}), Contains("conv2d: input 'x' must have rank 4"));
  CHECK_THROWS_WITH(ops::call("layer_norm", {x, y}), Contains("layer_norm: gamma 'y' must have shape [3]"));
  // dtype
  CHECK_THROWS_AS(ops::call("gather", {x, x}), DTypeError);
  CHECK_THROWS_WITH(ops::call("gather", {x, x}), Contains("gather: indices 'x' must be an integer type, is f32"));
  CHECK_THROWS_WITH(ops::call("softmax", {i}), Contains("softmax: input 'idx' must be floating point, is i32"));
  CHECK_THROWS_WITH(ops::call("cast", {x}, {{"dtype", "f128"}}), Contains("unknown dtype 'f128'"));
  // bad axes
  CHECK_THROWS_WITH(ops::call("reduce_sum", {x}, {{"axes", {2}}}), Contains("reduce_sum: axis 2 is out of range for rank 2"));
  CHECK_THROWS_WITH(ops::call("reduce_max", {x}, {{"axes", {0, -2}}}), Contains("axis -2 is given twice"));
  CHECK_THROWS_WITH(ops::call("transpose", {x}, {{"perm", {0, 0}}}), Contains("transpose: perm repeats axis 0"));
  CHECK_THROWS_WITH(ops::call("squeeze", {x}, {{"axes", {0}}}), Contains("squeeze: axis 0 of 'x' [4, 3] has size 4, not 1"));
  // zero / negative sizes
  CHECK_THROWS_WITH(ops::call("reshape", {x}, {{"shape", {-3, 4}}}), Contains("reshape: size -3 at position 0 is invalid"));
  CHECK_THROWS_WITH(ops::call("reshape", {x}, {{"shape", {5, 3}}}), Contains("has 12 elements") && Contains("15"));
  CHECK_THROWS_WITH(ops::call("slice", {x}, {{"starts", {3}}, {"ends", {1}}}), Contains("slice: axis 0 selects no elements"));
  CHECK_THROWS_WITH(ops::call("tile", {x}, {{"repeats", {0, 1}}}), Contains("tile: repeat 0 on axis 0 must be >= 1"));
  CHECK_THROWS_WITH(ops::call("max_pool2d", {img}, {{"kernel", {0, 2}}}), Contains("max_pool2d: kernel 0 must be >= 1"));
  CHECK_THROWS_WITH(
      ops::call(
          "avg_pool2d", {img},
          {{"kernel", {2, 2}}, {"padding", {0, 1}}, {"padding_end", {0, 3}}, {"dilation", {1, 2}}}),
      Contains(
          "avg_pool2d: padding 1 / 3 in spatial dim 1 must be smaller than the window's span 3"));
  CHECK_THROWS_WITH(ops::call("conv2d", {img, p.input("w", {2, 3, 3, 3})}, {{"stride", {0, 1}}}), Contains("conv2d: stride 0 must be >= 1"));
  CHECK_THROWS_WITH(ops::call("one_hot", {i}, {{"depth", 0}}), Contains("one_hot: depth 0 must be >= 1"));
  // symbolic dims where a static size is needed
  CHECK_THROWS_WITH(ops::call("flip", {s}, {{"axes", {0}}}), Contains("flip: dim 0 of 's' must be static, is symbolic 'n'"));
  CHECK_THROWS_WITH(ops::call("conv1d", {p.input("u", {1, 2, n}), p.input("k", {1, 2, 1})}), Contains("must be static"));
  // einsum and attributes
  CHECK_THROWS_WITH(ops::call("einsum", {x, y}, {{"equation", "ij,jk->ik"}}), Contains("einsum: subscript 'j' is 3 in one operand and 5"));
  CHECK_THROWS_WITH(ops::call("leaky_relu", {x}, {{"alpah", 0.1}}), Contains("leaky_relu: unknown attribute 'alpah'; valid: alpha"));
  CHECK_THROWS_WITH(ops::call("softmax", {x}, {{"axes", 1}}), Contains("softmax: unknown attribute 'axes'; valid: axis"));
  CHECK_THROWS_WITH(ops::call("no_such_op", {x}), Contains("unknown operator 'no_such_op'"));
  CHECK_THROWS_WITH(ops::call("add", {x}), Contains("add: takes 2 inputs, got 1"));
  CHECK_THROWS_WITH(ops::call("pad", {x}, {{"pads", {1, 1, 1, 1}}, {"mode", "wrap"}}), Contains("pad: mode 'wrap' is not one of"));
}
