// Data movement operators against float64 index-mapping references, the
// registry / call() table agreement, JSON round trips of every registered
// operator (via the family tables), and bad-input errors naming op, tensor and value.
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
      {"transpose", {{"perm", {2, 0, 1}}}, {{{2, 3, 5}}}, moved({5, 2, 3}, [](const Idx& i) { return Idx{i[1], i[2], i[0]}; }), 0, 0},
      {"reshape", {{"shape", {3, -1, 2}}}, {{{2, 3, 5}}},
       moved({3, 5, 2}, [](const Idx& i) { const int64_t f = (i[0] * 5 + i[1]) * 2 + i[2]; return Idx{f / 15, f / 5 % 3, f % 5}; }), 0, 0},
      {"flatten", {{"axis", 1}}, {{{n, 3, 2}}}, [](const V& v) { HostTensor r = v[0]; r.shape = {r.shape[0], 6}; return r; }, 0, 0},
      {"squeeze", {{"axes", {1}}}, {{{3, 1, 4}}}, moved({3, 4}, [](const Idx& i) { return Idx{i[0], 0, i[1]}; }), 0, 0},
      {"unsqueeze", {{"axes", {0, 3}}}, {{{3, 4}}}, moved({1, 3, 4, 1}, [](const Idx& i) { return Idx{i[1], i[2]}; }), 0, 0},
      {"broadcast_to", {{"shape", {2, 3, 4}}}, {{{3, 1}}}, moved({2, 3, 4}, [](const Idx& i) { return Idx{i[1], 0}; }), 0, 0},
      {"slice", {{"starts", {1, -1}}, {"ends", {7, -100}}, {"axes", {0, 1}}, {"steps", {2, -2}}}, {{{7, 5}}},
       moved({3, 3}, [](const Idx& i) { return Idx{1 + 2 * i[0], 4 - 2 * i[1]}; }), 0, 0},
      {"concat", {{"axis", 1}}, {{{2, 3}}, {{2, 1}}, {{2, 2}}},
       [](const V& v) {
         return gen({2, 6}, [&](const Idx& i) {
           return i[1] < 3 ? at(v[0], i) : i[1] < 4 ? at(v[1], {i[0], 0}) : at(v[2], {i[0], i[1] - 4});
         });
       }, 0, 0},
      {"stack", {{"axis", 1}}, {{{n, 2}}, {{n, 2}}},
       [](const V& v) { return gen({v[0].shape[0], 2, 2}, [&](const Idx& i) { return at(v[i[1]], {i[0], i[2]}); }); }, 0, 0},
      {"split", {{"axis", 0}, {"sizes", {2, 5}}, {"index", 1}}, {{{7, 3}}}, moved({5, 3}, [](const Idx& i) { return Idx{i[0] + 2, i[1]}; }), 0, 0},
      {"pad", {{"pads", {1, 0, 2, 3}}, {"value", 0.5}}, {{{3, 4}}},
       [](const V& v) {
         return gen({6, 7}, [&](const Idx& i) { return i[0] >= 1 && i[0] < 4 && i[1] < 4 ? at(v[0], {i[0] - 1, i[1]}) : 0.5; });
       }, 0, 0},
      {"pad", {{"pads", {2, 3}}, {"mode", "reflect"}}, {{{5}}},
       moved({10}, [](const Idx& i) { int64_t j = i[0] - 2; j = j < 0 ? -j : j > 4 ? 8 - j : j; return Idx{j}; }), 0, 0},
      {"pad", {{"pads", {0, 1, 0, 2}}, {"mode", "edge"}}, {{{n, 3}}},
       [](const V& v) { return gen({v[0].shape[0], 6}, [&](const Idx& i) { return at(v[0], {i[0], std::clamp<int64_t>(i[1] - 1, 0, 2)}); }); }, 0, 0},
      {"gather", {{"axis", 1}}, {{{3, 5}}, {{2, 2}, DType::I32, -5, 4, true}},
       [](const V& v) {
         return gen({3, 2, 2}, [&](const Idx& i) { int64_t k = static_cast<int64_t>(at(v[1], {i[1], i[2]})); return at(v[0], {i[0], k < 0 ? k + 5 : k}); });
       }, 0, 0},
      {"gather_elements", {{"axis", 0}}, {{{4, 3}}, {{2, 3}, DType::I64, 0, 3, true}},
       [](const V& v) { return gen({2, 3}, [&](const Idx& i) { return at(v[0], {static_cast<int64_t>(at(v[1], i)), i[1]}); }); }, 0, 0},
      {"scatter", {{"axis", 1}}, {{{3, 5}}, {{3, 2}, DType::I32, 0, 4, true}, {{3, 2}}},
       [](const V& v) {
         HostTensor r = v[0];
         for_each(v[1].shape, [&](const Idx& i) { at(r, {i[0], static_cast<int64_t>(at(v[1], i))}) = at(v[2], i); });
         return r;
       }, 0, 0},
      {"embedding", {}, {{{6, 3}}, {{n}, DType::I32, 0, 5, true}},
       [](const V& v) { return gen({v[1].shape[0], 3}, [&](const Idx& i) { return at(v[0], {static_cast<int64_t>(v[1].data[i[0]]), i[1]}); }); }, 0, 0},
      {"tile", {{"repeats", {2, 1, 3}}}, {{{2, 3}}}, moved({2, 2, 9}, [](const Idx& i) { return Idx{i[1], i[2] % 3}; }), 0, 0},
      {"repeat", {{"repeats", 3}, {"axis", 0}}, {{{2, 3}}}, moved({6, 3}, [](const Idx& i) { return Idx{i[0] / 3, i[1]}; }), 0, 0},
      {"flip", {{"axes", {1}}}, {{{2, 5}}}, moved({2, 5}, [](const Idx& i) { return Idx{i[0], 4 - i[1]}; }), 0, 0},
      {"roll", {{"shifts", {-2}}, {"axes", {1}}}, {{{2, 5}}}, moved({2, 5}, [](const Idx& i) { return Idx{i[0], (i[1] + 2) % 5}; }), 0, 0},
      {"one_hot", {{"depth", 4}, {"axis", 0}, {"on_value", 2.0}, {"off_value", -1.0}}, {{{n}, DType::I32, -4, 3, true}},
       [](const V& v) {
         return gen({4, v[0].shape[0]}, [&](const Idx& i) { int64_t k = static_cast<int64_t>(v[0].data[i[1]]); return (k < 0 ? k + 4 : k) == i[0] ? 2.0 : -1.0; });
       }, 0, 0},
      {"tril", {{"k", 0}}, {{{2, 3, 4}}}, [](const V& v) { return gen({2, 3, 4}, [&](const Idx& i) { return i[2] <= i[1] ? at(v[0], i) : 0.0; }); }, 0, 0},
      {"triu", {{"k", 1}}, {{{3, 4}}}, [](const V& v) { return gen({3, 4}, [&](const Idx& i) { return i[1] - i[0] >= 1 ? at(v[0], i) : 0.0; }); }, 0, 0},
  };
  check_cases("movement", c);
}

TEST_CASE("registry and call() table list the same operators, 100+", "[ops][registry]") {
  std::vector<std::string> reg;
  for (const auto& o : ops::registry()) reg.push_back(o.name);
  CHECK(reg == ops::callable_ops());
  CHECK(reg.size() >= 100);
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
