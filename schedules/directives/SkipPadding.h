// skip_padding: a sum over a zero-padded stage (conv2d_nhwc's `_pad`) leaves
// out the reduction steps that read its padding, along the listed padded
// dims (StageSchedule in Schedule.h, dsl/ZeroPadding.h). It changes the
// stage's definition, not its loops: lowering builds the reduction from
// skipped_padding().
#pragma once

#include <functional>

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& skip_padding_directive();

// The reduction body of `st` under its skip_padding (`ss` may be null): the
// body read through the padding when every padded dim is skipped, and the
// condition a step must meet to run (none without skip_padding).
struct SkippedPadding {
  Expr value;
  std::optional<Expr> where;
};
SkippedPadding skipped_padding(const Program& p, const Stage& st, const StageSchedule* ss);

// Does a sum skipping every padded dim read stage `source` in place of its
// zero padding (its body read through the padding)? Those reads are guarded
// by the steps' condition, which Halide's region of `source` does not see:
// it takes them to reach into the padding (a 1x3 kernel, stride 2, padded by
// 1 in h: rows -1..13 of 13), though the steps that run read only inside.
bool read_through_padding_of(const Program& p, const std::string& source,
                             const std::function<const StageSchedule*(const std::string&)>& schedule_of);

}  // namespace pto::directives
