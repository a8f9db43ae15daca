#include "flatbuffers/flatbuffers.h"
#include "gtest/gtest.h"
#include "runtime/schema/SchemaVersion.h"
#include "runtime/schema/kvx_generated.h"

namespace kvjit::kvx {
namespace {

flatbuffers::DetachedBuffer BuildMinimalExecutable() {
  flatbuffers::FlatBufferBuilder builder;
  auto architecture = builder.CreateString("llama");
  ModelConfigBuilder config(builder);
  config.add_architecture(architecture);
  config.add_num_layers(5);
  config.add_hidden_size(64);
  auto config_offset = config.Finish();
  auto executable = CreateExecutable(builder, kSchemaVersion, 0, config_offset);
  FinishExecutableBuffer(builder, executable);
  return builder.Release();
}

TEST(KvxSchemaTest, RoundTripsThroughVerifier) {
  flatbuffers::DetachedBuffer buffer = BuildMinimalExecutable();
  flatbuffers::Verifier verifier(buffer.data(), buffer.size());
  ASSERT_TRUE(VerifyExecutableBuffer(verifier));
  ASSERT_TRUE(ExecutableBufferHasIdentifier(buffer.data()));
  const Executable* executable = GetExecutable(buffer.data());
  EXPECT_EQ(executable->schema_version(), kSchemaVersion);
  EXPECT_EQ(executable->config()->architecture()->str(), "llama");
  EXPECT_EQ(executable->config()->num_layers(), 5u);
}

TEST(KvxSchemaTest, VerifierRejectsTruncatedBuffer) {
  flatbuffers::DetachedBuffer buffer = BuildMinimalExecutable();
  flatbuffers::Verifier verifier(buffer.data(), buffer.size() / 2);
  EXPECT_FALSE(VerifyExecutableBuffer(verifier));
}

TEST(KvxSchemaTest, MissingRequiredConfigIsRejected) {
  flatbuffers::FlatBufferBuilder builder;
  ExecutableBuilder executable(builder);
  executable.add_schema_version(kSchemaVersion);
  // Finish() asserts on missing required fields in debug builds; build the
  // table by hand so the verifier is what refuses it.
  builder.Finish(flatbuffers::Offset<Executable>(executable.fbb_.EndTable(executable.start_)),
                 ExecutableIdentifier());
  flatbuffers::Verifier verifier(builder.GetBufferPointer(), builder.GetSize());
  EXPECT_FALSE(VerifyExecutableBuffer(verifier));
}

}  // namespace
}  // namespace kvjit::kvx
