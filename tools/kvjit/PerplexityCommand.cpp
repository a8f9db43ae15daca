// kvjit perplexity MODEL_OR_KVX -f TEXT: the model's perplexity over a text,
// chunked as llama.cpp's llama-perplexity chunks it (PerplexityChunks.h), so
// that the two tools' figures compare. --save_logits keeps every scored
// distribution; --kl_divergence compares this run's with such a file (a
// quantized cache against the f32 cache, say). stdout carries the figures,
// stderr what was run and how fast.

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/generation/RunnerFactory.h"
#include "runtime/tokenizer/ExecutableTokenizer.h"
#include "tools/kvjit/CompileOnTheFly.h"
#include "tools/kvjit/LogitsFile.h"
#include "tools/kvjit/Perplexity.h"
#include "tools/kvjit/PerplexityChunks.h"
#include "tools/kvjit/SharedFlags.h"
#include "tools/kvjit/Subcommand.h"

ABSL_FLAG(std::string, f, "", "the text file to evaluate (UTF-8), read whole");
ABSL_FLAG(int64_t, ctx, 512, "tokens per chunk (llama-perplexity's -c); the second half is scored");
ABSL_FLAG(int64_t, chunks, -1, "evaluate at most this many chunks (-1: every whole chunk)");
ABSL_FLAG(std::string, save_logits, "",
          "write every scored token's distribution to this file, for a later --kl_divergence");
ABSL_FLAG(std::string, kl_divergence, "",
          "compare this run's distributions with those --save_logits wrote to this file (the same "
          "model's vocabulary over the same text and --ctx; its first --chunks where fewer): KL "
          "divergence, top-token agreement and both perplexities");

namespace kvjit::cli {
namespace {

// The text file's contents but for one newline at its end, which
// llama.cpp's -f drops: the two tools then count the same tokens.
absl::StatusOr<std::string> ReadText(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("-f TEXT names the text file to evaluate");
  std::ifstream file(path, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  if (!file) return absl::NotFoundError(absl::StrCat(path, ": cannot read the text file"));
  std::string text = contents.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// The text's tokens as llama.cpp's perplexity tool takes them: control
// tokens' spellings read as text, BOS in front where the model adds one,
// and no EOS after (llama-perplexity refuses a model that adds one).
absl::StatusOr<std::vector<int32_t>> TokenizeText(const tokenizer::Tokenizer& tokenizer,
                                                  const std::string& path, const std::string& text) {
  absl::StatusOr<std::vector<int32_t>> encoded =
      tokenizer.Encode(text, /*add_special=*/false, /*parse_special=*/false);
  if (!encoded.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", encoded.status().message()));
  std::vector<int32_t> tokens;
  if (tokenizer.vocabulary().add_bos_token) tokens.push_back(tokenizer.bos_id());
  tokens.insert(tokens.end(), encoded->begin(), encoded->end());
  return tokens;
}

void PrintKlDivergence(const KlDivergenceAccumulator& kl, const std::string& saved_path) {
  const Estimate ppl = kl.Perplexity();
  const Estimate saved_ppl = kl.SavedPerplexity();
  const Estimate log_ratio = kl.LogPerplexityRatio();
  const Estimate divergence = kl.MeanKlDivergence();
  const Estimate same_top = kl.SameTopTokenFraction();
  const std::vector<double> sorted = kl.SortedKlDivergences();
  std::printf("\nKL divergence from %s over %lld tokens:\n", saved_path.c_str(),
              static_cast<long long>(kl.count()));
  std::printf("PPL (this run)        : %.6f +/- %.6f\n", ppl.value, ppl.uncertainty);
  std::printf("PPL (saved run)       : %.6f +/- %.6f\n", saved_ppl.value, saved_ppl.uncertainty);
  std::printf("ln(PPL / PPL saved)   : %.6f +/- %.6f\n", log_ratio.value, log_ratio.uncertainty);
  std::printf("Mean KLD              : %.6f +/- %.6f\n", divergence.value, divergence.uncertainty);
  std::printf("KLD percentiles       : max %.6f, 99.9%% %.6f, 99%% %.6f, 95%% %.6f, 90%% %.6f, "
              "median %.6f, 10%% %.6f, min %.6f\n",
              sorted.back(), Percentile(sorted, 0.999), Percentile(sorted, 0.99),
              Percentile(sorted, 0.95), Percentile(sorted, 0.90), Percentile(sorted, 0.5),
              Percentile(sorted, 0.10), sorted.front());
  std::printf("Same top token        : %.3f +/- %.3f %%\n", 100 * same_top.value,
              100 * same_top.uncertainty);
}

absl::Status RunPerplexity(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL_OR_KVX argument");
  const std::string text_path = absl::GetFlag(FLAGS_f);
  KVJIT_ASSIGN_OR_RETURN(const std::string text, ReadText(text_path));
  KVJIT_ASSIGN_OR_RETURN(std::string kvx_path,
                         ExecutablePathFor(arguments[0], CompileOptionsFromFlags()));
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> executable,
                         runtime::Executable::Load(kvx_path, LoadOptionsFromFlags()));
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> tokenizer,
                         tokenizer::TokenizerFromExecutable(executable->root()));
  KVJIT_ASSIGN_OR_RETURN(const std::vector<int32_t> tokens,
                         TokenizeText(*tokenizer, text_path, text));
  KVJIT_ASSIGN_OR_RETURN(
      const ChunkPlan plan,
      PlanChunks(text_path, static_cast<int64_t>(tokens.size()), absl::GetFlag(FLAGS_ctx),
                 absl::GetFlag(FLAGS_chunks), executable->config().context_length()));

  const int64_t block_size = executable->kv_layout().block_size();
  KVJIT_ASSIGN_OR_RETURN(
      std::unique_ptr<runtime::StepRunner> runner,
      runtime::CreateStepRunner(*executable, (plan.ctx - 1 + block_size - 1) / block_size,
                                absl::GetFlag(FLAGS_threads), DeviceFromFlags(*executable)));

  const LogitsFileShape shape{static_cast<int32_t>(runner->vocab_size()), plan.ctx, plan.first,
                              plan.chunks};
  const absl::Span<const int32_t> evaluated =
      absl::MakeConstSpan(tokens).subspan(0, plan.chunks * plan.ctx);
  std::optional<LogitsFileReader> saved;
  if (const std::string path = absl::GetFlag(FLAGS_kl_divergence); !path.empty()) {
    KVJIT_ASSIGN_OR_RETURN(saved, LogitsFileReader::Open(path));
    KVJIT_RETURN_IF_ERROR(saved->CheckSameRun(shape, evaluated));
  }
  std::optional<LogitsFileWriter> writer;
  if (const std::string path = absl::GetFlag(FLAGS_save_logits); !path.empty()) {
    KVJIT_ASSIGN_OR_RETURN(writer, LogitsFileWriter::Create(path, shape, evaluated));
  }

  const std::optional<int32_t> bos =
      tokenizer->vocabulary().add_bos_token ? std::optional<int32_t>(tokenizer->bos_id())
                                            : std::nullopt;
  std::fprintf(stderr,
               "perplexity: %s: %zu tokens; %lld chunks of %lld, each scored over its last %lld "
               "predictions%s\n",
               text_path.c_str(), tokens.size(), static_cast<long long>(plan.chunks),
               static_cast<long long>(plan.ctx), static_cast<long long>(plan.scored_per_chunk()),
               bos ? ", BOS first" : "");
  PerplexityAccumulator perplexity;
  KlDivergenceAccumulator kl;
  int64_t saved_row = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t chunk = 0; chunk < plan.chunks; ++chunk) {
    const absl::Span<const int32_t> originals = evaluated.subspan(chunk * plan.ctx, plan.ctx);
    KVJIT_RETURN_IF_ERROR(EvaluateChunk(
        *runner, ChunkInput(tokens, plan, chunk, bos), plan.first,
        [&](int64_t position, absl::Span<const float> logits) -> absl::Status {
          const int32_t target = originals[position + 1];
          perplexity.Add(ScoreRow(logits, target).negative_log_likelihood);
          if (writer) KVJIT_RETURN_IF_ERROR(writer->AppendRow(logits, target));
          if (saved) {
            KVJIT_ASSIGN_OR_RETURN(const SavedRow row, saved->Row(saved_row++));
            kl.Add(row.log_probs, row.negative_log_likelihood, row.top_token, logits, target);
          }
          return absl::OkStatus();
        }));
    std::printf("[%lld]%.4f,", static_cast<long long>(chunk + 1), perplexity.Perplexity().value);
    std::fflush(stdout);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const Estimate estimate = perplexity.Perplexity();
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", estimate.value, estimate.uncertainty);
  if (saved) PrintKlDivergence(kl, absl::GetFlag(FLAGS_kl_divergence));
  if (writer) KVJIT_RETURN_IF_ERROR(writer->Finish());
  std::fflush(stdout);
  std::fprintf(stderr, "perplexity: %lld tokens evaluated in %.2f s (%.1f tokens/s)\n",
               static_cast<long long>(plan.chunks * (plan.ctx - 1)), seconds,
               plan.chunks * (plan.ctx - 1) / seconds);
  return absl::OkStatus();
}

}  // namespace

Subcommand PerplexityCommand() {
  return {"perplexity",
          "a model's perplexity over a text file, chunked as llama.cpp's llama-perplexity, and "
          "its KL divergence from a saved run",
          "MODEL_OR_KVX -f TEXT [--ctx 512] [--chunks N] [--save_logits FILE] "
          "[--kl_divergence FILE] [--cache_dtype TYPE] [--cache_dtype_k TYPE] [--cache_dtype_v TYPE] [--device cpu|cuda]",
          "tools/kvjit/PerplexityCommand.cpp", RunPerplexity,
          {"tp", "block_size", "cache_dtype", "cache_dtype_k", "cache_dtype_v", "cache_rotation", "max_tokens_per_step", "kv_memory_mib", "device",
           "verify_weights", "threads"}};
}

}  // namespace kvjit::cli
