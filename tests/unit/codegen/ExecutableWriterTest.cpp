// The executable writer on stories260K (GGUF) and on a tiny random GQA model
// with q/k/v bias (safetensors in two shards): the buffer verifies, the
// program has the expected instructions and shapes, every arena reference
// fits the arena, every weight reference lies inside its file with the
// bytes its checksum promises, and the KV layout matches the model. Then
// the errors: weights without a file, ops without an instruction.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "codegen/ExecutableWriter.h"
#include "codegen/cuda/CudaCodegen.h"
#include "runtime/exec/KvxTypes.h"
#include "frontend/model/HfModel.h"
#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ModelFile.h"
#include "gmock/gmock.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "passes/Pipeline.h"
#include "runtime/core/BuildInfo.h"
#include "runtime/schema/SchemaVersion.h"
#include "runtime/schema/kvx_generated.h"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/frontend/model/InMemoryWeights.h"
#include "tests/unit/frontend/huggingface/SafetensorsTestFiles.h"
#include "passes/registration/KvjitRegistration.h"

namespace kvjit::codegen {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using kvx::OpCode;
using safetensors::testing::F32Bytes;
using safetensors::testing::TempDir;
using safetensors::testing::TensorSpec;

constexpr int64_t kMaxTokens = 64;

// One layer of a Llama-family step program after the pipeline: the first
// op is the attention norm (rms_norm in layer 0, fused with the previous
// layer's residual add after that). fuse-projections makes q, k and v one
// Linear (unless they have biases) and gate and up another, whose column
// views the Copy and SwiGlu read.
std::vector<OpCode> LayerOpcodes(bool first_layer, bool qkv_bias) {
  std::vector<OpCode> opcodes = {first_layer ? OpCode::RmsNorm : OpCode::AddRmsNorm};
  const std::vector<OpCode> projections =
      qkv_bias ? std::vector<OpCode>{OpCode::Linear, OpCode::Linear, OpCode::Linear}
               : std::vector<OpCode>{OpCode::Linear};
  opcodes.insert(opcodes.end(), projections.begin(), projections.end());
  const std::vector<OpCode> rest = {
          OpCode::Copy, OpCode::Rope,                       // q heads
          OpCode::Copy, OpCode::Rope,                       // k heads
          OpCode::Copy,                                     // v heads
          OpCode::KvWrite, OpCode::KvAttention,
          OpCode::Copy, OpCode::Linear,                     // attention output
          OpCode::AddRmsNorm,                               // residual + ffn norm
          OpCode::Linear, OpCode::SwiGlu,                   // gate and up
          OpCode::Linear};                                  // down
  opcodes.insert(opcodes.end(), rest.begin(), rest.end());
  return opcodes;
}

std::vector<OpCode> ProgramOpcodes(int64_t layers, bool qkv_bias) {
  std::vector<OpCode> opcodes = {OpCode::Embedding};
  for (int64_t layer = 0; layer < layers; ++layer) {
    std::vector<OpCode> block = LayerOpcodes(layer == 0, qkv_bias);
    opcodes.insert(opcodes.end(), block.begin(), block.end());
  }
  // The last residual add, the logits rows, the final norm and projection.
  for (OpCode op : {OpCode::Elementwise, OpCode::GatherRows, OpCode::RmsNorm, OpCode::Linear}) {
    opcodes.push_back(op);
  }
  return opcodes;
}

std::vector<kvx::DimKind> Kinds(const kvx::TensorRef* ref) {
  std::vector<kvx::DimKind> kinds;
  for (const kvx::Dim* dim : *ref->shape()) kinds.push_back(dim->kind());
  return kinds;
}

// The most bytes `ref` takes in a step of `max_tokens` tokens: L <= T.
uint64_t MaxBytes(const kvx::TensorRef* ref, int64_t max_tokens) {
  uint64_t elements = 1;
  for (const kvx::Dim* dim : *ref->shape()) {
    switch (dim->kind()) {
      case kvx::DimKind::Static: elements *= dim->size(); break;
      case kvx::DimKind::Tokens:
      case kvx::DimKind::LogitsRows: elements *= max_tokens; break;
      default: ADD_FAILURE() << "an arena tensor sized by sequences";
    }
  }
  return elements * sizeof(float);
}

std::vector<uint8_t> ReadFileRange(const std::string& path, uint64_t offset, uint64_t size) {
  std::ifstream stream(path, std::ios::binary);
  stream.seekg(static_cast<std::streamoff>(offset));
  std::vector<uint8_t> bytes(size);
  stream.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  EXPECT_TRUE(stream) << "cannot read " << size << " bytes at " << offset << " of " << path;
  return bytes;
}

// The checks every executable of a Llama-family model passes.
void ExpectWellFormed(const kvx::Executable& executable, const model::ModelConfig& config) {
  EXPECT_EQ(executable.schema_version(), kvx::kSchemaVersion);
  ASSERT_NE(executable.compiler_version(), nullptr);
  EXPECT_EQ(executable.compiler_version()->str(), std::string(KvjitVersion()));
  EXPECT_EQ(executable.config()->num_layers(), config.num_layers);
  EXPECT_EQ(executable.config()->vocab_size(), config.vocab_size);

  const kvx::Program* program = executable.program();
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->max_tokens(), kMaxTokens);
  std::vector<OpCode> opcodes;
  for (const kvx::Instruction* instruction : *program->instructions()) {
    opcodes.push_back(instruction->op());
  }
  EXPECT_THAT(opcodes, ElementsAreArray(ProgramOpcodes(config.num_layers, config.qkv_bias)));

  // Every tensor reference points where it may: arena tensors inside the
  // arena, weights inside the weight table, inputs among the step inputs.
  const auto& weights = *executable.weights();
  const auto& files = *executable.weight_files();
  auto check_ref = [&](const kvx::TensorRef* ref) {
    switch (ref->kind()) {
      case kvx::BufferKind::Arena:
        if (ref->row_stride() == 0) {
          EXPECT_EQ(ref->offset() % 256, 0u);
          EXPECT_LE(ref->offset() + MaxBytes(ref, kMaxTokens), program->arena_bytes());
        } else {
          // A column view: its last row ends its width past the start.
          const uint64_t row_bytes = MaxBytes(ref, kMaxTokens) / kMaxTokens;
          EXPECT_EQ(ref->offset() % sizeof(float), 0u);
          EXPECT_LE(ref->offset() + (kMaxTokens - 1) * ref->row_stride() * sizeof(float) + row_bytes,
                    program->arena_bytes());
        }
        break;
      case kvx::BufferKind::Weight:
        ASSERT_LT(ref->index(), weights.size());
        EXPECT_EQ(ref->shape()->size(), weights.Get(ref->index())->shape()->size());
        break;
      case kvx::BufferKind::Input:
        EXPECT_LE(ref->index(), static_cast<uint32_t>(kvx::StepInput::MAX));
        break;
    }
  };
  int layer = 0;
  bool after_gather = false;
  for (const kvx::Instruction* instruction : *program->instructions()) {
    for (const kvx::TensorRef* ref : *instruction->inputs()) check_ref(ref);
    for (const kvx::TensorRef* ref : *instruction->outputs()) {
      EXPECT_EQ(ref->kind(), kvx::BufferKind::Arena);
      check_ref(ref);
      // Rows are the step's tokens until the logits rows are gathered.
      EXPECT_EQ(Kinds(ref).front(),
                after_gather || instruction->op() == OpCode::GatherRows ? kvx::DimKind::LogitsRows
                                                                        : kvx::DimKind::Tokens);
    }
    if (instruction->op() == OpCode::GatherRows) after_gather = true;
    if (instruction->op() == OpCode::KvAttention) {
      const kvx::KvAttentionParams* params = instruction->params_as_KvAttentionParams();
      ASSERT_NE(params, nullptr);
      EXPECT_EQ(params->layer(), static_cast<uint32_t>(layer++));
      EXPECT_FLOAT_EQ(params->scale(), 1.0f / std::sqrt(static_cast<float>(config.head_dim)));
      const auto& inputs = *instruction->inputs();
      ASSERT_EQ(inputs.size(), 5u);
      EXPECT_EQ(inputs.Get(2)->kind(), kvx::BufferKind::Input);
      EXPECT_EQ(inputs.Get(2)->index(), static_cast<uint32_t>(kvx::StepInput::SeqStarts));
      EXPECT_THAT(Kinds(inputs.Get(2)), ElementsAreArray({kvx::DimKind::SequencesPlusOne}));
      EXPECT_THAT(Kinds(inputs.Get(4)),
                  ElementsAreArray({kvx::DimKind::Sequences, kvx::DimKind::MaxBlocks}));
    }
  }
  EXPECT_EQ(layer, config.num_layers);
  const kvx::TensorRef* logits = program->logits();
  EXPECT_EQ(logits->kind(), kvx::BufferKind::Arena);
  EXPECT_EQ(logits->offset(), program->instructions()->rbegin()->outputs()->Get(0)->offset());
  EXPECT_THAT(Kinds(logits), ElementsAreArray({kvx::DimKind::LogitsRows, kvx::DimKind::Static}));
  EXPECT_EQ(logits->shape()->Get(1)->size(), config.vocab_size);

  // Weight bytes lie inside their files and hash to their checksums.
  for (const kvx::Weight* weight : weights) {
    ASSERT_LT(weight->file_index(), files.size());
    const kvx::WeightFile* file = files.Get(weight->file_index());
    EXPECT_TRUE(std::filesystem::path(file->path()->str()).is_absolute());
    EXPECT_EQ(std::filesystem::file_size(file->path()->str()), file->size_bytes());
    ASSERT_LE(weight->offset() + weight->size_bytes(), file->size_bytes()) << weight->name()->str();
    std::vector<uint8_t> bytes =
        ReadFileRange(file->path()->str(), weight->offset(), weight->size_bytes());
    EXPECT_EQ(runtime::Fnv1a64(bytes), weight->checksum()) << weight->name()->str();
  }

  const kvx::KvLayout* kv = executable.kv_layout();
  ASSERT_NE(kv, nullptr);
  const uint64_t slot_bytes = config.num_kv_heads * config.head_dim * sizeof(float);
  EXPECT_EQ(kv->num_layers(), config.num_layers);
  EXPECT_EQ(kv->num_kv_heads(), config.num_kv_heads);
  EXPECT_EQ(kv->head_dim(), config.head_dim);
  EXPECT_EQ(kv->block_size(), 16u);
  EXPECT_EQ(kv->key_type(), kvx::StorageType::F32);
  EXPECT_EQ(kv->value_type(), kvx::StorageType::F32);
  EXPECT_EQ(kv->bytes_per_block(), 2 * config.num_layers * slot_bytes * 16);
  EXPECT_EQ(kv->key_slot_stride_bytes(), slot_bytes);
  EXPECT_EQ(kv->value_slot_stride_bytes(), slot_bytes);
  EXPECT_EQ(kv->value_offset_bytes(), slot_bytes * 16);
  EXPECT_EQ(kv->layer_stride_bytes(), 2 * slot_bytes * 16);
  EXPECT_EQ(kv->default_blocks(), (uint64_t{8} << 20) / kv->bytes_per_block());
}

// Where this test's executables put the weights fuse-projections makes.
std::string TestSidecar() {
  return (std::filesystem::temp_directory_path() /
          ("kvjit-writer-test-" + std::to_string(::getpid()) + ".kvw"))
      .string();
}

const kvx::Executable& Verified(const flatbuffers::DetachedBuffer& buffer) {
  flatbuffers::Verifier verifier(buffer.data(), buffer.size());
  EXPECT_TRUE(kvx::VerifyExecutableBuffer(verifier));
  EXPECT_TRUE(kvx::ExecutableBufferHasIdentifier(buffer.data()));
  return *kvx::GetExecutable(buffer.data());
}

class ExecutableWriterTest : public ::testing::Test {
 protected:
  ExecutableWriterTest() {
    mlir::DialectRegistry registry;
    RegisterKvjitDialects(registry);
    context_.appendDialectRegistry(registry);
    context_.loadAllAvailableDialects();
  }
  ~ExecutableWriterTest() override { std::filesystem::remove(TestSidecar()); }

  // The model through the whole pipeline, ready for the writer.
  mlir::OwningOpRef<mlir::ModuleOp> Planned(const model::ModelConfig& config,
                                            const model::WeightSource& weights) {
    auto module = model::BuildDecoderModule(context_, config, weights);
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return nullptr;
    KvjitPipelineOptions options;
    options.maxTokensPerStep = kMaxTokens;
    options.kvMemoryMib = 8;
    mlir::PassManager pm(&context_);
    BuildKvjitPipeline(pm, options);
    EXPECT_TRUE(mlir::succeeded(pm.run(**module)));
    return std::move(*module);
  }

  // Parses `source` and plans it with plan-memory alone.
  mlir::OwningOpRef<mlir::ModuleOp> PlannedFromText(const std::string& source) {
    auto module = mlir::parseSourceString<mlir::ModuleOp>(source, &context_);
    EXPECT_TRUE(module);
    if (!module) return nullptr;
    PlanMemoryOptions options;
    options.maxTokensPerStep = kMaxTokens;
    options.kvMemoryMib = 8;
    mlir::PassManager pm(&context_);
    pm.addPass(createPlanMemory(options));
    EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
    return module;
  }

  mlir::MLIRContext context_;
};

// The tiny GQA model's weights as a safetensors checkpoint in two shards,
// under their GGUF names (which the importer keeps as they are).
class TinyCheckpoint {
 public:
  TinyCheckpoint() : config_(model::TinyGqaConfig()) {
    model::InMemoryWeights weights = model::RandomWeightsFor(config_, 11);
    std::map<std::string, std::vector<TensorSpec>> shards;
    index_json_ = "{\"weight_map\": {";
    for (size_t i = 0; i < weights.weights().size(); ++i) {
      const model::WeightInfo& weight = weights.weights()[i];
      const std::string shard = i % 2 == 0 ? "model-00001-of-00002.safetensors"
                                           : "model-00002-of-00002.safetensors";
      absl::Span<const uint8_t> bytes = weights.Bytes(weight);
      shards[shard].push_back(
          {weight.name, "F32", weight.shape,
           std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())});
      absl::StrAppend(&index_json_, i == 0 ? "" : ", ", "\"", weight.name, "\": \"",
                      shard, "\"");
    }
    absl::StrAppend(&index_json_, "}}");
    for (const auto& [name, specs] : shards) {
      dir_.WriteFile(name, safetensors::testing::SerializeSafetensors(specs));
    }
    dir_.WriteFile("model.safetensors.index.json", index_json_);
  }

  absl::StatusOr<model::ModelFile> Open() const {
    model::ModelFile model;
    model.path = dir_.path();
    model.format = "Hugging Face safetensors";
    model.config = config_;
    auto checkpoint = safetensors::SafetensorsModel::Open(dir_.path());
    if (!checkpoint.ok()) return checkpoint.status();
    model.safetensors = std::make_unique<safetensors::SafetensorsModel>(std::move(*checkpoint));
    model.weights = std::make_unique<model::SafetensorsWeightSource>(*model.safetensors);
    return model;
  }

  const model::ModelConfig& config() const { return config_; }

 private:
  model::ModelConfig config_;
  TempDir dir_;
  std::string index_json_;
};

// A byte-level BPE vocabulary of 40 tokens with two merges.
tokenizer::Vocabulary TinyVocabulary() {
  tokenizer::Vocabulary vocabulary;
  vocabulary.model = tokenizer::TokenizerModel::kByteLevelBpe;
  vocabulary.pre_tokenizer = tokenizer::PreTokenizer::kQwen2;
  for (int i = 0; i < 38; ++i) vocabulary.tokens.push_back(std::string(1, static_cast<char>('A' + i)));
  vocabulary.tokens.push_back("AB");
  vocabulary.tokens.push_back("<|im_end|>");
  vocabulary.token_types.assign(39, tokenizer::TokenType::kNormal);
  vocabulary.token_types.push_back(tokenizer::TokenType::kControl);
  vocabulary.merges = {{"A", "B"}, {"AB", "C"}};
  vocabulary.eos_id = 39;
  vocabulary.end_of_turn_id = 39;
  return vocabulary;
}

TEST_F(ExecutableWriterTest, Stories260K) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "models/stories260K.gguf is not in the shared folder";
  auto model = model::OpenModelFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto tokenizer = model::LoadTokenizer(*model);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto module = Planned(model->config, *model->weights);
  ASSERT_TRUE(module);

  auto buffer = WriteExecutable(*module, *model, (*tokenizer)->vocabulary(), "", TestSidecar());
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const kvx::Executable& executable = Verified(*buffer);
  ExpectWellFormed(executable, model->config);

  // The GGUF, then the sidecar of the fused projections' weights.
  ASSERT_EQ(executable.weight_files()->size(), 2u);
  EXPECT_EQ(executable.weight_files()->Get(0)->path()->str(),
            std::filesystem::absolute(path).lexically_normal().string());
  EXPECT_EQ(executable.weight_files()->Get(1)->path()->str(), TestSidecar());
  EXPECT_EQ(std::filesystem::file_size(TestSidecar()), executable.weight_files()->Get(1)->size_bytes());
  // 6 tensors per layer (2 of them q+k+v and gate+up, in the sidecar), the
  // embedding, the final norm and the output.
  EXPECT_EQ(executable.weights()->size(), 6u * 5 + 3);
  int in_sidecar = 0;
  for (const kvx::Weight* weight : *executable.weights()) {
    in_sidecar += weight->file_index() == 1;
    EXPECT_EQ(weight->file_index() == 1, absl::StrContains(weight->name()->str(), "+"))
        << weight->name()->str();
  }
  EXPECT_EQ(in_sidecar, 2 * 5);
  const kvx::Weight* embedding = executable.weights()->Get(0);
  EXPECT_EQ(embedding->name()->str(), "token_embd.weight");
  EXPECT_EQ(embedding->storage(), kvx::StorageType::F32);
  EXPECT_THAT(*embedding->shape(), ElementsAreArray({512, 64}));
  EXPECT_EQ(embedding->offset(), model->gguf()->FindTensor("token_embd.weight")->file_offset);

  const kvx::Instruction* first = executable.program()->instructions()->Get(0);
  EXPECT_EQ(first->inputs()->Get(0)->kind(), kvx::BufferKind::Weight);
  EXPECT_EQ(first->inputs()->Get(1)->kind(), kvx::BufferKind::Input);
  EXPECT_EQ(first->inputs()->Get(1)->index(), static_cast<uint32_t>(kvx::StepInput::Tokens));
  const kvx::Instruction* rope = executable.program()->instructions()->Get(6);
  ASSERT_EQ(rope->op(), OpCode::Rope);
  const kvx::RopeParams* rope_params = rope->params_as_RopeParams();
  ASSERT_NE(rope_params, nullptr);
  EXPECT_EQ(rope_params->style(), kvx::RopeStyle::Interleaved);
  EXPECT_EQ(rope_params->rotary_dim(), 8u);
  EXPECT_FLOAT_EQ(rope_params->theta(), 10000.0f);
  EXPECT_THAT(Kinds(rope->outputs()->Get(0)),
              ElementsAreArray({kvx::DimKind::Tokens, kvx::DimKind::Static, kvx::DimKind::Static}));

  const kvx::Tokenizer* tokens = executable.tokenizer();
  EXPECT_EQ(tokens->kind(), kvx::TokenizerKind::SentencePiece);
  EXPECT_EQ(tokens->tokens()->size(), 512u);
  EXPECT_EQ(tokens->scores()->size(), 512u);
  EXPECT_EQ(tokens->bos_id(), (*tokenizer)->bos_id());
}

TEST_F(ExecutableWriterTest, CarriesTheCudaModuleOfItsProgram) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "models/stories260K.gguf is not in the shared folder";
  auto model = model::OpenModelFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto tokenizer = model::LoadTokenizer(*model);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto module = Planned(model->config, *model->weights);
  ASSERT_TRUE(module);
  auto cpu = WriteExecutable(*module, *model, (*tokenizer)->vocabulary(), "", TestSidecar());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(Verified(*cpu).cuda(), nullptr);

  auto kernels = cuda::GenerateCudaModule(Verified(*cpu));
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  cuda::CudaBinary binary;  // what NVRTC would give, for the writer's sake
  binary.arch = 86;
  binary.cubin = {0x7f, 'E', 'L', 'F'};
  binary.ptx = ".target sm_86";
  binary.nvrtc_version = 13000;
  binary.options = {"-default-device"};
  const CudaSection section{*kernels, binary};
  auto with_cuda = WriteExecutable(*module, *model, (*tokenizer)->vocabulary(), "", TestSidecar(), &section);
  ASSERT_TRUE(with_cuda.ok()) << with_cuda.status();
  const kvx::CudaModule* cuda = Verified(*with_cuda).cuda();
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->arch(), 86u);
  EXPECT_EQ(cuda->ptx()->str(), ".target sm_86");
  EXPECT_EQ(cuda->source()->str(), kernels->source);
  EXPECT_EQ(cuda->kernels()->size(), kernels->kernel_names.size());
  EXPECT_EQ(cuda->instructions()->size(), Verified(*with_cuda).program()->instructions()->size());
  EXPECT_EQ(cuda->prefill_min_rows(), kernels->prefill_min_rows);
  EXPECT_EQ(cuda->options()->Get(0)->str(), "-default-device");

  kernels->instructions.pop_back();
  auto mismatched = WriteExecutable(*module, *model, (*tokenizer)->vocabulary(), "", TestSidecar(), &section);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_THAT(mismatched.status().message(), HasSubstr("instructions for a program of"));
}

TEST_F(ExecutableWriterTest, TinyShardedCheckpoint) {
  TinyCheckpoint checkpoint;
  auto model = checkpoint.Open();
  ASSERT_TRUE(model.ok()) << model.status();
  auto module = Planned(model->config, *model->weights);
  ASSERT_TRUE(module);

  auto buffer = WriteExecutable(*module, *model, TinyVocabulary(), "{{ messages }}", TestSidecar());
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const kvx::Executable& executable = Verified(*buffer);
  ExpectWellFormed(executable, checkpoint.config());

  // The two shards and the sidecar of the fused gate and up weights.
  EXPECT_EQ(executable.weight_files()->size(), 3u);
  // Tied embeddings: the output projection reads token_embd.weight again;
  // per layer, one weight replaces gate's and up's (q, k, v have biases).
  EXPECT_EQ(executable.weights()->size(),
            model->weights->weights().size() - checkpoint.config().num_layers);
  std::vector<uint32_t> files_used;
  for (const kvx::Weight* weight : *executable.weights()) files_used.push_back(weight->file_index());
  EXPECT_THAT(files_used, ::testing::Contains(0u));
  EXPECT_THAT(files_used, ::testing::Contains(1u));

  // q, k and v carry their bias as a third input.
  const kvx::Instruction* q = executable.program()->instructions()->Get(2);
  ASSERT_EQ(q->op(), OpCode::Linear);
  ASSERT_EQ(q->inputs()->size(), 3u);
  EXPECT_EQ(executable.weights()->Get(q->inputs()->Get(2)->index())->name()->str(),
            "blk.0.attn_q.bias");
  const kvx::Instruction* output = *executable.program()->instructions()->rbegin();
  EXPECT_EQ(output->inputs()->Get(1)->index(), 0u);  // token_embd.weight

  const kvx::Tokenizer* tokens = executable.tokenizer();
  EXPECT_EQ(tokens->kind(), kvx::TokenizerKind::ByteLevelBpe);
  EXPECT_EQ(tokens->pre_tokenizer()->str(), "qwen2");
  ASSERT_EQ(tokens->merge_lefts()->size(), 2u);
  ASSERT_EQ(tokens->merge_rights()->size(), 2u);
  EXPECT_EQ(tokens->merge_lefts()->Get(1)->str(), "AB");
  EXPECT_EQ(tokens->merge_rights()->Get(1)->str(), "C");
  EXPECT_EQ(tokens->token_types()->Get(39), 3);
  EXPECT_EQ(tokens->eot_id(), 39);
  EXPECT_EQ(tokens->chat_template()->str(), "{{ messages }}");
  EXPECT_EQ(executable.config()->rope_style(), kvx::RopeStyle::NeoX);
  EXPECT_TRUE(executable.config()->qkv_bias());
}

TEST_F(ExecutableWriterTest, InMemoryWeightsHaveNoFileToReference) {
  model::ModelFile model;
  model.path = "in-memory";
  model.config = model::TinyGqaConfig();
  model.weights = std::make_unique<model::InMemoryWeights>(model::RandomWeightsFor(model.config, 3));
  auto module = Planned(model.config, *model.weights);
  ASSERT_TRUE(module);
  auto buffer = WriteExecutable(*module, model, TinyVocabulary(), "", TestSidecar());
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(buffer.status().message()),
              HasSubstr("tensor 'token_embd.weight' is not in a file"));
}

// A step function with the contract's arguments, whose body after the
// embedding is `body` (reading %x, returning %y).
std::string StepFunction(const std::string& body) {
  return R"(
    tfm.param @token_embd.weight : tensor<40x16xf32> storage <f32>
    func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %seq_starts: tensor<?xi32>,
                    %context_lens: tensor<?xi32>, %slot_mapping: tensor<?xi32>,
                    %block_tables: tensor<?x?xi32>, %logits_rows: tensor<?xi32>,
                    %cache: !kv.cache<layers = 2, kv_heads = 2, head_dim = 4, block_size = 16, key_type = f32, value_type = f32>)
        -> tensor<?x16xf32> attributes {kv.step_function} {
      %table = tfm.weight @token_embd.weight : tensor<40x16xf32>
      %x = tfm.embedding %table, %tokens : (tensor<40x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
  )" + body + R"(
      return %y : tensor<?x16xf32>
    })";
}

TEST_F(ExecutableWriterTest, ElementwiseChainIsEncodedStepByStep) {
  TinyCheckpoint checkpoint;
  auto model = checkpoint.Open();
  ASSERT_TRUE(model.ok()) << model.status();
  auto module = PlannedFromText(StepFunction(R"(
      %x2 = tfm.embedding %table, %positions : (tensor<40x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
      %y = kernel.fusion elementwise(%x, %x2) : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32> {
      ^bb0(%a: tensor<?x16xf32>, %b: tensor<?x16xf32>):
        %s = tfm.scale %a, 2.5 : tensor<?x16xf32>
        %t = tfm.add %b, %s : tensor<?x16xf32>
        %u = tfm.gelu %t {approximate_tanh} : tensor<?x16xf32>
        %v = tfm.tanh %u : tensor<?x16xf32>
        kernel.yield %v : tensor<?x16xf32>
      })"));
  ASSERT_TRUE(module);
  auto buffer = WriteExecutable(*module, *model, TinyVocabulary(), "", TestSidecar());
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const kvx::Program* program = Verified(*buffer).program();
  ASSERT_EQ(program->instructions()->size(), 3u);
  const kvx::Instruction* chain = program->instructions()->Get(2);
  ASSERT_EQ(chain->op(), OpCode::Elementwise);
  EXPECT_EQ(chain->inputs()->size(), 2u);
  ASSERT_NE(chain->params_as_ElementwiseParams(), nullptr);
  const auto& chain_steps = *chain->params_as_ElementwiseParams()->steps();
  ASSERT_EQ(chain_steps.size(), 4u);
  const kvx::ElementwiseStep* scale = chain_steps.Get(0);
  EXPECT_EQ(scale->op(), kvx::ElementwiseOpCode::Scale);
  EXPECT_EQ(scale->lhs(), 0);
  EXPECT_FLOAT_EQ(scale->factor(), 2.5f);
  const kvx::ElementwiseStep* add = chain_steps.Get(1);
  EXPECT_EQ(add->op(), kvx::ElementwiseOpCode::Add);
  EXPECT_EQ(add->lhs(), 1);
  EXPECT_EQ(add->rhs(), -1);
  const kvx::ElementwiseStep* gelu = chain_steps.Get(2);
  EXPECT_EQ(gelu->op(), kvx::ElementwiseOpCode::GeluTanh);
  EXPECT_EQ(gelu->lhs(), -2);
  const kvx::ElementwiseStep* tanh = chain_steps.Get(3);
  EXPECT_EQ(tanh->op(), kvx::ElementwiseOpCode::Tanh);
  EXPECT_EQ(tanh->lhs(), -3);
  EXPECT_EQ(program->logits()->offset(), chain->outputs()->Get(0)->offset());
  // Only the weights the program reads are in the table.
  ASSERT_EQ(Verified(*buffer).weights()->size(), 1u);
}

// A pipeline without fuse-elementwise leaves elementwise ops outside any
// fusion: each becomes an elementwise instruction of one step.
TEST_F(ExecutableWriterTest, UnfusedElementwiseOpsAreOneInstructionEach) {
  TinyCheckpoint checkpoint;
  auto model = checkpoint.Open();
  ASSERT_TRUE(model.ok()) << model.status();
  auto module = PlannedFromText(StepFunction(R"(
      %s = tfm.scale %x, 2.5 : tensor<?x16xf32>
      %y = tfm.mul %s, %x : tensor<?x16xf32>)"));
  ASSERT_TRUE(module);
  auto buffer = WriteExecutable(*module, *model, TinyVocabulary(), "", TestSidecar());
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const kvx::Program* program = Verified(*buffer).program();
  ASSERT_EQ(program->instructions()->size(), 3u);
  const kvx::Instruction* scale = program->instructions()->Get(1);
  ASSERT_EQ(scale->op(), OpCode::Elementwise);
  EXPECT_EQ(scale->inputs()->size(), 1u);
  ASSERT_NE(scale->params_as_ElementwiseParams(), nullptr);
  const auto& scale_steps = *scale->params_as_ElementwiseParams()->steps();
  ASSERT_EQ(scale_steps.size(), 1u);
  EXPECT_EQ(scale_steps.Get(0)->op(), kvx::ElementwiseOpCode::Scale);
  EXPECT_EQ(scale_steps.Get(0)->lhs(), 0);
  EXPECT_FLOAT_EQ(scale_steps.Get(0)->factor(), 2.5f);
  const kvx::Instruction* mul = program->instructions()->Get(2);
  ASSERT_EQ(mul->op(), OpCode::Elementwise);
  ASSERT_EQ(mul->inputs()->size(), 2u);
  EXPECT_EQ(mul->inputs()->Get(0)->offset(), scale->outputs()->Get(0)->offset());
  ASSERT_NE(mul->params_as_ElementwiseParams(), nullptr);
  const auto& mul_steps = *mul->params_as_ElementwiseParams()->steps();
  ASSERT_EQ(mul_steps.size(), 1u);
  EXPECT_EQ(mul_steps.Get(0)->op(), kvx::ElementwiseOpCode::Mul);
  EXPECT_EQ(mul_steps.Get(0)->lhs(), 0);
  EXPECT_EQ(mul_steps.Get(0)->rhs(), 1);
}

TEST_F(ExecutableWriterTest, OpWithoutInstructionIsNamed) {
  TinyCheckpoint checkpoint;
  auto model = checkpoint.Open();
  ASSERT_TRUE(model.ok()) << model.status();
  auto module = PlannedFromText(StepFunction(R"(
      %y = tfm.softmax %x {axis = -1 : i64} : tensor<?x16xf32>)"));
  ASSERT_TRUE(module);
  auto buffer = WriteExecutable(*module, *model, TinyVocabulary(), "", TestSidecar());
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(buffer.status().message()),
              HasSubstr("'tfm.softmax' at loc("));
  EXPECT_THAT(std::string(buffer.status().message()), HasSubstr("has no instruction"));
}

TEST_F(ExecutableWriterTest, CausalMaskOutsideAttentionIsUnimplemented) {
  TinyCheckpoint checkpoint;
  auto model = checkpoint.Open();
  ASSERT_TRUE(model.ok()) << model.status();
  auto module = PlannedFromText(StepFunction(R"(
      %y = kernel.fusion elementwise(%x) : (tensor<?x16xf32>) -> tensor<?x16xf32> {
      ^bb0(%a: tensor<?x16xf32>):
        %m = tfm.causal_mask %a : tensor<?x16xf32>
        kernel.yield %m : tensor<?x16xf32>
      })"));
  ASSERT_TRUE(module);
  auto buffer = WriteExecutable(*module, *model, TinyVocabulary(), "", TestSidecar());
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(buffer.status().message()), HasSubstr("'tfm.causal_mask' at loc("));
  EXPECT_THAT(std::string(buffer.status().message()), HasSubstr("fuse-attention"));
}

TEST_F(ExecutableWriterTest, UnplannedModuleIsRefused) {
  TinyCheckpoint checkpoint;
  auto model = checkpoint.Open();
  ASSERT_TRUE(model.ok()) << model.status();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(StepFunction(R"(
      %y = tfm.silu %x : tensor<?x16xf32>)"), &context_);
  ASSERT_TRUE(module);
  auto buffer = WriteExecutable(*module, *model, TinyVocabulary(), "", TestSidecar());
  ASSERT_FALSE(buffer.ok());
  EXPECT_THAT(std::string(buffer.status().message()), HasSubstr("run plan-memory first"));
}

TEST(WriteExecutableFileTest, WritesTheBufferAndNamesThePathOnFailure) {
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(builder.CreateString("executable bytes"));
  flatbuffers::DetachedBuffer buffer = builder.Release();
  TempDir dir;
  const std::string path = dir.path() + "/model.kvx";
  ASSERT_TRUE(WriteExecutableFile(buffer, path).ok());
  std::vector<uint8_t> written = ReadFileRange(path, 0, buffer.size());
  EXPECT_TRUE(std::equal(written.begin(), written.end(), buffer.data()));
  EXPECT_EQ(std::filesystem::file_size(path), buffer.size());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);

  const std::string missing = dir.path() + "/no/such/dir/model.kvx";
  absl::Status status = WriteExecutableFile(buffer, missing);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr(missing));
}

TEST(Fnv1a64Test, KnownValues) {
  EXPECT_EQ(runtime::Fnv1a64({}), 14695981039346656037ull);
  const std::string a = "a";
  EXPECT_EQ(runtime::Fnv1a64({reinterpret_cast<const uint8_t*>(a.data()), a.size()}), 0xaf63dc4c8601ec8cull);
}

}  // namespace
}  // namespace kvjit::codegen
