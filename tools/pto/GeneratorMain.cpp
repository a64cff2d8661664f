// main() of generator programs: the kernels come from PTO_REGISTER_KERNEL in
// the generator's own sources; this parses the command line shared with
// `pto gen` and writes the libraries. Linked in by pto_add_generator().
//
//   my_gen --list
//   my_gen --out DIR --name mylib [--kernels a,b] --targets x86-64-avx512,x86-64-avx2 --dispatch
#include <cstdio>

#include "tools/pto/GenCommand.h"

int main(int argc, char** argv) {
  CLI::App app{"PTO generator: emits static libraries + C headers for the kernels it registers"};
  pto::cli::GenOptions o;
  o.add(&app);
  std::string kernels;
  bool list = false;
  app.add_option("--kernels,-k", kernels, "comma-separated kernels to include (default: all)");
  app.add_flag("--list", list, "print the registered kernels and exit");
  app.get_option("--out")->required(false);
  CLI11_PARSE(app, argc, argv);
  try {
    const auto& reg = pto::GeneratorRegistry::global();
    if (list) {
      for (const auto& n : reg.names()) std::printf("%s\n", n.c_str());
      return 0;
    }
    if (o.out_dir.empty()) throw pto::Error("--out is required");
    std::vector<std::string> names;
    for (size_t start = 0; !kernels.empty();) {
      const size_t comma = kernels.find(',', start);
      names.push_back(kernels.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    pto::cli::run_gen(o.runtime_only ? std::vector<pto::KernelSpec>{} : reg.build(names), o);
  } catch (const pto::Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
  return 0;
}
