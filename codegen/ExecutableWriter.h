#ifndef KVJIT_CODEGEN_EXECUTABLEWRITER_H_
#define KVJIT_CODEGEN_EXECUTABLEWRITER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "codegen/cuda/CudaModuleSpec.h"
#include "codegen/weights/WeightMaterializer.h"
#include "flatbuffers/flatbuffers.h"
#include "frontend/model/ModelFile.h"
#include "runtime/tokenizer/Vocabulary.h"
#include "mlir/IR/BuiltinOps.h"

// Serialises the planned program into the executable's FlatBuffer (.kvx):
// the last step of `kvjit compile`, and the only code that speaks both the
// compiler's IR and the runtime's schema (runtime/schema/kvx.fbs, whose
// comments are the contract). Where weights lie is weights/SourceWeights'
// job; the weights the compiler makes are weights/WeightMaterializer's.
namespace kvjit::codegen {

// The CUDA module of an executable: the kernels generated for the program
// the writer writes (from the executable it wrote for the same module
// without one) and NVRTC's output for them.
struct CudaSection {
  const cuda::CudaModuleSpec& module;
  const cuda::CudaBinary& binary;
};

// Serialises the planned step function of `planned_module` (what
// BuildKvjitPipeline leaves: one func with `kv.step_function` and plan-memory's
// `kernel.arena` and `kv.layout` attributes) into a kvx::Executable, with the model's config, its
// tokenizer and a table of the weights the program reads.
//
// How the IR maps onto the schema:
//   - Each op of the body, in order, lowers itself through its
//     ExecutableLowerableOpInterface (codegen/lowering, one file per
//     dialect) into one Instruction; `tfm.weight` ops become weight
//     references and emit nothing. An op without the interface (matmul,
//     softmax, an unfused attention, ...) or a fusion body no kernel
//     implements is an Unimplemented error naming the op and its location.
//   - Block arguments are Input refs (index = kvx::StepInput), op results
//     Arena refs at their `kernel.arena_offsets` entry, weights Weight refs (index
//     into Executable.weights, in order of first use).
//   - A dynamic dimension of a step tensor is Tokens where its rows come from
//     the step's tokens and LogitsRows from a `tfm.gather_rows` on; seq_starts
//     is [SequencesPlusOne], block_tables [Sequences, MaxBlocks].
//   - Weights stay in the model's files: the GGUF file itself, or each
//     safetensors shard, referenced by absolute path and byte offset, with a
//     64-bit FNV-1a checksum of their bytes (SourceWeights). A model whose
//     weights are not in such a file (an in-memory WeightSource) is a
//     FailedPrecondition error.
//   - A weight the compiler derives (a `tfm.param ... concat` of
//     fuse-projections, a `shifted` one, one in another layout) is made by
//     the WeightMaterializer into a sidecar weight file (kvx.fbs says its
//     layout) named `sidecar.path` (SidecarPathFor the executable's path:
//     beside it) and written there or at `sidecar.staged_at`, the
//     executable's last file. A program without such weights writes none,
//     and may be given an empty path.
//   - A `tfm.slice_columns` emits nothing: its result is a reference into
//     the viewed rows with their `row_stride`, which only Copy, SwiGlu and
//     Elementwise may read (an Unimplemented error elsewhere).
// The buffer carries the file identifier "KVJX" and passes
// kvx::VerifyExecutableBuffer.
//
// A program of one rank of a model split by shard-tensor-parallel (its module
// has `dist.ranks` and `dist.rank`) carries that in `tensor_parallel`; rank
// 0's also holds `other_ranks`, the executables of ranks 1 to N - 1, nested.
//
// Where `cuda` is set, the executable also carries its CUDA module (an
// InvalidArgument error where its instructions are not the program's).
// Ranks 1 to N - 1's executables, which rank 0's holds.
using OtherRanks = std::vector<const flatbuffers::DetachedBuffer*>;

absl::StatusOr<flatbuffers::DetachedBuffer> WriteExecutable(
    mlir::ModuleOp planned_module, const model::ModelFile& model,
    const tokenizer::Vocabulary& vocabulary, const std::string& chat_template,
    const SidecarTarget& sidecar, const CudaSection* cuda = nullptr,
    const OtherRanks& other_ranks = {});

// Writes `executable` to `path` through a temporary file beside it and a
// rename, so that readers never see half a file; errors name the path.
absl::Status WriteExecutableFile(const flatbuffers::DetachedBuffer& executable,
                                 const std::string& path);

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_EXECUTABLEWRITER_H_
