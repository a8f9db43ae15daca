#include "frontend/gguf/GgufValue.h"

#include <cstdint>
#include <deque>
#include <limits>
#include <vector>

#include "frontend/gguf/ByteCursor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/frontend/gguf/GgufTestWriter.h"

namespace kvjit::gguf {
namespace {

using ::testing::HasSubstr;
using test::ByteWriter;

class GgufValueTest : public ::testing::Test {
 protected:
  // Values view the bytes they were read from, so the test keeps every
  // buffer alive until it ends.
  absl::StatusOr<GgufValue> ReadOne(const ByteWriter& writer, GgufType type) {
    const std::vector<uint8_t>& bytes = buffers_.emplace_back(writer.bytes());
    ByteCursor cursor(bytes);
    absl::StatusOr<GgufValue> value = GgufValue::Read(cursor, type);
    if (value.ok()) {
      EXPECT_EQ(cursor.remaining(), 0u) << "the value must consume exactly its bytes";
    }
    return value;
  }

 private:
  std::deque<std::vector<uint8_t>> buffers_;
};

TEST_F(GgufValueTest, UnsignedIntegers) {
  absl::StatusOr<GgufValue> u8 = ReadOne(ByteWriter().U8(200), GgufType::kUint8);
  ASSERT_TRUE(u8.ok()) << u8.status();
  EXPECT_EQ(u8->type(), GgufType::kUint8);
  EXPECT_EQ(u8->AsUint(), 200u);
  EXPECT_EQ(u8->AsInt(), 200);
  EXPECT_EQ(u8->AsFloat(), std::nullopt);
  EXPECT_EQ(ReadOne(ByteWriter().U16(0xbeef), GgufType::kUint16)->AsUint(), 0xbeefu);
  EXPECT_EQ(ReadOne(ByteWriter().U32(0xdeadbeef), GgufType::kUint32)->AsUint(), 0xdeadbeefu);
  absl::StatusOr<GgufValue> u64 = ReadOne(ByteWriter().U64(~uint64_t{0}), GgufType::kUint64);
  EXPECT_EQ(u64->AsUint(), ~uint64_t{0});
  EXPECT_EQ(u64->AsInt(), std::nullopt);  // does not fit int64
  EXPECT_TRUE(u64->is_integer());
}

TEST_F(GgufValueTest, SignedIntegers) {
  absl::StatusOr<GgufValue> i8 = ReadOne(ByteWriter().U8(0xfe), GgufType::kInt8);
  EXPECT_EQ(i8->AsInt(), -2);
  EXPECT_EQ(i8->AsUint(), std::nullopt);  // negative
  EXPECT_EQ(ReadOne(ByteWriter().U16(0x8000), GgufType::kInt16)->AsInt(), -32768);
  EXPECT_EQ(ReadOne(ByteWriter().U32(0xffffff85), GgufType::kInt32)->AsInt(), -123);
  EXPECT_EQ(ReadOne(ByteWriter().U32(7), GgufType::kInt32)->AsUint(), 7u);
  EXPECT_EQ(ReadOne(ByteWriter().U64(uint64_t{1} << 63), GgufType::kInt64)->AsInt(),
            std::numeric_limits<int64_t>::min());
}

TEST_F(GgufValueTest, FloatsBoolsAndStrings) {
  EXPECT_EQ(ReadOne(ByteWriter().F32(1e-5f), GgufType::kFloat32)->AsFloat(), static_cast<double>(1e-5f));
  EXPECT_EQ(ReadOne(ByteWriter().F64(-2.5e300), GgufType::kFloat64)->AsFloat(), -2.5e300);
  EXPECT_EQ(ReadOne(ByteWriter().U8(1), GgufType::kBool)->AsBool(), true);
  EXPECT_EQ(ReadOne(ByteWriter().U8(0), GgufType::kBool)->AsBool(), false);
  absl::StatusOr<GgufValue> text = ReadOne(ByteWriter().Str("llama"), GgufType::kString);
  EXPECT_EQ(text->AsString(), "llama");
  EXPECT_EQ(text->AsUint(), std::nullopt);
  EXPECT_EQ(text->AsBool(), std::nullopt);
  EXPECT_EQ(ReadOne(ByteWriter().Str(""), GgufType::kString)->AsString(), "");
  EXPECT_EQ(ReadOne(ByteWriter().U32(1), GgufType::kFloat32)->AsString(), std::nullopt);
}

TEST_F(GgufValueTest, ArrayOfFixedSizeElements) {
  ByteWriter writer;
  writer.U32(test::kInt16).U64(3).U16(1).U16(0xffff).U16(300);
  absl::StatusOr<GgufValue> array = ReadOne(writer, GgufType::kArray);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->type(), GgufType::kArray);
  EXPECT_EQ(array->array_type(), GgufType::kInt16);
  ASSERT_EQ(array->array_size(), 3u);
  EXPECT_EQ(array->ArrayElement(0).AsInt(), 1);
  EXPECT_EQ(array->ArrayElement(1).AsInt(), -1);
  EXPECT_EQ(array->ArrayElement(2).AsInt(), 300);
  EXPECT_EQ(array->AsUint(), std::nullopt);
}

TEST_F(GgufValueTest, ArrayOfArraysOfStrings) {
  ByteWriter writer;
  writer.U32(test::kArray).U64(2);
  writer.U32(test::kString).U64(2).Str("a").Str("bc");
  writer.U32(test::kString).U64(0);
  absl::StatusOr<GgufValue> array = ReadOne(writer, GgufType::kArray);
  ASSERT_TRUE(array.ok()) << array.status();
  ASSERT_EQ(array->array_size(), 2u);
  GgufValue first = array->ArrayElement(0);
  EXPECT_EQ(first.array_type(), GgufType::kString);
  ASSERT_EQ(first.array_size(), 2u);
  EXPECT_EQ(first.ArrayElement(1).AsString(), "bc");
  EXPECT_EQ(array->ArrayElement(1).array_size(), 0u);
  EXPECT_EQ(array->ToString(), R"([["a", "bc"], []])");
}

TEST_F(GgufValueTest, ToStringCutsLongArraysAndEscapes) {
  ByteWriter writer;
  writer.U32(test::kUint32).U64(5);
  for (uint32_t i = 0; i < 5; ++i) writer.U32(i * 10);
  EXPECT_EQ(ReadOne(writer, GgufType::kArray)->ToString(3), "[0, 10, 20, ... (5 elements)]");
  EXPECT_EQ(ReadOne(writer, GgufType::kArray)->ToString(0), "[... (5 elements)]");
  EXPECT_EQ(ReadOne(ByteWriter().Str("a\"b\n\xc3\xa9"), GgufType::kString)->ToString(), "\"a\\\"b\\n\xc3\xa9\"");
  EXPECT_EQ(ReadOne(ByteWriter().U8(0x80), GgufType::kInt8)->ToString(), "-128");
  EXPECT_EQ(ReadOne(ByteWriter().U8(1), GgufType::kBool)->ToString(), "true");
  EXPECT_EQ(ReadOne(ByteWriter().F32(0.5f), GgufType::kFloat32)->ToString(), "0.5");
}

TEST_F(GgufValueTest, TruncatedScalar) {
  absl::StatusOr<GgufValue> value = ReadOne(ByteWriter().U16(1), GgufType::kUint32);
  ASSERT_FALSE(value.ok());
  EXPECT_THAT(value.status().message(), HasSubstr("truncated: uint32 needs 4 bytes at offset 0, but only 2 remain"));
}

TEST_F(GgufValueTest, StringPastEnd) {
  absl::StatusOr<GgufValue> value = ReadOne(ByteWriter().U64(100).U8('x'), GgufType::kString);
  ASSERT_FALSE(value.ok());
  EXPECT_THAT(value.status().message(), HasSubstr("truncated: string of 100 bytes at offset 8 runs past the end"));
}

TEST_F(GgufValueTest, ArrayLengthBeyondTheBuffer) {
  // 2^61 uint64 elements would be 2^64 bytes: the length is refused before
  // anything multiplies it.
  ByteWriter writer;
  writer.U32(test::kUint64).U64(uint64_t{1} << 61).U64(0);
  absl::StatusOr<GgufValue> value = ReadOne(writer, GgufType::kArray);
  ASSERT_FALSE(value.ok());
  EXPECT_THAT(value.status().message(), HasSubstr("2305843009213693952 uint64 elements"));
  EXPECT_THAT(value.status().message(), HasSubstr("cannot fit in the 8 bytes that remain"));
}

TEST_F(GgufValueTest, ArrayElementErrorsNameTheElement) {
  ByteWriter writer;
  writer.U32(test::kString).U64(2).Str("ok").U64(50).U32(0).U32(0).U32(0);
  absl::StatusOr<GgufValue> value = ReadOne(writer, GgufType::kArray);
  ASSERT_FALSE(value.ok());
  EXPECT_THAT(value.status().message(), HasSubstr("array element 1: truncated: string of 50 bytes"));
}

TEST_F(GgufValueTest, UnknownArrayElementType) {
  absl::StatusOr<GgufValue> value = ReadOne(ByteWriter().U32(13).U64(0), GgufType::kArray);
  ASSERT_FALSE(value.ok());
  EXPECT_THAT(value.status().message(), HasSubstr("element type: unknown value type 13"));
}

TEST_F(GgufValueTest, NestingIsBounded) {
  ByteWriter writer;
  for (int depth = 0; depth < GgufValue::kMaxArrayDepth; ++depth) writer.U32(test::kArray).U64(1);
  writer.U32(test::kUint8).U64(1).U8(7);
  absl::StatusOr<GgufValue> value = ReadOne(writer, GgufType::kArray);
  ASSERT_FALSE(value.ok());
  EXPECT_THAT(value.status().message(), HasSubstr("is nested more than 8 arrays deep"));

  ByteWriter allowed;
  for (int depth = 1; depth < GgufValue::kMaxArrayDepth; ++depth) allowed.U32(test::kArray).U64(1);
  allowed.U32(test::kUint8).U64(1).U8(7);
  absl::StatusOr<GgufValue> deepest = ReadOne(allowed, GgufType::kArray);
  ASSERT_TRUE(deepest.ok()) << deepest.status();
  GgufValue inner = *deepest;
  while (inner.array_type() == GgufType::kArray) inner = inner.ArrayElement(0);
  EXPECT_EQ(inner.ArrayElement(0).AsUint(), 7u);
}

TEST_F(GgufValueTest, TypeIds) {
  EXPECT_EQ(*GgufTypeFromId(12), GgufType::kFloat64);
  EXPECT_THAT(GgufTypeFromId(13).status().message(), HasSubstr("unknown value type 13"));
  EXPECT_EQ(GgufTypeName(GgufType::kFloat32), "float32");
  EXPECT_EQ(GgufTypeName(GgufType::kArray), "array");
  EXPECT_TRUE(GgufTypeIsInteger(GgufType::kInt64));
  EXPECT_FALSE(GgufTypeIsInteger(GgufType::kBool));
}

}  // namespace
}  // namespace kvjit::gguf
