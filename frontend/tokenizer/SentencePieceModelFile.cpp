#include "frontend/tokenizer/SentencePieceModelFile.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/tokenizer/Utf8.h"

namespace kvjit::tokenizer {
namespace {

// Protobuf's wire format: each field a varint key (number << 3 | wire
// type), then a varint, 8 or 4 fixed bytes, or a varint length and that many
// bytes.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

struct Field {
  uint32_t number = 0;
  WireType type = kVarint;
  uint64_t varint = 0;
  uint32_t fixed32 = 0;
  absl::string_view bytes;
};

// Reads one message's fields in order; every read is bounds-checked and a
// failure names the message (its path in ModelProto) and the offset.
class MessageReader {
 public:
  MessageReader(absl::string_view bytes, std::string where)
      : bytes_(bytes), where_(std::move(where)) {}

  bool done() const { return position_ >= bytes_.size(); }

  absl::StatusOr<Field> Next() {
    Field field;
    KVJIT_ASSIGN_OR_RETURN(uint64_t key, Varint());
    field.number = static_cast<uint32_t>(key >> 3);
    const uint32_t type = static_cast<uint32_t>(key & 7);
    if (field.number == 0) return Error("field number 0");
    switch (type) {
      case kVarint: {
        field.type = kVarint;
        KVJIT_ASSIGN_OR_RETURN(field.varint, Varint());
        return field;
      }
      case kFixed64: {
        field.type = kFixed64;
        KVJIT_RETURN_IF_ERROR(Take(8).status());
        return field;
      }
      case kLengthDelimited: {
        field.type = kLengthDelimited;
        KVJIT_ASSIGN_OR_RETURN(uint64_t length, Varint());
        KVJIT_ASSIGN_OR_RETURN(field.bytes, Take(length));
        return field;
      }
      case kFixed32: {
        field.type = kFixed32;
        KVJIT_ASSIGN_OR_RETURN(absl::string_view raw, Take(4));
        // Little-endian, as protobuf writes it and this machine reads it.
        std::memcpy(&field.fixed32, raw.data(), 4);
        return field;
      }
      default:
        return Error(absl::StrCat("field ", field.number, " has wire type ", type,
                                  ", which protobuf 3 does not write"));
    }
  }

  absl::Status Error(absl::string_view detail) const {
    return absl::InvalidArgumentError(
        absl::StrCat(where_, ": ", detail, " at byte ", position_, " of ", bytes_.size()));
  }

 private:
  absl::StatusOr<uint64_t> Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (position_ >= bytes_.size()) return Error("truncated varint");
      const uint8_t byte = static_cast<uint8_t>(bytes_[position_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return Error("varint longer than 10 bytes");
  }

  absl::StatusOr<absl::string_view> Take(uint64_t length) {
    if (length > bytes_.size() - position_) {
      return Error(absl::StrCat("truncated: ", length, " bytes announced"));
    }
    absl::string_view taken = bytes_.substr(position_, length);
    position_ += length;
    return taken;
  }

  absl::string_view bytes_;
  std::string where_;
  size_t position_ = 0;
};

// sentencepiece_model.proto's numbers.
namespace model_proto {
constexpr uint32_t kPieces = 1;
constexpr uint32_t kTrainerSpec = 2;
constexpr uint32_t kNormalizerSpec = 3;
}  // namespace model_proto
namespace piece_proto {
constexpr uint32_t kPiece = 1;
constexpr uint32_t kScore = 2;
constexpr uint32_t kType = 3;
}  // namespace piece_proto
namespace trainer_spec {
constexpr uint32_t kModelType = 3;
constexpr uint32_t kByteFallback = 35;
constexpr uint32_t kUnkId = 40;
constexpr uint32_t kBosId = 41;
constexpr uint32_t kEosId = 42;
constexpr uint32_t kPadId = 43;
constexpr uint64_t kModelTypeBpe = 2;
}  // namespace trainer_spec
namespace normalizer_spec {
constexpr uint32_t kName = 1;
constexpr uint32_t kAddDummyPrefix = 3;
constexpr uint32_t kRemoveExtraWhitespaces = 4;
constexpr uint32_t kEscapeWhitespaces = 5;
}  // namespace normalizer_spec

const char* ModelTypeName(uint64_t type) {
  switch (type) {
    case 1: return "UNIGRAM";
    case 2: return "BPE";
    case 3: return "WORD";
    case 4: return "CHAR";
    default: return "unknown";
  }
}

// SentencePiece::Type: NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4,
// UNUSED 5, BYTE 6; the same numbers as kvjit's TokenType (and GGUF's).
absl::StatusOr<TokenType> PieceType(uint64_t type, const MessageReader& reader) {
  if (type < static_cast<uint64_t>(TokenType::kNormal) ||
      type > static_cast<uint64_t>(TokenType::kByte)) {
    return reader.Error(absl::StrCat("type ", type, " is not a SentencePiece type (1 to 6)"));
  }
  return static_cast<TokenType>(type);
}

absl::Status ReadPiece(absl::string_view bytes, const std::string& where, Vocabulary& vocabulary) {
  MessageReader reader(bytes, where);
  std::string piece;
  float score = 0;
  TokenType type = TokenType::kNormal;  // the proto's default
  while (!reader.done()) {
    KVJIT_ASSIGN_OR_RETURN(Field field, reader.Next());
    if (field.number == piece_proto::kPiece && field.type == kLengthDelimited) {
      piece = std::string(field.bytes);
    } else if (field.number == piece_proto::kScore && field.type == kFixed32) {
      std::memcpy(&score, &field.fixed32, sizeof(score));
    } else if (field.number == piece_proto::kType && field.type == kVarint) {
      KVJIT_ASSIGN_OR_RETURN(type, PieceType(field.varint, reader));
    }
  }
  // SentencePiece itself refuses a model with such a piece.
  if (piece.empty()) return reader.Error("the piece is empty");
  if (absl::Status utf8 = CheckUtf8(piece); !utf8.ok()) {
    return reader.Error(absl::StrCat("the piece is not UTF-8: ", utf8.message()));
  }
  vocabulary.tokens.push_back(std::move(piece));
  vocabulary.scores.push_back(score);
  vocabulary.token_types.push_back(type);
  return absl::OkStatus();
}

struct TrainerSpec {
  uint64_t model_type = 1;  // UNIGRAM, the proto's default
  bool byte_fallback = false;
  int64_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;  // the proto's defaults
};

absl::StatusOr<TrainerSpec> ReadTrainerSpec(absl::string_view bytes, const std::string& where) {
  MessageReader reader(bytes, where);
  TrainerSpec spec;
  while (!reader.done()) {
    KVJIT_ASSIGN_OR_RETURN(Field field, reader.Next());
    if (field.type != kVarint) continue;
    // int32 fields hold negative values as 64-bit two's complement.
    const int64_t value = static_cast<int64_t>(field.varint);
    switch (field.number) {
      case trainer_spec::kModelType: spec.model_type = field.varint; break;
      case trainer_spec::kByteFallback: spec.byte_fallback = field.varint != 0; break;
      case trainer_spec::kUnkId: spec.unk_id = value; break;
      case trainer_spec::kBosId: spec.bos_id = value; break;
      case trainer_spec::kEosId: spec.eos_id = value; break;
      case trainer_spec::kPadId: spec.pad_id = value; break;
      default: break;
    }
  }
  return spec;
}

struct NormalizerSpec {
  std::string name;
  bool add_dummy_prefix = true;  // the proto's defaults
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

absl::StatusOr<NormalizerSpec> ReadNormalizerSpec(absl::string_view bytes,
                                                  const std::string& where) {
  MessageReader reader(bytes, where);
  NormalizerSpec spec;
  while (!reader.done()) {
    KVJIT_ASSIGN_OR_RETURN(Field field, reader.Next());
    if (field.number == normalizer_spec::kName && field.type == kLengthDelimited) {
      spec.name = std::string(field.bytes);
    } else if (field.type == kVarint) {
      const bool value = field.varint != 0;
      if (field.number == normalizer_spec::kAddDummyPrefix) spec.add_dummy_prefix = value;
      if (field.number == normalizer_spec::kRemoveExtraWhitespaces) {
        spec.remove_extra_whitespaces = value;
      }
      if (field.number == normalizer_spec::kEscapeWhitespaces) spec.escape_whitespaces = value;
    }
  }
  return spec;
}

absl::StatusOr<int32_t> TokenId(int64_t id, const char* field, const Vocabulary& vocabulary,
                                const std::string& name) {
  if (id < 0) return kNoToken;
  if (id >= static_cast<int64_t>(vocabulary.tokens.size())) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": trainer_spec.", field, " is ", id,
                                                   " but the model has ",
                                                   vocabulary.tokens.size(), " pieces"));
  }
  return static_cast<int32_t>(id);
}

}  // namespace

absl::StatusOr<Vocabulary> ParseSentencePieceModel(absl::string_view bytes,
                                                   const std::string& name) {
  Vocabulary vocabulary;
  vocabulary.model = TokenizerModel::kSentencePiece;
  TrainerSpec trainer;
  NormalizerSpec normalizer;
  MessageReader reader(bytes, name);
  while (!reader.done()) {
    KVJIT_ASSIGN_OR_RETURN(Field field, reader.Next());
    if (field.type != kLengthDelimited) continue;
    if (field.number == model_proto::kPieces) {
      KVJIT_RETURN_IF_ERROR(ReadPiece(
          field.bytes, absl::StrCat(name, ": pieces[", vocabulary.tokens.size(), "]"),
          vocabulary));
    } else if (field.number == model_proto::kTrainerSpec) {
      KVJIT_ASSIGN_OR_RETURN(trainer,
                             ReadTrainerSpec(field.bytes, absl::StrCat(name, ": trainer_spec")));
    } else if (field.number == model_proto::kNormalizerSpec) {
      KVJIT_ASSIGN_OR_RETURN(normalizer, ReadNormalizerSpec(
                                             field.bytes, absl::StrCat(name, ": normalizer_spec")));
    }
  }
  if (vocabulary.tokens.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": no pieces: not a SentencePiece model file"));
  }
  absl::flat_hash_map<absl::string_view, size_t> index_of_piece;
  for (size_t i = 0; i < vocabulary.tokens.size(); ++i) {
    auto [first, added] = index_of_piece.try_emplace(vocabulary.tokens[i], i);
    if (!added) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": pieces[", i, "] '",
                                                     vocabulary.tokens[i], "' repeats pieces[",
                                                     first->second, "]"));
    }
  }
  if (trainer.model_type != trainer_spec::kModelTypeBpe) {
    return absl::UnimplementedError(absl::StrCat(
        name, ": trainer_spec.model_type is ", ModelTypeName(trainer.model_type),
        "; kvjit runs SentencePiece's BPE models only"));
  }
  if (normalizer.name != "identity") {
    return absl::UnimplementedError(absl::StrCat(
        name, ": normalizer_spec.name is '", normalizer.name,
        "'; kvjit runs the 'identity' normalizer only (no precompiled character map)"));
  }
  if (normalizer.remove_extra_whitespaces) {
    return absl::UnimplementedError(absl::StrCat(
        name, ": normalizer_spec.remove_extra_whitespaces is true; kvjit keeps whitespace "
              "runs, as the models it runs (Llama 2, Mistral, Gemma) are trained to"));
  }
  if (!normalizer.escape_whitespaces) {
    return absl::UnimplementedError(absl::StrCat(
        name, ": normalizer_spec.escape_whitespaces is false; kvjit always writes spaces as "
              "U+2581"));
  }
  if (!trainer.byte_fallback) {
    // Without byte pieces a character no piece covers becomes the unknown
    // token, which the tokenizer also does.
    for (TokenType type : vocabulary.token_types) {
      if (type == TokenType::kByte) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": byte pieces without trainer_spec.byte_fallback"));
      }
    }
  }
  KVJIT_ASSIGN_OR_RETURN(vocabulary.unknown_id, TokenId(trainer.unk_id, "unk_id", vocabulary, name));
  KVJIT_ASSIGN_OR_RETURN(vocabulary.bos_id, TokenId(trainer.bos_id, "bos_id", vocabulary, name));
  KVJIT_ASSIGN_OR_RETURN(vocabulary.eos_id, TokenId(trainer.eos_id, "eos_id", vocabulary, name));
  KVJIT_ASSIGN_OR_RETURN(vocabulary.padding_id,
                         TokenId(trainer.pad_id, "pad_id", vocabulary, name));
  // SentencePiece's encoder adds no BOS; transformers' LlamaTokenizer and
  // llama.cpp do, and a tokenizer_config.json may say otherwise.
  vocabulary.add_bos_token = vocabulary.bos_id != kNoToken;
  vocabulary.add_space_prefix = normalizer.add_dummy_prefix;
  vocabulary.space_prefix_once = true;
  if (absl::Status status = ValidateVocabulary(vocabulary); !status.ok()) {
    return absl::Status(status.code(), absl::StrCat(name, ": ", status.message()));
  }
  return vocabulary;
}

absl::StatusOr<Vocabulary> ReadVocabularyFromSentencePieceModel(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat(path, ": cannot be opened"));
  std::ostringstream contents;
  contents << file.rdbuf();
  if (!file && !file.eof()) return absl::DataLossError(absl::StrCat(path, ": cannot be read"));
  return ParseSentencePieceModel(contents.str(), path);
}

}  // namespace kvjit::tokenizer
