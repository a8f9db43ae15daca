// KvAttention: causal attention of each new token over its sequence's paged
// cache, as runtime/cpu/PagedAttention.cpp computes it: token t at position
// p attends to keys 0..p of its sequence, or with a sliding window to keys
// p - window + 1..p (blocks before those are never read: the runtime may
// have given them back); query head h reads kv head h / (heads / kv_heads). Scores are scale · (q · k), soft-capped
// to softcap · tanh(s / softcap) where the instruction has a softcap
// (Gemma 2), folded by an online softmax in f32.
//
// The cache may hold any type of runtime/schema/KvCacheFormat.h, keys and
// values apart (each with its own slot stride and head bytes): every key
// and value element is read as its f32 value (device/KvCache.cuh's
// load_kv_<type>: the scale times the code, one f32 multiply, as the CPU's
// LoadKvRow), and scored against the query in f32. Where keys are stored
// rotated, each query head is rotated by the same Walsh-Hadamard blocks
// first (scores unchanged, H orthonormal); where they are q8_0 or q4_0
// (KvCacheFormat.h's QuantizesQuery), each (rotated) query head is then
// rounded to q8_0 blocks, scale times code, as the CPU's integer dot
// products (QuantizedKeyScores.h) and the reference see it: the kernels' f32
// dot products of those values are the CPU's integer sums up to f32
// rounding. Where values are stored rotated, each output head is rotated
// back after the softmax's division (H is its own inverse), as
// runtime/cpu/PagedAttention.cpp does.
//
// Decode path (split-K "flash decoding"): one block per (token, kv head,
// split of kSplitKeys keys), the GQA group's query heads sharing each key
// and value read; each split leaves its running max, denominator and
// unnormalised output in scratch, and a reduce kernel folds the splits in
// order. Split z always covers keys [z·kSplitKeys, (z+1)·kSplitKeys), and a
// split past a token's keys leaves (-inf, 0, 0), which adds exact zeros: a
// token's result depends on its sequence alone, not on the step's widest
// block table.
//
// Prefill path: one block per (tile of consecutive packed rows, kv head);
// tiles of keys and values pass through shared memory once for all the
// tile's rows and query heads of that sequence (rows of several sequences
// in one tile take one pass per sequence).

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/KernelEmitter.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/schema/OpOperands.h"

namespace kvjit::codegen::cuda {
namespace {

constexpr uint32_t kAttentionThreads = 128;  // 4 warps
constexpr int64_t kSplitKeysTarget = 128;
constexpr int64_t kMaxStaticSharedBytes = 48 * 1024;

// Shared by both paths: the online-softmax step of one query head for one
// key, in each lane's share of the head dimensions (d = lane + 32c).
constexpr char kCommonConstants[] = R"cuda(@POOL_CONSTANTS@  constexpr int kHeads = @HEADS@;
  constexpr int kGroup = kHeads / kKvHeads;
  constexpr int kDimsPerLane = (kHeadDim + 31) / 32;
  constexpr int kWarps = @THREADS@ / 32;
  constexpr float kScale = @SCALE@;
  constexpr int kWindow = @WINDOW@;  // 0: the whole context
  constexpr float kSoftcap = @SOFTCAP@;  // 0: scores uncapped
  const auto capped = [](float score) {
    return kSoftcap > 0.0f ? kSoftcap * tanhf(score * (1.0f / kSoftcap)) : score;
  };
  const float* query = static_cast<const float*>(args.buffers[@QUERY@]);
  const int32_t* positions = static_cast<const int32_t*>(args.buffers[@POSITIONS@]);
  const int32_t* seq_starts = static_cast<const int32_t*>(args.buffers[@SEQ_STARTS@]);
  const int32_t* block_tables = static_cast<const int32_t*>(args.buffers[@BLOCK_TABLES@]);
  const uint8_t* pool = static_cast<const uint8_t*>(args.buffers[@POOL@]);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // Where kv head `head` keeps the key (value) of position `key` of the
  // sequence whose block table is `table`.
  const auto key_row = [pool](const int32_t* table, int key, int head) {
    return pool + static_cast<uint64_t>(table[key / kBlockSize]) * kBlockBytes +
           static_cast<uint64_t>(key % kBlockSize) * kKeySlotStride + static_cast<uint64_t>(head) * kKeyHeadBytes;
  };
  const auto value_row = [pool](const int32_t* table, int key, int head) {
    return pool + static_cast<uint64_t>(table[key / kBlockSize]) * kBlockBytes + kValueOffset +
           static_cast<uint64_t>(key % kBlockSize) * kValueSlotStride +
           static_cast<uint64_t>(head) * kValueHeadBytes;
  };
)cuda";

constexpr char kDecode[] = R"cuda(
// KvAttention, decode path: @HEADS@ query heads over a cache of @ELEMENT@, scale @SCALE_TEXT@.
@ELEMENT_FUNCTIONS@extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
@COMMON@  constexpr int kSplitKeys = @SPLIT_KEYS@;
  constexpr int kBlocksPerSplit = kSplitKeys / kBlockSize;
  float* scratch = static_cast<float*>(args.buffers[@SCRATCH@]);
  const int token = blockIdx.x / kKvHeads, kv_head = blockIdx.x % kKvHeads;
  const int split = blockIdx.y;
  const int splits = (args.max_blocks + kBlocksPerSplit - 1) / kBlocksPerSplit;
  const int sequence = find_sequence(seq_starts, args.sequences, token);
  const int32_t* table = block_tables + static_cast<int64_t>(sequence) * args.max_blocks;
  const int window_first_key = kWindow > 0 ? max(0, positions[token] - kWindow + 1) : 0;
  const int first_key = max(split * kSplitKeys, window_first_key);
  const int end_key = min(positions[token] + 1, split * kSplitKeys + kSplitKeys);

  __shared__ float q_shared[kGroup][kHeadDim];
  __shared__ float warp_max[kWarps][kGroup];
  __shared__ float warp_denominator[kWarps][kGroup];
  __shared__ float warp_output[kWarps][kGroup][kHeadDim];
  for (int i = threadIdx.x; i < kGroup * kHeadDim; i += blockDim.x) {
    q_shared[i / kHeadDim][i % kHeadDim] =
        query[(static_cast<int64_t>(token) * kHeads + kv_head * kGroup) * kHeadDim + i];
  }
  __syncthreads();
  // Rotated keys: each query head rotated alike, which leaves the scores as they were.
  if constexpr (kKeyRotation > 0) {
    hadamard_shared(&q_shared[0][0], kGroup * kHeadDim, kKeyRotation, kKeyRotationScale);
  }
  // Keys scored in integers on the CPU: the query as q8_0 blocks give it back.
  if constexpr (kQuantizeQuery) {
    for (int block = warp; block < kGroup * kHeadDim / 32; block += kWarps) {
      float* x = &q_shared[0][0] + block * 32 + lane;
      *x = round_q8_0(*x);
    }
    __syncthreads();
  }

  float running_max[kGroup], denominator[kGroup], output[kGroup][kDimsPerLane];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    running_max[g] = negative_infinity();
    denominator[g] = 0.0f;
#pragma unroll
    for (int c = 0; c < kDimsPerLane; ++c) output[g][c] = 0.0f;
  }
  for (int key = first_key + warp; key < end_key; key += kWarps) {
    const uint8_t* keys = key_row(table, key, kv_head);
    const uint8_t* values = value_row(table, key, kv_head);
    float k[kDimsPerLane], v[kDimsPerLane];
#pragma unroll
    for (int c = 0; c < kDimsPerLane; ++c) {
      const int d = lane + 32 * c;
      k[c] = d < kHeadDim ? KVJIT_KERNEL_load_key(keys, d) : 0.0f;
      v[c] = d < kHeadDim ? KVJIT_KERNEL_load_value(values, d) : 0.0f;
    }
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      float partial = 0.0f;
#pragma unroll
      for (int c = 0; c < kDimsPerLane; ++c) {
        const int d = lane + 32 * c;
        if (d < kHeadDim) partial += q_shared[g][d] * k[c];
      }
      const float score = capped(kScale * warp_sum(partial));
      if (score > running_max[g]) {
        const float correction = expf(running_max[g] - score);
        denominator[g] *= correction;
#pragma unroll
        for (int c = 0; c < kDimsPerLane; ++c) output[g][c] *= correction;
        running_max[g] = score;
      }
      const float weight = expf(score - running_max[g]);
      denominator[g] += weight;
#pragma unroll
      for (int c = 0; c < kDimsPerLane; ++c) output[g][c] += weight * v[c];
    }
  }
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    if (lane == 0) {
      warp_max[warp][g] = running_max[g];
      warp_denominator[warp][g] = denominator[g];
    }
#pragma unroll
    for (int c = 0; c < kDimsPerLane; ++c) {
      const int d = lane + 32 * c;
      if (d < kHeadDim) warp_output[warp][g][d] = output[g][c];
    }
  }
  __syncthreads();
  // Fold the warps in order; a warp that saw no key adds nothing.
  for (int i = threadIdx.x; i < kGroup * kHeadDim; i += blockDim.x) {
    const int g = i / kHeadDim, d = i % kHeadDim;
    float max = negative_infinity();
    for (int w = 0; w < kWarps; ++w) max = fmaxf(max, warp_max[w][g]);
    float sum = 0.0f, value = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      if (warp_max[w][g] == negative_infinity()) continue;
      const float factor = expf(warp_max[w][g] - max);
      sum += warp_denominator[w][g] * factor;
      value += warp_output[w][g][d] * factor;
    }
    const int64_t head = static_cast<int64_t>(token) * kHeads + kv_head * kGroup + g;
    float* partial = scratch + (head * splits + split) * (kHeadDim + 2);
    partial[d] = value;
    if (d == 0) {
      partial[kHeadDim] = max;
      partial[kHeadDim + 1] = sum;
    }
  }
}
)cuda";

constexpr char kReduce[] = R"cuda(
// KvAttention, decode path: folds the splits of @HEADS@ heads x @HEAD_DIM@ in order.
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
  constexpr int kHeadDim = @HEAD_DIM@;
  constexpr int kBlocksPerSplit = @BLOCKS_PER_SPLIT@;
  const int splits = (args.max_blocks + kBlocksPerSplit - 1) / kBlocksPerSplit;
  const int64_t row = blockIdx.x;  // token * heads + head
  const float* partials =
      static_cast<const float*>(args.buffers[@SCRATCH@]) + row * splits * (kHeadDim + 2);
  float* out = static_cast<float*>(args.buffers[@OUT@]) + row * kHeadDim;
@REDUCE_SHARED@  for (int d = threadIdx.x; d < kHeadDim; d += blockDim.x) {
    float max = negative_infinity();
    for (int z = 0; z < splits; ++z) max = fmaxf(max, partials[z * (kHeadDim + 2) + kHeadDim]);
    float sum = 0.0f, value = 0.0f;
    for (int z = 0; z < splits; ++z) {
      const float* partial = partials + z * (kHeadDim + 2);
      if (partial[kHeadDim] == negative_infinity()) continue;
      const float factor = expf(partial[kHeadDim] - max);
      sum += partial[kHeadDim + 1] * factor;
      value += partial[d] * factor;
    }
    @REDUCE_RESULT@ = value * (1.0f / sum);
  }
@REDUCE_ROTATE@}
)cuda";

constexpr char kPrefill[] = R"cuda(
// KvAttention, prefill path: @HEADS@ query heads over a cache of @ELEMENT@, scale @SCALE_TEXT@,
// tiles of @ROWS@ rows and @TILE_KEYS@ keys.
@ELEMENT_FUNCTIONS@extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
@COMMON@  constexpr int kRows = @ROWS@;
  constexpr int kTileKeys = @TILE_KEYS@;
  constexpr int kPairs = kRows * kGroup;  // (row, query head of the group)
  constexpr int kPairsPerWarp = (kPairs + kWarps - 1) / kWarps;
  float* out = static_cast<float*>(args.buffers[@OUT@]);
  const int first_row = blockIdx.x * kRows;
  const int end_row = min(args.tokens, first_row + kRows);
  const int kv_head = blockIdx.y;

  __shared__ float key_tile[kTileKeys][kHeadDim];
  __shared__ float value_tile[kTileKeys][kHeadDim];

  // Pair i of this warp is pair warp + kWarps * i of the tile.
  int row_of[kPairsPerWarp], sequence_of[kPairsPerWarp], visible[kPairsPerWarp];
  int first_visible[kPairsPerWarp];
  float q[kPairsPerWarp][kDimsPerLane], output[kPairsPerWarp][kDimsPerLane];
  float running_max[kPairsPerWarp], denominator[kPairsPerWarp];
#pragma unroll
  for (int i = 0; i < kPairsPerWarp; ++i) {
    const int pair = warp + kWarps * i;
    const int row = first_row + pair / kGroup;
    row_of[i] = pair < kPairs && row < end_row ? row : -1;
    sequence_of[i] = row_of[i] >= 0 ? find_sequence(seq_starts, args.sequences, row) : -1;
    visible[i] = row_of[i] >= 0 ? positions[row] + 1 : 0;
    first_visible[i] = kWindow > 0 ? max(0, visible[i] - kWindow) : 0;
    running_max[i] = negative_infinity();
    denominator[i] = 0.0f;
    const int64_t head = kv_head * kGroup + pair % kGroup;
#pragma unroll
    for (int c = 0; c < kDimsPerLane; ++c) {
      const int d = lane + 32 * c;
      const bool inside = row_of[i] >= 0 && d < kHeadDim;
      q[i][c] = inside ? query[(row * static_cast<int64_t>(kHeads) + head) * kHeadDim + d] : 0.0f;
      output[i][c] = 0.0f;
    }
    // Rotated keys: each query head rotated alike (the whole warp holds the pair).
    if constexpr (kKeyRotation > 0) hadamard_lanes<kKeyRotation, kDimsPerLane>(q[i], kKeyRotationScale);
    // Keys scored in integers on the CPU: the query as q8_0 blocks give it
    // back (lanes 0..31 of q[i][c] are block c of the head).
    if constexpr (kQuantizeQuery) {
#pragma unroll
      for (int c = 0; c < kDimsPerLane; ++c) q[i][c] = round_q8_0(q[i][c]);
    }
  }

  const int first_sequence = find_sequence(seq_starts, args.sequences, first_row);
  const int last_sequence = find_sequence(seq_starts, args.sequences, end_row - 1);
  for (int sequence = first_sequence; sequence <= last_sequence; ++sequence) {
    const int rows_begin = max(first_row, seq_starts[sequence]);
    const int rows_end = min(end_row, seq_starts[sequence + 1]);
    int key_begin = 0x7fffffff, key_end = 0;
    for (int row = rows_begin; row < rows_end; ++row) {
      key_begin = min(key_begin, kWindow > 0 ? max(0, positions[row] - kWindow + 1) : 0);
      key_end = max(key_end, positions[row] + 1);
    }
    const int32_t* table = block_tables + static_cast<int64_t>(sequence) * args.max_blocks;
    for (int tile_start = key_begin; tile_start < key_end; tile_start += kTileKeys) {
      const int tile_keys = min(kTileKeys, key_end - tile_start);
      __syncthreads();  // the previous tile is no longer read
      for (int i = threadIdx.x; i < tile_keys * kHeadDim; i += blockDim.x) {
        const int j = i / kHeadDim, d = i % kHeadDim, key = tile_start + j;
        key_tile[j][d] = KVJIT_KERNEL_load_key(key_row(table, key, kv_head), d);
        value_tile[j][d] = KVJIT_KERNEL_load_value(value_row(table, key, kv_head), d);
      }
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kPairsPerWarp; ++i) {
        if (sequence_of[i] != sequence) continue;  // the same for the whole warp
        const int keys = min(tile_keys, visible[i] - tile_start);
        for (int j = max(0, first_visible[i] - tile_start); j < keys; ++j) {
          float partial = 0.0f;
#pragma unroll
          for (int c = 0; c < kDimsPerLane; ++c) {
            const int d = lane + 32 * c;
            if (d < kHeadDim) partial += q[i][c] * key_tile[j][d];
          }
          const float score = capped(kScale * warp_sum(partial));
          if (score > running_max[i]) {
            const float correction = expf(running_max[i] - score);
            denominator[i] *= correction;
#pragma unroll
            for (int c = 0; c < kDimsPerLane; ++c) output[i][c] *= correction;
            running_max[i] = score;
          }
          const float weight = expf(score - running_max[i]);
          denominator[i] += weight;
#pragma unroll
          for (int c = 0; c < kDimsPerLane; ++c) {
            const int d = lane + 32 * c;
            if (d < kHeadDim) output[i][c] += weight * value_tile[j][d];
          }
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kPairsPerWarp; ++i) {
    if (row_of[i] < 0) continue;
    const int64_t head = kv_head * kGroup + (warp + kWarps * i) % kGroup;
    float* row_out = out + (row_of[i] * static_cast<int64_t>(kHeads) + head) * kHeadDim;
    const float inverse = 1.0f / denominator[i];
    float result[kDimsPerLane];
#pragma unroll
    for (int c = 0; c < kDimsPerLane; ++c) result[c] = output[i][c] * inverse;
    // Rotated values: the output rotated back (H is its own inverse).
    if constexpr (kValueRotation > 0) {
      hadamard_lanes<kValueRotation, kDimsPerLane>(result, kValueRotationScale);
    }
#pragma unroll
    for (int c = 0; c < kDimsPerLane; ++c) {
      const int d = lane + 32 * c;
      if (d < kHeadDim) row_out[d] = result[c];
    }
  }
}
)cuda";

}  // namespace

absl::StatusOr<InstructionSpec> EmitKvAttention(const EmitContext& context) {
  const kvx::KvLayout& layout = *context.executable.kv_layout();
  const kvx::Instruction& instruction = context.instruction;
  const kvx::KvAttentionParams* params = instruction.params_as_KvAttentionParams();
  if (params == nullptr) {
    return absl::InvalidArgumentError("a KvAttention without its KvAttentionParams");
  }
  if (params->layer() >= layout.num_layers()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", params->layer(), " of a KV layout of ", layout.num_layers()));
  }
  KVJIT_ASSIGN_OR_RETURN(std::string pool_constants, KvPoolConstants(layout));
  using Operand = kvx::KvAttentionOperand;
  const kvx::TensorRef& query = kvx::InputOf(instruction, Operand::Query);
  KVJIT_ASSIGN_OR_RETURN(int64_t heads, StaticDim(query, 1, "the query's heads"));
  const int64_t kv_heads = layout.num_kv_heads(), head_dim = layout.head_dim();
  if (heads <= 0 || heads % kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(heads, " query heads are not a positive multiple of ", kv_heads, " kv heads"));
  }
  const int64_t group = heads / kv_heads;
  const int64_t dims_per_lane = (head_dim + 31) / 32;
  const int64_t warps = kAttentionThreads / 32;
  // Keep the decode kernel's registers and shared memory bounded.
  const int64_t decode_shared = 4 * (group * head_dim * (1 + warps) + 2 * warps * group);
  if (group * dims_per_lane > 64 || decode_shared > kMaxStaticSharedBytes) {
    return absl::UnimplementedError(
        absl::StrCat("attention with ", group, " query heads per kv head and head_dim ", head_dim,
                     " exceeds the CUDA kernels' registers or shared memory"));
  }
  const int64_t split_keys =
      std::max<int64_t>(1, kSplitKeysTarget / layout.block_size()) * layout.block_size();
  const int64_t blocks_per_split = split_keys / layout.block_size();
  // Up to 32 (row, head) pairs per block, 8 per warp; key tiles in 32 KiB.
  const int64_t tile_rows = std::max<int64_t>(1, 32 / group);
  const int64_t tile_keys = std::clamp<int64_t>(4096 / head_dim, 1, 64);

  KVJIT_ASSIGN_OR_RETURN(KvCacheTypes types, KvCacheTypesOf(layout));
  const std::string element_name = TypesComment(types);
  const std::string common =
      Fill(kCommonConstants, {{"POOL_CONSTANTS", pool_constants},
                              {"HEADS", absl::StrCat(heads)},
                              {"THREADS", absl::StrCat(kAttentionThreads)},
                              {"SCALE", FloatLiteral(params->scale())},
                              {"WINDOW", absl::StrCat(params->window())},
                              {"SOFTCAP", FloatLiteral(params->softcap())},
                              {"POOL", absl::StrCat(KvPoolBuffer(instruction))},
                              {"QUERY", absl::StrCat(kvx::OperandIndex(Operand::Query))},
                              {"POSITIONS", absl::StrCat(kvx::OperandIndex(Operand::Positions))},
                              {"SEQ_STARTS", absl::StrCat(kvx::OperandIndex(Operand::SeqStarts))},
                              {"BLOCK_TABLES",
                               absl::StrCat(kvx::OperandIndex(Operand::BlockTables))}});
  // Rotated values: the output rotated back (H is its own inverse).
  const std::string reduce_rotate =
      types.value_rotation > 0
          ? absl::StrCat("  hadamard_shared(rotated, kHeadDim, ", types.value_rotation, ", ",
                         RotationScale(types.value_rotation), ");\n",
                         "  for (int d = threadIdx.x; d < kHeadDim; d += blockDim.x) out[d] = "
                         "rotated[d];\n")
          : "";
  auto fill = [&](const char* text, uint32_t threads) {
    return Fill(text, {{"COMMON", common},
                       {"ELEMENT_FUNCTIONS", KvElementFunctions(layout)},
                       {"ELEMENT", element_name},
                       {"HEADS", absl::StrCat(heads)},
                       {"HEAD_DIM", absl::StrCat(head_dim)},
                       {"SCALE_TEXT", absl::StrCat(params->scale())},
                       {"THREADS", absl::StrCat(threads)},
                       {"SPLIT_KEYS", absl::StrCat(split_keys)},
                       {"BLOCKS_PER_SPLIT", absl::StrCat(blocks_per_split)},
                       {"ROWS", absl::StrCat(tile_rows)},
                       {"TILE_KEYS", absl::StrCat(tile_keys)},
                       {"REDUCE_SHARED", types.value_rotation > 0
                                             ? "  __shared__ float rotated[kHeadDim];\n"
                                             : ""},
                       {"REDUCE_RESULT", types.value_rotation > 0 ? "rotated[d]" : "out[d]"},
                       {"REDUCE_ROTATE", reduce_rotate},
                       {"SCRATCH", absl::StrCat(ScratchBuffer(instruction))},
                       {"OUT", absl::StrCat(OutputBuffer(instruction, 0))}});
  };
  const uint32_t reduce_threads = RowThreads(head_dim);
  const uint32_t decode_kernel =
      context.kernels.Add("attention_decode", fill(kDecode, kAttentionThreads));
  const uint32_t reduce_kernel =
      context.kernels.Add("attention_reduce", fill(kReduce, reduce_threads));
  const uint32_t prefill_kernel =
      context.kernels.Add("attention_prefill", fill(kPrefill, kAttentionThreads));

  const SizeExpr splits = {
      kvx::SizeFactor(kvx::DimKind::MaxBlocks, 0, static_cast<uint32_t>(blocks_per_split))};
  SizeExpr token_kv_heads = StepTokens();
  token_kv_heads.emplace_back(kvx::DimKind::Static, kv_heads, 1);
  SizeExpr token_heads = StepTokens();
  token_heads.emplace_back(kvx::DimKind::Static, heads, 1);

  InstructionSpec spec;
  spec.rows = StepTokens();
  spec.decode.launches.push_back(Launch(decode_kernel, kAttentionThreads, token_kv_heads, splits));
  spec.decode.launches.push_back(Launch(reduce_kernel, reduce_threads, token_heads));
  spec.decode.scratch_bytes = StepTokens();
  spec.decode.scratch_bytes.emplace_back(kvx::DimKind::Static,
                                         heads * (head_dim + 2) * int64_t{sizeof(float)}, 1);
  spec.decode.scratch_bytes.push_back(splits.front());
  spec.prefill.launches.push_back(
      Launch(prefill_kernel, kAttentionThreads,
             {kvx::SizeFactor(kvx::DimKind::Tokens, 0, static_cast<uint32_t>(tile_rows))},
             Static(kv_heads)));
  return spec;
}

}  // namespace kvjit::codegen::cuda
