// The rules behind default_schedule (Defaults.h), one concept per file:
//   Defaults.cpp         the driver, and the generic root stage (parallel outer
//                        dim, vectorized inner dim)
//   Contraction.cpp      matmul-like contractions: the register-tiled micro-
//                        kernel, in an epilogue's tile or an accumulator tile
//                        of its own, with packed (transposed) B panels
//   ChannelsLastConv.cpp channels-last convolutions: pixels x output-channel
//                        tiles, padded input, weights-outer for deep layers
//   RowWise.cpp          row-wise normalizations, row statistics rfactored
//   DotPairs.cpp         bf16 sums over operands laid out in pairs: dot_pairs
//   Attention.cpp        contractions over a softmax: FlashAttention's fused
//                        loop (online_softmax) past the L2 size
// Internal to schedules/defaults/; the measurements behind each choice are at
// its definition.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "target/Target.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto::defaults {

// Defaults.cpp
int64_t static_extent(const Dim& d);  // -1 when symbolic
// Is some stage computed or stored at a loop of `stage`? Then a later rule
// must not replace `stage`'s loops.
bool hosts_placements(const Schedule& s, const std::string& stage);
LoopSchedule parallel_vectorized(const Stage& st, const Target& t);
void wide_arithmetic(const Program& p, Schedule& s);  // f32 compute and accumulation for bf16 / f16 stages

// Contraction.cpp
std::pair<size_t, size_t> tile_dims(const Stage& st);  // (rows, columns) of the register tile
std::string register_tile(const Stage& e, std::pair<size_t, size_t> rc, const Target& t, LoopSchedule& ls);
LoopSchedule micro_kernel(const Stage& mm, std::pair<size_t, size_t> rc, const Target& t, bool const_tile);
bool static_tile(const Stage& st, std::pair<size_t, size_t> rc);
bool transposed_operand(const Stage& mm, const std::string& tensor, std::pair<size_t, size_t> rc);
bool transcendental(const Stage& st);
bool needs_packing(const Program& p, const Stage& mm, const std::string& tensor, std::pair<size_t, size_t> rc);
void contraction_with_epilogue(const Program& p, const Stage& mm, const Stage& e, const Target& t, Schedule& s);
void contraction_alone(const Program& p, const Stage& mm, const Target& t, Schedule& s);

// ChannelsLastConv.cpp
bool channels_last_conv(const Stage& st);
int64_t parallel_chunk(int64_t extent, int64_t unit, const Target& t);
int64_t max_tile_pixels(const Program& p, const Stage& conv);
std::string channels_last_tile(const Stage& e, const Target& t, LoopSchedule& ls, int64_t max_pixels = 14);
void skip_row_padding(const Program& p, const Stage& conv, LoopSchedule& tile_loops, StageSchedule& cs);
bool weights_outweigh_input(const Program& p, const Stage& conv);
bool weights_outer_pays(const Program& p, const Stage& conv, const Target& t);
void weights_outer(const Program& p, const Stage& mm, const Stage* epilogue, const Target& t, Schedule& s);
LoopSchedule padded_input(const Stage& pad, const Target& t);

// RowWise.cpp
std::optional<RFactor> row_rfactor(const Stage& st, const Target& t);
void rowwise(const Program& p, const Stage& y, const Target& t, Schedule& s);

// DotPairs.cpp
void dot_pairs(const Program& p, const Target& t, Schedule& s);

// Attention.cpp
OnlineSoftmax online_softmax_block(const Target& t);  // rows x keys of its blocks
void online_softmax_attention(const Program& p, const Target& t, Schedule& s);

}  // namespace pto::defaults
