#include "tools/kvjit/LoadBench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/generation/RunnerFactory.h"
#include "runtime/generation/BatchScheduler.h"
#include "runtime/generation/Speculation.h"
#include "runtime/exec/StepRunner.h"

namespace kvjit::cli {
namespace {

// Made-up prompt token `position` of request `request`: spread over the
// vocabulary, different per request.
int32_t SyntheticToken(int64_t request, int64_t position, int64_t vocab_size) {
  return static_cast<int32_t>((17 + 31 * position + 7 * request) % vocab_size);
}

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = static_cast<size_t>(fraction * (values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

absl::StatusOr<int64_t> PositiveField(const nlohmann::json& entry, const char* key,
                                      const std::string& where) {
  if (!entry.contains(key) || !entry[key].is_number_integer() || entry[key].get<int64_t>() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"", key, "\" must be a positive integer"));
  }
  return entry[key].get<int64_t>();
}

}  // namespace

std::vector<LoadRequest> SyntheticLoadRequests(int64_t count, int64_t prompt_tokens,
                                               int64_t shared_prefix_tokens,
                                               int64_t max_new_tokens, int64_t num_samples,
                                               int64_t vocab_size) {
  std::vector<LoadRequest> requests;
  for (int64_t r = 0; r < count; ++r) {
    LoadRequest request{{}, max_new_tokens, num_samples};
    for (int64_t i = 0; i < prompt_tokens; ++i) {
      request.prompt.push_back(SyntheticToken(i < shared_prefix_tokens ? 0 : r + 1, i, vocab_size));
    }
    requests.push_back(std::move(request));
  }
  return requests;
}

absl::StatusOr<std::vector<LoadRequest>> ReadLoadRequests(const std::string& path,
                                                          const tokenizer::Tokenizer& tokenizer,
                                                          int64_t num_samples, int64_t vocab_size) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read the requests file ", path));
  const nlohmann::json parsed = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_array() || parsed.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected a non-empty JSON array of request objects"));
  }
  std::vector<LoadRequest> requests;
  for (size_t index = 0; index < parsed.size(); ++index) {
    const nlohmann::json& entry = parsed[index];
    const std::string where = absl::StrCat(path, ": request ", index);
    if (!entry.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, " is not an object"));
    LoadRequest request;
    KVJIT_ASSIGN_OR_RETURN(request.max_new_tokens, PositiveField(entry, "max_new_tokens", where));
    request.num_samples = num_samples;
    if (entry.contains("samples")) {
      KVJIT_ASSIGN_OR_RETURN(request.num_samples, PositiveField(entry, "samples", where));
    }
    if (entry.contains("prompt")) {
      if (!entry["prompt"].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": \"prompt\" must be text"));
      }
      auto tokens = tokenizer.Encode(entry["prompt"].get<std::string>(), /*add_special=*/true,
                                     /*parse_special=*/false);
      if (!tokens.ok()) {
        return absl::Status(tokens.status().code(), absl::StrCat(where, ": ", tokens.status().message()));
      }
      request.prompt = *std::move(tokens);
    } else {
      KVJIT_ASSIGN_OR_RETURN(const int64_t prompt_tokens, PositiveField(entry, "prompt_tokens", where));
      for (int64_t i = 0; i < prompt_tokens; ++i) {
        request.prompt.push_back(SyntheticToken(static_cast<int64_t>(index) + 1, i, vocab_size));
      }
    }
    requests.push_back(std::move(request));
  }
  return requests;
}

absl::StatusOr<nlohmann::json> RunKvjitLoad(const runtime::Executable& executable,
                                            const std::vector<LoadRequest>& requests,
                                            const LoadRunOptions& options) {
  const int64_t block_size = executable.kv_layout().block_size();
  int64_t blocks = options.kv_pool_blocks;
  if (blocks <= 0) {
    // Each sample's tokens are cut to the context (as Submit cuts them), so
    // only the sample counts, which the file gives, can make this overflow.
    const int64_t context = executable.config().context_length();
    blocks = 1;
    for (const LoadRequest& request : requests) {
      const int64_t tokens = std::min<int64_t>(
          context, static_cast<int64_t>(request.prompt.size()) +
                       std::min<int64_t>(request.max_new_tokens, context));
      const int64_t sample_blocks = (tokens + block_size - 1) / block_size;
      int64_t request_blocks = 0;
      if (__builtin_mul_overflow(request.num_samples, sample_blocks, &request_blocks) ||
          __builtin_add_overflow(blocks, request_blocks, &blocks)) {
        return absl::InvalidArgumentError(
            "the requests' samples need more KV blocks than can be counted");
      }
    }
  }
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::StepRunner> runner,
                         runtime::CreateStepRunner(executable, blocks, options.threads,
                                                   options.device));
  KVJIT_RETURN_IF_ERROR(runner->SetObserver(options.observer));
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Drafter> drafter,
                         MakeDrafter(options.speculation, options.model_or_kvx, executable, *runner,
                                     options.threads));
  runtime::BatchSchedulerOptions scheduler_options;
  scheduler_options.max_batch_tokens = std::min(options.max_batch_tokens, runner->max_tokens_per_step());
  scheduler_options.context_length = executable.config().context_length();
  scheduler_options.enable_prefix_caching = options.prefix_caching;
  scheduler_options.drafter = drafter.get();
  scheduler_options.draft_tokens = options.speculation.draft_tokens;
  scheduler_options.speculation_max_batch = options.speculation.max_batch;
  KVJIT_ASSIGN_OR_RETURN(runtime::BatchScheduler scheduler,
                         runtime::BatchScheduler::Create(*runner, scheduler_options));
  sampling::SamplingParams params;
  params.temperature = options.temperature;

  std::vector<runtime::RequestId> ids;
  int64_t prompt_tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (size_t r = 0; r < requests.size(); ++r) {
    params.seed = r * 1000;
    KVJIT_ASSIGN_OR_RETURN(runtime::RequestId id,
                           scheduler.Submit(requests[r].prompt, params, requests[r].max_new_tokens,
                                            {}, requests[r].num_samples, options.grammar));
    ids.push_back(id);
    prompt_tokens += static_cast<int64_t>(requests[r].prompt.size());
  }
  while (!scheduler.Idle()) KVJIT_RETURN_IF_ERROR(scheduler.Step());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<double> ttft_ms, tpot_ms;
  int64_t generated = 0;
  int64_t sequences = 0;
  for (runtime::RequestId id : ids) {
    KVJIT_ASSIGN_OR_RETURN(runtime::RequestResult result, scheduler.TakeResult(id));
    ttft_ms.push_back(result.metrics.time_to_first_token_s * 1e3);
    tpot_ms.push_back(result.metrics.time_per_output_token_s * 1e3);
    generated += result.metrics.generated_tokens;
    sequences += static_cast<int64_t>(result.samples.size());
  }
  const kv::KvBlockCounters kv = scheduler.kv_blocks().counters();
  const runtime::SchedulerCounters& steps = scheduler.counters();
  // Batched decode alone (llama-batched-bench's S_TG); 0 where no step was one.
  const double decode_tokens_per_s =
      steps.decode_step_seconds > 0 ? steps.decode_step_tokens / steps.decode_step_seconds : 0.0;
  const auto share_of_decode = [&steps](double seconds) {
    return steps.decode_step_seconds > 0 ? seconds / steps.decode_step_seconds : 0.0;
  };
  return nlohmann::json{{"engine", "kvjit"},
                        {"requests", static_cast<int64_t>(requests.size())},
                        {"sequences", sequences},
                        {"prompt_tokens", prompt_tokens},
                        {"generated_tokens", generated},
                        {"max_batch_tokens", scheduler_options.max_batch_tokens},
                        {"threads", options.threads},
                        {"seconds", seconds},
                        {"ttft_ms_p50", Percentile(ttft_ms, 0.5)},
                        {"ttft_ms_p99", Percentile(ttft_ms, 0.99)},
                        {"tpot_ms_p50", Percentile(tpot_ms, 0.5)},
                        {"tpot_ms_p99", Percentile(tpot_ms, 0.99)},
                        {"output_tokens_per_s", generated / seconds},
                        {"steps", steps.steps},
                        {"decode_steps", steps.decode_steps},
                        {"decode_tokens_per_s", decode_tokens_per_s},
                        {"computed_tokens", steps.computed_tokens},
                        {"preemptions", steps.preemptions},
                        {"kv_pool_blocks", blocks},
                        {"kv_block_tokens", block_size},
                        {"peak_kv_blocks", kv.peak_blocks_in_use},
                        {"peak_kv_blocks_shared", kv.peak_blocks_shared},
                        {"kv_blocks_copied", kv.blocks_copied},
                        {"kv_blocks_evicted", kv.blocks_evicted},
                        {"kv_blocks_freed_by_window", kv.window_released_blocks},
                        {"prefix_cache", options.prefix_caching},
                        {"prefix_hit_tokens", kv.prefix_hit_tokens},
                        {"drafted_tokens", steps.drafted_tokens},
                        {"accepted_tokens", steps.accepted_tokens},
                        {"verify_steps", steps.verify_steps},
                        {"mean_accepted_length",
                         runtime::MeanAcceptedLength(steps.accepted_tokens, steps.verify_steps)},
                        {"grammar_masks", steps.grammar_masks},
                        {"grammar_mask_ms", steps.grammar_masks > 0
                                                ? steps.grammar_mask_seconds * 1e3 / steps.grammar_masks
                                                : 0.0},
                        {"grammar_mask_share", share_of_decode(steps.grammar_mask_seconds)},
                        {"grammar_wait_share", share_of_decode(steps.grammar_wait_seconds)}};
}

nlohmann::json LoadRequestsToJson(const std::vector<LoadRequest>& requests) {
  nlohmann::json list = nlohmann::json::array();
  for (const LoadRequest& request : requests) {
    list.push_back({{"prompt", request.prompt},
                    {"max_new_tokens", request.max_new_tokens},
                    {"samples", request.num_samples}});
  }
  return {{"requests", list}};
}

void PrintLoadTable(
    const std::vector<std::pair<std::string, std::vector<std::pair<std::string, Spread>>>>& engines) {
  static constexpr std::pair<const char*, const char*> kRows[] = {
      {"requests", "requests"},
      {"sequences", "sequences (samples)"},
      {"prompt_tokens", "prompt tokens"},
      {"generated_tokens", "generated tokens"},
      {"max_batch_tokens", "tokens per step"},
      {"seconds", "wall s"},
      {"ttft_ms_p50", "TTFT p50 ms"},
      {"ttft_ms_p99", "TTFT p99 ms"},
      {"tpot_ms_p50", "TPOT p50 ms"},
      {"tpot_ms_p99", "TPOT p99 ms"},
      {"output_tokens_per_s", "output tokens/s"},
      {"steps", "steps"},
      {"decode_steps", "decode-only steps"},
      {"decode_tokens_per_s", "decode-only tokens/s"},
      {"computed_tokens", "computed tokens"},
      {"preemptions", "preemptions"},
      {"kv_pool_blocks", "KV pool blocks"},
      {"peak_kv_blocks", "peak KV blocks"},
      {"peak_kv_blocks_shared", "peak KV blocks shared"},
      {"kv_blocks_copied", "KV blocks copied"},
      {"kv_blocks_evicted", "KV blocks evicted"},
      {"kv_blocks_freed_by_window", "KV blocks freed by window"},
      {"prefix_hit_tokens", "prefix-cache hit tokens"},
      {"drafted_tokens", "drafted tokens"},
      {"accepted_tokens", "accepted drafts"},
      {"verify_steps", "verifications"},
      {"mean_accepted_length", "mean accepted length"},
  };
  std::printf("%-24s", "");
  for (const auto& [engine, summary] : engines) std::printf(" %24s", engine.c_str());
  std::printf("\n");
  for (const auto& [key, label] : kRows) {
    std::printf("%-24s", label);
    for (const auto& [engine, summary] : engines) {
      std::printf(" %24s", FormatSpread(Lookup(summary, key), 2).c_str());
    }
    std::printf("\n");
  }
}

}  // namespace kvjit::cli
