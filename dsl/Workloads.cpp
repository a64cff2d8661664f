#include "dsl/Workloads.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "dsl/ProgramJson.h"
#include "dsl/ops/Ops.h"

namespace pto {
namespace {

using Sizes = std::map<std::string, int64_t>;
struct Entry {
  WorkloadInfo info;
  std::function<Program(const std::function<Dim(const std::string&)>&)> build;
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = {
      {{"matmul", "C = A @ B, A: [M, K], B: [K, N]", {{"M", 1024}, {"N", 1024}, {"K", 1024}}},
       [](const auto& d) {
         Program p("matmul");
         const Tensor a = p.input("A", {d("M"), d("K")});
         const Tensor b = p.input("B", {d("K"), d("N")});
         p.output(ops::matmul(a, b, "C"));
         return p;
       }},
      {{"matmul_bias_relu", "out = relu(A @ B + bias), the fused-epilogue example",
        {{"M", 1024}, {"N", 1024}, {"K", 1024}}},
       [](const auto& d) {
         Program p("matmul_bias_relu");
         const Tensor a = p.input("A", {d("M"), d("K")});
         const Tensor b = p.input("B", {d("K"), d("N")});
         const Tensor bias = p.input("bias", {d("N")});
         const Tensor mm = ops::matmul(a, b, "mm");
         const Tensor out = ops::relu(ops::add(mm, bias, "biased"), "out");
         p.output(out);
         return p;
       }},
  };
  return e;
}

}  // namespace

const std::vector<WorkloadInfo>& workloads() {
  static const std::vector<WorkloadInfo> w = [] {
    std::vector<WorkloadInfo> v;
    for (const auto& e : entries()) v.push_back(e.info);
    return v;
  }();
  return w;
}

Program make_workload(const std::string& name, const Sizes& sizes) {
  for (const auto& e : entries()) {
    if (e.info.name != name) continue;
    for (const auto& [k, v] : sizes) {
      if (!e.info.defaults.count(k)) {
        std::string valid;
        for (const auto& [dk, dv] : e.info.defaults) valid += (valid.empty() ? "" : ", ") + dk;
        throw DefinitionError("workload '" + name + "' has no size '" + k + "'; sizes: " + valid);
      }
      if (v < 0) throw ShapeError("workload '" + name + "': size " + k + "=" + std::to_string(v) + " must be positive (0 = symbolic)");
    }
    return e.build([&](const std::string& k) {
      const auto it = sizes.find(k);
      const int64_t v = it == sizes.end() ? e.info.defaults.at(k) : it->second;
      return v == 0 ? Dim::symbol(k) : Dim(v);
    });
  }
  std::string valid;
  for (const auto& e : entries()) valid += (valid.empty() ? "" : ", ") + e.info.name;
  throw DefinitionError("unknown workload '" + name + "'; workloads: " + valid + " (or a program .json file)");
}

Program load_program(const std::string& name_or_path, const Sizes& sizes) {
  if (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".json") {
    std::ifstream f(name_or_path);
    if (!f) throw DefinitionError("cannot open program file '" + name_or_path + "'");
    std::stringstream ss;
    ss << f.rdbuf();
    if (!sizes.empty()) throw DefinitionError("--set applies to workloads, not to program files");
    return program_from_json_string(ss.str());
  }
  return make_workload(name_or_path, sizes);
}

}  // namespace pto
