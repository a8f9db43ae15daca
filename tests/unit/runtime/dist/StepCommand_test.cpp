#include "runtime/dist/StepCommand.h"

#include <cstdint>
#include <cstring>
#include <variant>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::runtime::dist {
namespace {

using ::testing::HasSubstr;

StepInputs TwoSequenceStep() {
  StepInputs inputs;
  inputs.max_blocks = 2;
  inputs.tokens() = {5, 6, 7};
  inputs.positions() = {0, 1, 9};
  inputs.seq_starts() = {0, 2, 3};
  inputs.context_lens() = {2, 10};
  inputs.slot_mapping() = {0, 1, 13};
  inputs.block_tables() = {0, 0, 2, 3};
  inputs.logits_rows() = {1, 2};
  return inputs;
}

absl::StatusOr<StepCommand> RoundTrip(const StepCommand& command) {
  return DecodeStepCommand(EncodeStepCommand(command));
}

TEST(StepCommandTest, EveryKindRoundTrips) {
  const RankSetup setup{"/models/tp2.kvx", 512, 4, "cuda:1"};
  auto decoded_setup = RoundTrip(setup);
  ASSERT_TRUE(decoded_setup.ok()) << decoded_setup.status();
  EXPECT_EQ(std::get<RankSetup>(*decoded_setup), setup);

  const StepInputs step = TwoSequenceStep();
  auto decoded_step = RoundTrip(step);
  ASSERT_TRUE(decoded_step.ok()) << decoded_step.status();
  EXPECT_EQ(std::get<StepInputs>(*decoded_step).values, step.values);
  EXPECT_EQ(std::get<StepInputs>(*decoded_step).max_blocks, 2);

  auto decoded_copy = RoundTrip(CopyBlockCommand{3, 7});
  ASSERT_TRUE(decoded_copy.ok()) << decoded_copy.status();
  EXPECT_EQ(std::get<CopyBlockCommand>(*decoded_copy), (CopyBlockCommand{3, 7}));

  auto decoded_stop = RoundTrip(StopCommand{});
  ASSERT_TRUE(decoded_stop.ok()) << decoded_stop.status();
  EXPECT_TRUE(std::holds_alternative<StopCommand>(*decoded_stop));
}

TEST(StepCommandTest, EveryCutShortCommandIsRefused) {
  for (const StepCommand& command :
       {StepCommand(RankSetup{"a.kvx", 8, 1, "cpu"}), StepCommand(TwoSequenceStep()),
        StepCommand(CopyBlockCommand{1, 2})}) {
    const std::vector<uint8_t> bytes = EncodeStepCommand(command);
    for (size_t length = 0; length < bytes.size(); ++length) {
      auto decoded = DecodeStepCommand(absl::MakeConstSpan(bytes.data(), length));
      ASSERT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument)
          << "the first " << length << " of " << bytes.size() << " bytes";
      EXPECT_THAT(decoded.status().message(), HasSubstr("cut short"));
    }
  }
}

TEST(StepCommandTest, ACountPastTheEndIsRefusedWithoutReadingIt) {
  std::vector<uint8_t> bytes = EncodeStepCommand(TwoSequenceStep());
  // The tokens' count follows the version, the kind and the columns.
  const uint64_t huge = uint64_t{1} << 62;
  std::memcpy(bytes.data() + 2 + sizeof(int64_t), &huge, sizeof(huge));
  auto decoded = DecodeStepCommand(bytes);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(), HasSubstr("tokens needs"));
}

TEST(StepCommandTest, BytesLeftOverAreRefused) {
  std::vector<uint8_t> bytes = EncodeStepCommand(CopyBlockCommand{1, 2});
  bytes.push_back(0);
  auto decoded = DecodeStepCommand(bytes);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(), HasSubstr("bytes left over"));
}

TEST(StepCommandTest, AnUnknownKindIsRefused) {
  std::vector<uint8_t> bytes = EncodeStepCommand(StopCommand{});
  bytes[1] = 99;
  auto decoded = DecodeStepCommand(bytes);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(), HasSubstr("unknown kind 99"));
}

TEST(StepCommandTest, AnotherFormatVersionIsRefused) {
  std::vector<uint8_t> bytes = EncodeStepCommand(StopCommand{});
  bytes[0] = 200;
  auto decoded = DecodeStepCommand(bytes);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(), HasSubstr("format version 200"));
}

}  // namespace
}  // namespace kvjit::runtime::dist
