// fuzz_schedule: the schedule fuzzer as a plain executable, for the
// AddressSanitizer + UndefinedBehaviorSanitizer build (no Catch2, no JIT).
//
//   fuzz_schedule [cases=10000] [seed=1]
// Exits 1 when any input escaped as something other than a pto::Error.
#include <cstdio>
#include <cstdlib>

#include "../cpp/ScheduleFuzz.h"

int main(int argc, char** argv) {
  const int cases = argc > 1 ? std::atoi(argv[1]) : 10000;
  const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  try {
    const pto::fuzz::FuzzReport r = pto::fuzz::fuzz_schedules(cases, seed);
    std::printf("fuzz_schedule: %d cases (seed %llu): %d parsed, %d valid, %d explained, %d rejected with pto::Error, "
                "%d other failures\n",
                r.cases, static_cast<unsigned long long>(seed), r.parsed, r.valid, r.explained, r.rejected, r.foreign);
    if (r.foreign) std::printf("first: %s\n", r.first_foreign.c_str());
    return r.foreign == 0 && r.cases == cases ? 0 : 1;
  } catch (const pto::Error& e) {
    std::fprintf(stderr, "fuzz_schedule: set-up failed: %s\n", e.what());
    return 2;
  }
}
