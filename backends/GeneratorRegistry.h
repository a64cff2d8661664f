// Generator programs: a C++ program that names the kernels of a library.
//
//   #include "backends/GeneratorRegistry.h"
//   PTO_REGISTER_KERNEL(matmul, [] { return pto::make_workload("matmul", {{"M", 64}}); });
//   PTO_REGISTER_KERNEL(softmax, [] { pto::Program p("softmax"); ...; return p; });
//   PTO_GENERATOR_MAIN()
//
// Each kernel is a name and a function building its Program: the Program's
// inputs and outputs (names, element types, shapes) are the kernel's interface
// types. The generator executable takes --out, --name, --kernels, --targets,
// --dispatch, --schedules (see GeneratorMain.h and `pto_add_library(...
// GENERATOR ...)` in cmake/PTO.cmake). Builders run lazily, when a library is
// generated, so registration order across translation units does not matter.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/Generator.h"

namespace pto {

class GeneratorRegistry {
 public:
  using Builder = std::function<Program()>;

  static GeneratorRegistry& global();

  // Throws Error for a name that is no C identifier or is registered twice.
  void add(const std::string& name, Builder build);
  std::vector<std::string> names() const;  // in registration order
  // Builds the named kernels (all when `names` is empty); throws Error naming
  // the registered kernels for an unknown name.
  std::vector<KernelSpec> build(const std::vector<std::string>& names = {}) const;

 private:
  std::vector<std::pair<std::string, Builder>> entries_;
};

struct RegisterKernel {
  RegisterKernel(const std::string& name, GeneratorRegistry::Builder build) {
    GeneratorRegistry::global().add(name, std::move(build));
  }
};

// Schedules for kernels from a JSON file: {"<kernel>": <schedule>} applies the
// schedule to every target, {"<kernel>": {"<target>": <schedule>, ...}} per
// target ("*" = any other). Adds them to the matching `kernels`; throws
// ScheduleError for an unknown kernel or a malformed schedule (naming it).
void apply_schedule_file(const std::string& path, std::vector<KernelSpec>& kernels);

}  // namespace pto

#define PTO_REGISTER_KERNEL(name, ...) \
  static const ::pto::RegisterKernel pto_register_kernel_##name(#name, __VA_ARGS__)
