// kvjit-cuda-bench MODEL.kvx: the CUDA step runner's speed on made-up
// prompts: time to first token and prefill tokens/s, then decode tokens/s and
// time per output token at each batch size (every sequence decoding one
// token per step, as continuous batching does at steady state). A table on
// stderr and one JSON object per batch size on stdout, with the share of the
// memory bandwidth a decode step uses (--peak_bandwidth_tb_s).
//
// Runtime only (no compiler): compile the model first with
// `kvjit compile MODEL --target cuda -o MODEL.kvx`.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cuda/CudaStepRunner.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepTraffic.h"

ABSL_FLAG(int64_t, prompt_tokens, 128, "tokens in each sequence's prompt");
ABSL_FLAG(int64_t, gen_tokens, 64, "decode steps timed, one token per sequence each");
ABSL_FLAG(std::string, batch, "1,64", "batch sizes (sequences decoding together), comma-separated");
ABSL_FLAG(int, device, 0, "the GPU (cuda:N)");
ABSL_FLAG(double, peak_bandwidth_tb_s, 4.8,
          "the GPU's memory bandwidth in TB/s (H200: 4.8), for the share of it a decode step uses");
ABSL_FLAG(int64_t, largest_graph_batch, 64,
          "replay decode steps of up to this many sequences from CUDA graphs; 0: launch by launch");

namespace kvjit::cuda {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

int32_t Argmax(absl::Span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

struct BatchResult {
  int64_t batch = 0;
  double ttft_s = 0;  // first sequence's prompt to its first token
  double prefill_tokens_per_s = 0;
  double tpot_s = 0;  // mean decode step
  double decode_tokens_per_s = 0;
  bool decode_from_graphs = false;  // every timed decode step replayed a graph
  // What a timed decode step must read at least: every weight once, and each
  // sequence's cached keys and values (its mean context over the timed steps).
  double bytes_per_decode_step = 0;
  double bandwidth_share = 0;  // bytes_per_decode_step / tpot ÷ peak bandwidth
};


// `batch` sequences in disjoint block ranges: every prompt prefilled (packed
// into steps of at most the program's tokens), then gen_tokens decode steps.
absl::StatusOr<BatchResult> RunBatch(CudaStepRunner& runner, const runtime::Executable& executable,
                                     int64_t batch, int64_t prompt, int64_t generate) {
  const int64_t block_size = runner.block_size();
  const int64_t blocks_each = (prompt + generate + 1 + block_size - 1) / block_size;
  auto slot = [&](int64_t sequence, int64_t position) {
    return static_cast<int32_t>((sequence * blocks_each + position / block_size) * block_size +
                                position % block_size);
  };
  auto add_table = [&](runtime::StepInputs& step, int64_t sequence) {
    for (int64_t b = 0; b < blocks_each; ++b) {
      step.block_tables().push_back(static_cast<int32_t>(sequence * blocks_each + b));
    }
  };
  std::vector<int32_t> next(batch);
  BatchResult result;
  result.batch = batch;

  // Prefill: sequences after one another, chunked to the step's capacity.
  const auto prefill_start = Clock::now();
  int64_t sequence = 0;
  int64_t done = 0;  // of the current sequence's prompt
  while (sequence < batch) {
    runtime::StepInputs step;
    step.seq_starts().push_back(0);
    step.max_blocks = blocks_each;
    std::vector<int64_t> finishing;  // sequences whose prompt ends in this step
    while (sequence < batch &&
           static_cast<int64_t>(step.tokens().size()) < runner.max_tokens_per_step()) {
      const int64_t count = std::min(
          prompt - done, runner.max_tokens_per_step() - static_cast<int64_t>(step.tokens().size()));
      for (int64_t p = done; p < done + count; ++p) {
        step.tokens().push_back(
            static_cast<int32_t>((sequence * 7919 + p * 104729) % runner.vocab_size()));
        step.positions().push_back(static_cast<int32_t>(p));
        step.slot_mapping().push_back(slot(sequence, p));
      }
      step.seq_starts().push_back(static_cast<int32_t>(step.tokens().size()));
      step.context_lens().push_back(static_cast<int32_t>(done + count));
      add_table(step, sequence);
      done += count;
      if (done == prompt) {
        step.logits_rows().push_back(static_cast<int32_t>(step.tokens().size() - 1));
        finishing.push_back(sequence);
        ++sequence;
        done = 0;
      }
    }
    if (step.logits_rows().empty()) {
      step.logits_rows().push_back(static_cast<int32_t>(step.tokens().size() - 1));
    }
    KVJIT_ASSIGN_OR_RETURN(absl::Span<const float> logits, runner.Run(step));
    for (size_t i = 0; i < finishing.size(); ++i) {
      next[finishing[i]] = Argmax(logits.subspan(i * runner.vocab_size(), runner.vocab_size()));
      if (finishing[i] == 0) result.ttft_s = Seconds(prefill_start);
    }
  }
  result.prefill_tokens_per_s = batch * prompt / Seconds(prefill_start);

  // Decode: one token per sequence per step; the first step (which captures
  // the bucket's graph) is not timed.
  auto decode_step = [&](int64_t position) -> absl::Status {
    runtime::StepInputs step;
    step.max_blocks = blocks_each;
    step.seq_starts().push_back(0);
    for (int64_t s = 0; s < batch; ++s) {
      step.tokens().push_back(next[s]);
      step.positions().push_back(static_cast<int32_t>(position));
      step.slot_mapping().push_back(slot(s, position));
      step.seq_starts().push_back(static_cast<int32_t>(s + 1));
      step.context_lens().push_back(static_cast<int32_t>(position + 1));
      step.logits_rows().push_back(static_cast<int32_t>(s));
      add_table(step, s);
    }
    KVJIT_ASSIGN_OR_RETURN(absl::Span<const float> logits, runner.Run(step));
    for (int64_t s = 0; s < batch; ++s) {
      next[s] = Argmax(logits.subspan(s * runner.vocab_size(), runner.vocab_size()));
    }
    return absl::OkStatus();
  };
  KVJIT_RETURN_IF_ERROR(decode_step(prompt));
  const int64_t replays_before = runner.graph_replays();
  const auto decode_start = Clock::now();
  for (int64_t g = 1; g <= generate; ++g) KVJIT_RETURN_IF_ERROR(decode_step(prompt + g));
  const double decode_s = Seconds(decode_start);
  result.tpot_s = decode_s / generate;
  result.decode_tokens_per_s = batch * generate / decode_s;
  result.decode_from_graphs = runner.graph_replays() - replays_before == generate;
  const kvx::KvLayout& layout = executable.kv_layout();
  const double kv_bytes_per_token =
      static_cast<double>(layout.bytes_per_block()) / layout.block_size();
  const double mean_context = prompt + 1 + (generate + 1) / 2.0;
  result.bytes_per_decode_step =
      static_cast<double>(runtime::WeightBytesReadPerStep(executable.root(), batch)) +
      batch * mean_context * kv_bytes_per_token;
  result.bandwidth_share = result.bytes_per_decode_step / result.tpot_s /
                           (absl::GetFlag(FLAGS_peak_bandwidth_tb_s) * 1e12);
  return result;
}

absl::Status Main(const std::string& path) {
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> executable,
                         runtime::Executable::Load(path));
  std::vector<int64_t> batches;
  for (absl::string_view text : absl::StrSplit(absl::GetFlag(FLAGS_batch), ',')) {
    int64_t batch = 0;
    if (!absl::SimpleAtoi(text, &batch) || batch < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--batch: '", text, "' is not a batch size"));
    }
    batches.push_back(batch);
  }
  const int64_t prompt = absl::GetFlag(FLAGS_prompt_tokens);
  const int64_t generate = absl::GetFlag(FLAGS_gen_tokens);
  if (prompt < 1 || generate < 1 ||
      prompt + generate + 1 > static_cast<int64_t>(executable->config().context_length())) {
    return absl::InvalidArgumentError(
        absl::StrCat("--prompt_tokens and --gen_tokens must be at least 1 and fit the context of ",
                     executable->config().context_length()));
  }
  const int64_t block_size = executable->kv_layout().block_size();
  const int64_t blocks_each = (prompt + generate + 1 + block_size - 1) / block_size;
  CudaRunnerOptions options;
  options.device_ordinal = absl::GetFlag(FLAGS_device);
  options.largest_graph_batch = absl::GetFlag(FLAGS_largest_graph_batch);
  KVJIT_ASSIGN_OR_RETURN(
      std::unique_ptr<CudaStepRunner> runner,
      CudaStepRunner::Create(
          *executable, *std::max_element(batches.begin(), batches.end()) * blocks_each, options));
  std::fprintf(
      stderr, "%s on %s, %lld-token prompts, %lld decode steps, graphs up to batch %lld\n",
      path.c_str(), runner->device().Describe().c_str(), static_cast<long long>(prompt),
      static_cast<long long>(generate),
      static_cast<long long>(runner->graph_buckets().empty() ? 0 : runner->graph_buckets().back()));
  std::fprintf(stderr, "%8s %10s %14s %10s %14s %7s %10s\n", "batch", "TTFT ms", "prefill tok/s",
               "TPOT ms", "decode tok/s", "graphs", "bandwidth");
  for (int64_t batch : batches) {
    KVJIT_ASSIGN_OR_RETURN(BatchResult result,
                           RunBatch(*runner, *executable, batch, prompt, generate));
    std::fprintf(stderr, "%8lld %10.2f %14.0f %10.3f %14.0f %7s %9.1f%%\n",
                 static_cast<long long>(batch), result.ttft_s * 1e3, result.prefill_tokens_per_s,
                 result.tpot_s * 1e3, result.decode_tokens_per_s,
                 result.decode_from_graphs ? "yes" : "no", result.bandwidth_share * 100);
    std::printf("%s\n",
                absl::StrFormat(
                    "{\"model\": \"%s\", \"device\": \"%s\", \"batch\": %d, \"prompt_tokens\": %d, "
                    "\"gen_tokens\": %d, \"decode_from_graphs\": %s, \"ttft_ms\": %.3f, "
                    "\"prefill_tokens_per_s\": %.1f, "
                    "\"tpot_ms\": %.4f, \"decode_tokens_per_s\": %.1f, "
                    "\"bytes_per_decode_step\": %.0f, \"bandwidth_share\": %.4f}",
                    path, runner->device().Describe(), batch, prompt, generate,
                    result.decode_from_graphs ? "true" : "false", result.ttft_s * 1e3,
                    result.prefill_tokens_per_s, result.tpot_s * 1e3, result.decode_tokens_per_s,
                    result.bytes_per_decode_step, result.bandwidth_share)
                    .c_str());
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kvjit::cuda

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "kvjit-cuda-bench MODEL.kvx [--prompt_tokens 128] [--gen_tokens 64] [--batch 1,64] "
      "[--device 0] [--largest_graph_batch 64]");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() != 2) {
    std::fprintf(stderr, "usage: %s\n", absl::ProgramUsageMessage().data());
    return 2;
  }
  absl::Status status = kvjit::cuda::Main(positional[1]);
  if (!status.ok()) {
    std::fprintf(stderr, "kvjit-cuda-bench: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
