// Contractions of bf16 factors on a CPU with AMX run on its tiles (the amx
// directive): one tdpbf16ps is 16 x 16 x 32 multiply-adds, 512 per cycle
// against 32 for AVX-512's vdpbf16ps or two f32 FMAs, and bf16 factors make
// it exact (products of bf16 values are exact in f32, sums in f32 as with
// dot_pairs). The program decides the types; the hardware model decides
// whether the tiles exist. f32 factors are left to the tuner under an
// accuracy budget: rounding them is the user's call.
//
// The stage's entry is replaced (the directive owns its loops); a schedule
// that does not validate with it (another stage computed at one of its
// loops) keeps the vector path.
#include "schedules/directives/Amx.h"

#include "schedules/Validate.h"
#include "schedules/defaults/Rules.h"

namespace pto::defaults {

void amx_contractions(const Program& p, const Target& t, Schedule& s) {
  if (!t.amx || t.has_device()) return;
  for (const Stage& st : p.stages()) {
    const auto c = directives::amx_contraction(p, st);
    if (!c || !c->exact) continue;
    Schedule with = s;
    StageSchedule v;
    v.amx = true;
    with.stages[st.name] = v;
    try {
      validate(p, with, &t);
      s = std::move(with);
    } catch (const ScheduleError&) {
    }
  }
}

}  // namespace pto::defaults
