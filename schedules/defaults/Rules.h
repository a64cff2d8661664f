// The rules behind default_schedule (Defaults.h), one concept per file:
//   Defaults.cpp         the driver, the generic root stage (parallel outer
//                        dim, vectorized inner dim), several vectors per step
//                        for transcendental stages
//   Contraction.cpp      matmul-like contractions: the register-tiled micro-
//                        kernel, in an epilogue's tile or an accumulator tile
//                        of its own, with packed (transposed) B panels;
//                        matrix-vector products as streams of A's rows
//   ChannelsLastConv.cpp channels-last convolutions: pixels x output-channel
//                        tiles, padded input, weights-outer for deep layers
//   RowWise.cpp          row-wise normalizations, row statistics rfactored
//   Reduction.cpp        the other reductions and skinny contractions, by the
//                        axis they stream along: vectorized along a kept dim,
//                        or vector lanes of partials along a reduced one;
//                        parallel over kept dims or split across cores
//   DotPairs.cpp         bf16 sums over operands laid out in pairs: dot_pairs
//   Amx.cpp              contractions of bf16 factors on AMX tiles
//   DataMovement.cpp     transposes: lanes x lanes blocks
//   Im2col.cpp           a channels-first convolution's im2col copy: whole or
//                        per column tile, and its GEMM's tile order
//   Window.cpp           window stages over channels-first tensors: depthwise
//                        and grouped convolutions, max / average pooling
//   Attention.cpp        contractions over a softmax: FlashAttention's fused
//                        loop (online_softmax) past the L2 size
// Internal to schedules/defaults/; the measurements behind each choice are at
// its definition.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "dsl/Program.h"
#include "schedules/Schedule.h"
#include "target/Target.h"

namespace pto::defaults {

// What a parallel loop costs over running it on one core: publishing the
// job to the spinning team and joining it (backends/SpinTeam.h), about 1 us
// (3,000 cycles at 3 GHz) on the 2-vCPU virtual machines this project runs
// on: a parallel loop of two empty tasks in a JIT kernel adds 0.84 us to
// the call (Sapphire Rapids VM). A stage whose work the cores would cut by
// less runs serially. Measured on small matmuls against the 4 us this was
// under OpenMP (default tiles, interleaved): 64^3 3.2 -> 3.0 us, [100, 50] @
// [50, 70] 5.9 -> 4.2, [40, 300] @ [300, 24] 6.5 -> 4.7; 48^3 and 32^3 stay
// serial, 80^3 and up were parallel already.
constexpr double kForkCycles = 3000;

// Below this many elements (adds, loads) a parallel loop of a memory-bound
// stage costs about as much as it saves: waking a thread ~ 2^14 adds. Also
// the smallest block of rows one parallel task takes.
constexpr int64_t kMinParallelElements = int64_t{1} << 14;

// An element of a transcendental function (exp, tanh, erf: a polynomial of a
// few dozen vector instructions per vector) costs about this many streamed
// elements' time.
constexpr int64_t kTranscendentalElements = 4;

// A row of a softmax's values is written into the output row and scaled
// there (store_in) from this many bytes: the in-place form overlaps the
// output's write misses with the row's exp pass, a gain that grows with the
// row, while the output's loops guard their last vector instead of shifting
// it, a fixed cost per row. Softmax, 2 threads, in place / scratch row:
// 9-25 classes (rows under 2 vectors) 1.27-1.43, 34-119 1.00-1.06, 128-250
// 0.94-1.06, 300-1300 0.88-1.02, 1400-100000 0.73-1.00.
constexpr int64_t kInPlaceRowBytes = 1024;

// Defaults.cpp
int64_t static_extent(const Dim& d);  // -1 when symbolic
// Is some stage computed or stored at a loop of `stage`? Then a later rule
// must not replace `stage`'s loops.
bool hosts_placements(const Schedule& s, const std::string& stage);
// Parallel from `min_elements` of the stage (kMinParallelElements unless a
// rule knows each element costs more: rowwise's passes per element).
LoopSchedule parallel_vectorized(const Stage& st, const Target& t,
                                 int64_t min_elements = kMinParallelElements);
// The vector width along a row of `extent` elements (-1: symbolic): the
// target's lanes, or for rows shorter than a vector (a 14 x 14 feature map's,
// a softmax over 14 classes) the widest narrower vector that fits, the last
// one shifted inwards at root and guarded inside a consumer, not a scalar loop
// (the bias pass of a 1x1 convolution to 512 x 14 x 14, 2 threads: 0.020 ->
// 0.006 ms); 0 under 4 elements.
int row_vector_width(int64_t extent, int lanes);
void specialize_symbolic(const Program& p, Schedule& s);  // root stages tiled over symbolic dims
void wide_arithmetic(const Program& p,
                     Schedule& s);  // f32 compute and accumulation for bf16 / f16 stages
// Several vectors per step for vectorized stages that evaluate exp, tanh, erf...
void interleave_transcendentals(const Program& p, const Target& t, Schedule& s);

// Contraction.cpp
std::pair<size_t, size_t> tile_dims(const Stage& st);  // (rows, columns) of the register tile
// What a contraction's register tile streams (the bytes of the operand its
// column tiles read, -1 symbolic, 0 unknown), the bytes of the operands its
// row tiles read (A of A @ B; same convention) and its reduction steps per
// tile (-1 symbolic or unknown).
struct TileOperands {
  int64_t streamed = 0;
  int64_t row_operands = 0;
  int64_t steps = -1;
};
TileOperands tile_operands(const Program& p, const Stage& mm, std::pair<size_t, size_t> rc);
// `pad`: a column extent that is not whole vectors is tiled as whole vectors
// in one column tile (the contraction's micro-kernel pads it: padded_columns).
// `cycles`, where given, receives the modelled cycles of the tile it chose
// (register_tile_cost; negative where no static tile was costed).
std::string register_tile(const Stage& e, std::pair<size_t, size_t> rc, const Target& t,
                          LoopSchedule& ls, const TileOperands& ops = {}, bool pad = false,
                          double* cycles = nullptr);
// The loop register tile `ls` packs a column tile's panel of B at: the one
// just outside the row tiles that read it.
std::string panel_loop(const Stage& mm, std::pair<size_t, size_t> rc, const LoopSchedule& ls);
// The blocks of whole row tiles (tr rows each) that the cores take one each,
// or 0 where the tiles are shared otherwise (register_tile's comment).
int64_t row_blocks(int64_t rows, int64_t tr, bool rows_parallel, const TileOperands& ops,
                   const Target& t);
// Does contraction `mm` have a static column extent that is not whole vectors
// and fits one register tile (wide_tile_vectors), which the tile computes in
// whole vectors (pad_lanes) into an accumulator tile of its own, its
// operands packed?
bool padded_columns(const Program& p, const Stage& mm, const Target& t);
// The most vectors a register tile of 6 rows holds in the target's vector
// registers (with one for the broadcast operand), at most 4.
int64_t tile_vectors(const Target& t);
// Wider tiles of fewer rows: at least kWideTileRows rows, as many vectors as
// the registers then hold (5 x 5 and 4 x 6 on AVX-512's 32).
inline constexpr int64_t kWideTileRows = 4;
int64_t wide_tile_vectors(const Target& t);
// The bytes of the operands `mm` reads without its row var (B of A @ B), or
// with it (`with_row`: A); -1 where a size is symbolic.
int64_t streamed_bytes(const Program& p, const Stage& mm, std::pair<size_t, size_t> rc,
                       bool with_row = false);
// The busiest core's cycles for an r x v-vector register tile over a rows x
// cols output, and whether its row tiles are the parallel loop. The cores
// share an outer dim (every core runs all tiles of its iterations), the tiles
// (column tiles, or row tiles where that leaves the busiest core fewer) or
// blocks of row tiles (row_blocks).
enum class TileSharing { Outer, Tiles, RowBlocks };
struct RegisterTileCost {
  double cycles = 0;
  bool rows_parallel = false;
};
RegisterTileCost register_tile_cost(int64_t rows, int64_t cols, int64_t r, int64_t v, int64_t lanes,
                                    int64_t cores, TileSharing sharing, const TileOperands& ops,
                                    const Target& t);
LoopSchedule micro_kernel(const Stage& mm, std::pair<size_t, size_t> rc, const Target& t,
                          bool const_tile);
bool static_tile(const Stage& st, std::pair<size_t, size_t> rc);
bool specialized_tile(const Stage& st, const LoopSchedule& ls);  // a specialize directive pays
void unroll_by_tile(const Stage& e, std::pair<size_t, size_t> rc, const LoopSchedule& tile,
                    const Target& t, LoopSchedule& up);
bool transposed_operand(const Stage& mm, const std::string& tensor, std::pair<size_t, size_t> rc);
bool transcendental(const Stage& st);
bool needs_packing(const Program& p, const Stage& mm, const std::string& tensor,
                   std::pair<size_t, size_t> rc);
void contraction_with_epilogue(const Program& p, const Stage& mm, const Stage& e, const Target& t,
                               Schedule& s);
void contraction_alone(const Program& p, const Stage& mm, const Target& t, Schedule& s);
// A @ x: rows of A streamed in parallel blocks, lanes of partials; false where it does not apply.
bool matrix_vector(const Program& p, const Stage& st, const Target& t, Schedule& s);
// x @ W with one output row, W too large for the register tile's strided
// pieces: left to the reduction rule, which splits W's rows across cores.
bool one_row_stream(const Program& p, const Stage& st, const Target& t);

// ChannelsLastConv.cpp
bool channels_last_conv(const Stage& st);
int64_t parallel_chunk(int64_t extent, int64_t unit, const Target& t);
int64_t max_tile_pixels(const Program& p, const Stage& conv);
std::string channels_last_tile(const Stage& e, const Target& t, LoopSchedule& ls,
                               int64_t max_pixels = 14);
void skip_row_padding(const Program& p, const Stage& conv, LoopSchedule& tile_loops,
                      StageSchedule& cs);
bool weights_outweigh_input(const Program& p, const Stage& conv);
bool weights_outer_pays(const Program& p, const Stage& conv, const Target& t);
void weights_outer(const Program& p, const Stage& mm, const Stage* epilogue, const Target& t,
                   Schedule& s);
LoopSchedule padded_input(const Stage& pad, const Target& t);

// RowWise.cpp
std::optional<RFactor> row_rfactor(const Stage& st, const Target& t);
void rowwise(const Program& p, const Stage& y, const Target& t, Schedule& s);

// DataMovement.cpp
// The stage dim that a read tensor's innermost index walks, when it is not the
// stage's own innermost dim (a transpose); none otherwise.
std::optional<std::string> transposed_dim(const Stage& st);
void blocked_transpose(const Stage& st, const Target& t, Schedule& s);

// Im2col.cpp: the copy `col` and the tiles of the GEMM that reads it.
void im2col(const Program& p, const Stage& col, const Target& t, Schedule& s);

// Window.cpp
bool window_conv(const Program& p, const Stage& st, const Target& t);
bool window_pool(const Stage& st);
bool window_stage(const Program& p, const Stage& st, const Target& t);
void window(const Program& p, const Stage& w, const Target& t, Schedule& s);
// Reduction.cpp: a reduction stage left at the plain root schedule.
void reduction(const Program& p, const Stage& st, const Target& t, Schedule& s);
// The reduction's stream: the variable that indexes the innermost dim of the
// largest tensor the stage reads, or empty when that index is not a variable.
std::string stream_var(const Program& p, const Stage& st);

// DotPairs.cpp
void dot_pairs(const Program& p, const Target& t, Schedule& s);

// Amx.cpp
void amx_contractions(const Program& p, const Target& t, Schedule& s);

// Attention.cpp
OnlineSoftmax online_softmax_block(const Target& t);  // rows x keys of its blocks
void online_softmax_attention(const Program& p, const Target& t, Schedule& s);

}  // namespace pto::defaults
