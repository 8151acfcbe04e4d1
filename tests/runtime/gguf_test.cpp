// GGUF reader and writer: round trips of every metadata and tensor type, the real stories260K
// model, ggml's Q8_0 / Q4_0 block formats checked by hand, and hostile files (every truncation,
// lying counts and lengths, overflowing sizes) that must each end in one clear FormatError.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "expect_error.h"
#include "veloxquant/gguf.h"
#include "veloxquant/tensor.h"

namespace veloxquant {
namespace {

// The message of the FormatError that parsing `bytes` throws ("" if it parses).
std::string parse_error(std::vector<uint8_t> bytes) {
  return test::error_message<FormatError>([&] { GgufFile::parse(std::move(bytes)); });
}

#define EXPECT_PARSE_ERROR(bytes, fragment) EXPECT_CONTAINS(parse_error(bytes), fragment)

// Hand-assembled GGUF bytes, for files the writer refuses to produce.
struct RawGguf {
  std::vector<uint8_t> b;

  RawGguf& bytes(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  RawGguf& u8(uint8_t v) { return bytes(&v, 1); }
  RawGguf& u32(uint32_t v) { return bytes(&v, 4); }
  RawGguf& u64(uint64_t v) { return bytes(&v, 8); }
  RawGguf& str(const std::string& s) { return u64(s.size()).bytes(s.data(), s.size()); }
  RawGguf& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    return bytes("GGUF", 4).u32(version).u64(tensors).u64(kvs);
  }
  RawGguf& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
  RawGguf& tensor_info(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                       uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  RawGguf& pad(size_t alignment) {
    b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  RawGguf& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

constexpr uint32_t kF32 = 0, kQ8_0 = 8;

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * (static_cast<float>(i) - static_cast<float>(n) / 2);
  return v;
}

// ---- round trips ---------------------------------------------------------------------------------

TEST(GgufMetadata, EveryValueTypeRoundTrips) {
  std::vector<std::pair<std::string, GgufValue>> entries = {
      {"t.u8", GgufValue(uint8_t{200})},
      {"t.i8", GgufValue(int8_t{-100})},
      {"t.u16", GgufValue(uint16_t{60000})},
      {"t.i16", GgufValue(int16_t{-30000})},
      {"t.u32", GgufValue(uint32_t{4000000000u})},
      {"t.i32", GgufValue(int32_t{-2000000000})},
      {"t.u64", GgufValue(uint64_t{18000000000000000000ull})},
      {"t.i64", GgufValue(int64_t{-9000000000000000000ll})},
      {"t.f32", GgufValue(1.5e-5f)},
      {"t.f64", GgufValue(-2.25e300)},
      {"t.bool_true", GgufValue(true)},
      {"t.bool_false", GgufValue(false)},
      {"t.string", GgufValue("h\xc3\xa9llo \"w\"\n")},
      {"t.empty_string", GgufValue("")},
      {"t.arr_u8", GgufValue::array_of(std::vector<uint8_t>{1, 2, 255})},
      {"t.arr_i8", GgufValue::array_of(std::vector<int8_t>{-1, 0, 127})},
      {"t.arr_u16", GgufValue::array_of(std::vector<uint16_t>{1, 65535})},
      {"t.arr_i16", GgufValue::array_of(std::vector<int16_t>{-32768, 32767})},
      {"t.arr_u32", GgufValue::array_of(std::vector<uint32_t>{7, 8, 9})},
      {"t.arr_i32", GgufValue::array_of(std::vector<int32_t>{-7, 8})},
      {"t.arr_u64", GgufValue::array_of(std::vector<uint64_t>{1ull << 60})},
      {"t.arr_i64", GgufValue::array_of(std::vector<int64_t>{-(1ll << 60), 3})},
      {"t.arr_f32", GgufValue::array_of(std::vector<float>{0.25f, -1e30f})},
      {"t.arr_f64", GgufValue::array_of(std::vector<double>{1e-300, 2.5})},
      {"t.arr_bool", GgufValue::array_of(std::vector<bool>{true, false, true})},
      {"t.arr_string", GgufValue::array_of(std::vector<std::string>{"<unk>", "", "\xe2\x96\x81the"})},
      {"t.arr_empty", GgufValue::array(GgufValueType::Float32, {})},
      {"t.arr_nested",
       GgufValue::array(GgufValueType::Array,
                        {GgufValue::array_of(std::vector<uint32_t>{1, 2}),
                         GgufValue::array(GgufValueType::String, {GgufValue("a"), GgufValue("b")}),
                         GgufValue::array(GgufValueType::Int8, {})})},
  };
  GgufWriter w;
  for (const auto& [key, value] : entries) w.add_metadata(key, value);
  const GgufFile f = GgufFile::parse(w.to_bytes());
  EXPECT_EQ(f.version(), 3u);
  ASSERT_EQ(f.metadata().size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(f.metadata()[i].first, entries[i].first);
    EXPECT_TRUE(f.metadata()[i].second == entries[i].second) << entries[i].first;
    EXPECT_EQ(f.metadata()[i].second.type(), entries[i].second.type()) << entries[i].first;
  }
  EXPECT_EQ(f.get<uint64_t>("t.u64"), 18000000000000000000ull);
  EXPECT_EQ(f.get<double>("t.f64"), -2.25e300);
  EXPECT_EQ(f.get<std::string>("t.string"), "h\xc3\xa9llo \"w\"\n");
  const auto& strings = f.get<GgufValue::Array>("t.arr_string");
  EXPECT_EQ(strings.element_type, GgufValueType::String);
  ASSERT_EQ(strings.items.size(), 3u);
  EXPECT_EQ(strings.items[2].as<std::string>("item"), "\xe2\x96\x81the");
  const auto& nested = f.get<GgufValue::Array>("t.arr_nested");
  EXPECT_EQ(nested.items[1].as<GgufValue::Array>("item").items[0].as<std::string>("x"), "a");
  EXPECT_EQ(f.at("t.arr_u32").to_string(2), "[uint32 x 3] [7, 8, ...]");
  EXPECT_EQ(f.at("t.arr_empty").to_string(), "[float32 x 0]");
  EXPECT_EQ(f.at("t.u8").to_string(), "200");
  EXPECT_EQ(f.at("t.string").to_string(), "\"h\xc3\xa9llo \\\"w\\\"\\n\"");
}

TEST(GgufMetadata, TypedGettersNameTheKeyAndBothTypes) {
  GgufWriter w;
  w.add_metadata("llama.block_count", GgufValue(uint32_t{5}));
  const GgufFile f = GgufFile::parse(w.to_bytes());
  try {
    f.get<std::string>("llama.block_count");
    FAIL() << "expected a FormatError";
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "metadata key 'llama.block_count': expected string, found uint32");
  }
  try {
    f.get<uint32_t>("llama.context_length");
    FAIL() << "expected a FormatError";
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "metadata key 'llama.context_length' is missing");
  }
  EXPECT_EQ(f.find("llama.context_length"), nullptr);
  EXPECT_THROW(f.tensor("token_embd.weight"), FormatError);
}

TEST(GgufMetadata, WriterRejectsDuplicatesAndBadAlignment) {
  GgufWriter w;
  w.add_metadata("a", GgufValue(uint32_t{1}));
  EXPECT_THROW(w.add_metadata("a", GgufValue(uint32_t{2})), Error);
  EXPECT_THROW(w.add_metadata("general.alignment", GgufValue(uint32_t{48})), Error);
  EXPECT_THROW(w.add_metadata("general.alignment", GgufValue(uint64_t{64})), Error);
  EXPECT_THROW(GgufValue::array(GgufValueType::UInt32, {GgufValue(int32_t{1})}), Error);
  w.add_tensor("t", GgmlType::F32, {4}, f32_bytes({1, 2, 3, 4}));
  EXPECT_THROW(w.add_tensor("t", GgmlType::F32, {4}, f32_bytes({1, 2, 3, 4})), Error);
  EXPECT_THROW(w.add_tensor("u", GgmlType::F32, {5}, f32_bytes({1, 2, 3, 4})), Error);
  EXPECT_THROW(w.add_tensor("v", GgmlType::Q8_0, {16}, std::vector<uint8_t>(17)), Error);
}

TEST(GgufTensors, EveryTensorTypeRoundTripsAligned) {
  const std::vector<float> values = ramp(64, 0.37f);
  std::vector<uint8_t> f16(values.size() * 2), bf16(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = f32_to_f16(values[i]), b = f32_to_bf16(values[i]);
    std::memcpy(&f16[2 * i], &h, 2);
    std::memcpy(&bf16[2 * i], &b, 2);
  }
  // IQ2_XXS is listed and its raw bytes are served, but it is not decoded.
  std::vector<uint8_t> iq2(66);
  for (size_t i = 0; i < iq2.size(); ++i) iq2[i] = static_cast<uint8_t>(i * 7);
  const std::vector<std::tuple<std::string, GgmlType, std::vector<uint64_t>, std::vector<uint8_t>>>
      tensors = {
          {"f32", GgmlType::F32, {3}, f32_bytes({1.0f, -2.0f, 3.5f})},  // 12 bytes: padding follows
          {"f16", GgmlType::F16, {16, 4}, f16},
          {"bf16", GgmlType::BF16, {8, 4, 2}, bf16},
          {"q8_0", GgmlType::Q8_0, {32, 2}, quantize_q8_0(values)},
          {"q4_0", GgmlType::Q4_0, {32, 1, 2, 1}, quantize_q4_0(values)},
          {"iq2_xxs", GgmlType::IQ2_XXS, {256}, iq2},
      };
  for (uint32_t alignment : {32u, 64u, 1u}) {
    GgufWriter w;
    w.add_metadata("general.alignment", GgufValue(alignment));
    for (const auto& [name, type, dims, data] : tensors) w.add_tensor(name, type, dims, data);
    const GgufFile f = GgufFile::parse(w.to_bytes());
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.data_offset() % alignment, 0u);
    ASSERT_EQ(f.tensors().size(), tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& [name, type, dims, data] = tensors[i];
      const GgufTensorInfo& t = f.tensors()[i];
      EXPECT_EQ(t.name, name);
      EXPECT_EQ(t.type, type);
      EXPECT_EQ(t.dims, dims);
      EXPECT_EQ(t.bytes, data.size());
      EXPECT_EQ(t.file_offset % alignment, 0u) << name;
      const auto raw = f.tensor_data(f.tensor(name));
      EXPECT_EQ(std::vector<uint8_t>(raw.begin(), raw.end()), data) << name;
    }
    EXPECT_EQ(f.tensor_f32(f.tensor("f32")), (std::vector<float>{1.0f, -2.0f, 3.5f}));
    const std::vector<float> from_f16 = f.tensor_f32(f.tensor("f16"));
    const std::vector<float> from_bf16 = f.tensor_f32(f.tensor("bf16"));
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(from_f16[i], f16_to_f32(f32_to_f16(values[i])));
      EXPECT_EQ(from_bf16[i], bf16_to_f32(f32_to_bf16(values[i])));
    }
    EXPECT_EQ(f.tensor("q8_0").elements, 64u);
    EXPECT_EQ(f.tensor_f32(f.tensor("q4_0")).size(), 64u);
    try {
      f.tensor_f32(f.tensor("iq2_xxs"));
      FAIL() << "expected a FormatError";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("'iq2_xxs' has type iq2_xxs"), std::string::npos) << e.what();
    }
  }
}

TEST(GgufTensors, OpensAMappedFileAndNamesThePathInErrors) {
  const std::string path = ::testing::TempDir() + "gguf_test_" + std::to_string(::getpid()) + ".gguf";
  GgufWriter w;
  w.add_metadata("general.architecture", GgufValue("llama"));
  w.add_tensor("w", GgmlType::F32, {2, 2}, f32_bytes({1, 2, 3, 4}));
  w.write_file(path);
  {
    const GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.get<std::string>("general.architecture"), "llama");
    EXPECT_EQ(f.tensor_f32(f.tensor("w")), (std::vector<float>{1, 2, 3, 4}));
    EXPECT_EQ(f.file_size(), std::filesystem::file_size(path));
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc).write("GGUF\x03", 5);
  try {
    GgufFile::open(path);
    FAIL() << "expected a FormatError";
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": GGUF version", 0), 0u) << e.what();
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc).close();
  EXPECT_THROW(GgufFile::open(path), FormatError);
  std::remove(path.c_str());
  EXPECT_THROW(GgufFile::open(path), Error);
  EXPECT_THROW(GgufFile::open(::testing::TempDir()), Error);  // a directory
}

// ---- the real model ------------------------------------------------------------------------------

TEST(GgufStories, ReadsStories260K) {
  const std::string path = std::string(VELOXQUANT_SHARED_DIR) + "/models/stories260K.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "model not present: " << path;
  const GgufFile f = GgufFile::open(path);
  // The facts recorded in shared/models/SOURCES.md.
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.file_size(), 1185376u);
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.tensors().size(), 48u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset(), 14176u);
  EXPECT_EQ(f.get<std::string>("general.architecture"), "llama");
  EXPECT_EQ(f.get<uint32_t>("llama.block_count"), 5u);
  EXPECT_EQ(f.get<uint32_t>("llama.embedding_length"), 64u);
  EXPECT_EQ(f.get<uint32_t>("llama.feed_forward_length"), 172u);
  EXPECT_EQ(f.get<uint32_t>("llama.attention.head_count"), 8u);
  EXPECT_EQ(f.get<uint32_t>("llama.attention.head_count_kv"), 4u);
  EXPECT_FLOAT_EQ(f.get<float>("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  const auto& tokens = f.get<GgufValue::Array>("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens.element_type, GgufValueType::String);
  ASSERT_EQ(tokens.items.size(), 512u);
  EXPECT_EQ(tokens.items[1].as<std::string>("token 1"), "<s>");
  uint64_t elements = 0, end = 0;
  for (const auto& t : f.tensors()) {
    EXPECT_EQ(t.type, GgmlType::F32) << t.name;
    elements += t.elements;
    end = std::max(end, t.file_offset + t.bytes);
  }
  EXPECT_EQ(elements, 292800u);
  EXPECT_EQ(end, f.file_size());
  const GgufTensorInfo& embd = f.tensor("token_embd.weight");
  EXPECT_EQ(embd.dims, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(f.tensor("blk.0.attn_k.weight").dims, (std::vector<uint64_t>{64, 32}));
  // output.weight is tied to the embedding: bit-identical data.
  const auto a = f.tensor_data(embd), b = f.tensor_data(f.tensor("output.weight"));
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0);
  for (float x : f.tensor_f32(embd)) ASSERT_TRUE(std::isfinite(x));
}

// ---- ggml block formats --------------------------------------------------------------------------

TEST(GgufQuant, Q8_0BlockByHand) {
  // Block 0: max |x| = 127, so d = 1 and the codes are round-half-away-from-zero of x.
  // Block 1: all zero, so d = 0 and every code 0.
  std::vector<float> x(64, 0.0f);
  const float first[] = {127, -127, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 0.49f, 3.7f, -100.2f};
  std::copy(std::begin(first), std::end(first), x.begin());
  const std::vector<uint8_t> q = quantize_q8_0(x);
  ASSERT_EQ(q.size(), 68u);
  EXPECT_EQ(q[0], 0x00);  // fp16 1.0 = 0x3c00, little-endian
  EXPECT_EQ(q[1], 0x3c);
  const int8_t codes[] = {127, -127, 1, -1, 2, 3, -3, 0, 4, -100};
  for (size_t j = 0; j < 10; ++j) EXPECT_EQ(static_cast<int8_t>(q[2 + j]), codes[j]) << j;
  for (size_t j = 10; j < 32; ++j) EXPECT_EQ(q[2 + j], 0);
  for (size_t j = 34; j < 68; ++j) EXPECT_EQ(q[j], 0);
  std::vector<float> back(64);
  dequantize(GgmlType::Q8_0, q, back);
  for (size_t j = 0; j < 10; ++j) EXPECT_EQ(back[j], static_cast<float>(codes[j]));
  for (size_t j = 10; j < 64; ++j) EXPECT_EQ(back[j], 0.0f);
}

TEST(GgufQuant, Q4_0BlockByHand) {
  // Block 0: the value of largest magnitude is -8, so d = -8 / -8 = 1 and code = min(15,
  // trunc(x + 8.5)). Block 1: largest is +4, so d = -0.5 and code = min(15, trunc(-2x + 8.5)).
  std::vector<float> x(64, 0.0f);
  const float b0[] = {-8, 7.5f, -0.6f, -0.4f, 0.5f, 3};
  std::copy(std::begin(b0), std::end(b0), x.begin());
  x[16] = 7;     // element 16: the high nibble of byte 0
  x[17] = -7.9f;
  x[32] = 4;
  x[33] = -4;
  x[48] = 1.2f;
  const std::vector<uint8_t> q = quantize_q4_0(x);
  ASSERT_EQ(q.size(), 36u);
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[1], 0x3c);  // d = 1.0
  const uint8_t low0[] = {0, 15, 7, 8, 9, 11};
  for (size_t j = 0; j < 6; ++j) EXPECT_EQ(q[2 + j] & 0x0f, low0[j]) << j;
  EXPECT_EQ(q[2] >> 4, 15);  // 7 + 8.5 = 15.5 -> 15
  EXPECT_EQ(q[3] >> 4, 0);   // -7.9 + 8.5 = 0.6 -> 0
  for (size_t j = 6; j < 16; ++j) EXPECT_EQ(q[2 + j], 0x88) << j;  // zeros on both sides: code 8
  EXPECT_EQ(q[18], 0x00);  // fp16 -0.5 = 0xb800
  EXPECT_EQ(q[19], 0xb8);
  EXPECT_EQ(q[20], 0x60);  // element 32 (4): 0.5 -> 0; element 48 (1.2): 6.1 -> 6, high nibble
  EXPECT_EQ(q[21], 0x8f);  // element 33 (-4): 16.5 -> 16, clamped to 15; element 49 (0): 8
  std::vector<float> back(64);
  dequantize(GgmlType::Q4_0, q, back);
  const float expect0[] = {-8, 7, -1, 0, 1, 3};
  for (size_t j = 0; j < 6; ++j) EXPECT_EQ(back[j], expect0[j]) << j;
  EXPECT_EQ(back[16], 7.0f);
  EXPECT_EQ(back[17], -8.0f);
  EXPECT_EQ(back[32], 4.0f);    // -0.5 * (0 - 8)
  EXPECT_EQ(back[33], -3.5f);   // -0.5 * (15 - 8): the clamp costs one step
  EXPECT_EQ(back[48], 1.0f);    // -0.5 * (6 - 8)
}

TEST(GgufQuant, RandomBlocksStayWithinHalfAStep) {
  Rng rng(7);
  std::vector<float> x(32 * 64);
  for (float& v : x) v = static_cast<float>(rng.normal()) * 3.0f;
  std::vector<float> q8(x.size()), q4(x.size());
  dequantize(GgmlType::Q8_0, quantize_q8_0(x), q8);
  dequantize(GgmlType::Q4_0, quantize_q4_0(x), q4);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    for (size_t j = 0; j < 32; ++j) {
      const size_t i = b * 32 + j;
      // Half a step, plus the fp16 rounding of d times the largest code.
      EXPECT_LE(std::fabs(q8[i] - x[i]), amax / 127 * (0.5f + 127 * 0x1p-11f)) << i;
      // Codes -8..7 of a scale amax/8: one step at worst (the clamped +8 side).
      EXPECT_LE(std::fabs(q4[i] - x[i]), amax / 8 * (1.0f + 8 * 0x1p-11f)) << i;
    }
  }
}

TEST(GgufQuant, BadInputsAreErrors) {
  EXPECT_THROW(quantize_q8_0(std::vector<float>(33, 1.0f)), Error);
  std::vector<float> x(32, 1.0f);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(quantize_q4_0(x), Error);
  x[5] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(quantize_q8_0(x), Error);
  std::vector<float> out(32);
  EXPECT_THROW(dequantize(GgmlType::Q8_0, std::vector<uint8_t>(33), out), Error);
  std::vector<float> block_k(256);
  EXPECT_THROW(dequantize(GgmlType::Q6_K, std::vector<uint8_t>(209), block_k), Error);
  EXPECT_THROW(dequantize(GgmlType::IQ2_XXS, std::vector<uint8_t>(66), block_k), FormatError);
}

// ---- hostile files -------------------------------------------------------------------------------

// A small valid file whose last tensor ends exactly at the end of the file (no trailing padding),
// so that every shorter prefix is missing something.
std::vector<uint8_t> small_valid_file() {
  GgufWriter w;
  w.add_metadata("general.architecture", GgufValue("llama"));
  w.add_metadata("tokenizer.ggml.tokens", GgufValue::array_of(std::vector<std::string>{"a", "bc"}));
  w.add_metadata("nested", GgufValue::array(GgufValueType::Array,
                                            {GgufValue::array_of(std::vector<int16_t>{1, -2})}));
  w.add_metadata("flag", GgufValue(true));
  w.add_tensor("q", GgmlType::Q8_0, {32}, quantize_q8_0(ramp(32, 0.1f)));
  w.add_tensor("w", GgmlType::F32, {8}, f32_bytes(ramp(8, 1.0f)));
  return w.to_bytes();
}

TEST(GgufHostile, EveryTruncationIsAFormatError) {
  const std::vector<uint8_t> full = small_valid_file();
  const GgufFile f = GgufFile::parse(full);
  ASSERT_EQ(f.tensor("w").file_offset + f.tensor("w").bytes, full.size());
  for (size_t n = 0; n < full.size(); ++n) {
    const std::string message =
        parse_error(std::vector<uint8_t>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n)));
    EXPECT_FALSE(message.empty()) << "a prefix of " << n << " bytes parsed";
  }
}

TEST(GgufHostile, WrongMagicAndVersions) {
  EXPECT_PARSE_ERROR(RawGguf().bytes("GGML", 4).u32(3).u64(0).u64(0).b,
                     "not a GGUF file: it starts with bytes 47 47 4d 4c");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 0, 1).b, "GGUF version 1 is not supported");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 0, 4).b, "unsupported GGUF version 4; expected 2 or 3");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 0, 0x03000000).b, "big-endian");
  EXPECT_PARSE_ERROR(std::vector<uint8_t>{}, "GGUF magic: needs 4 bytes at offset 0");
  EXPECT_EQ(GgufFile::parse(RawGguf().header(0, 0, 2).b).version(), 2u);
}

TEST(GgufHostile, AbsurdCountsAreRejectedBeforeAllocating) {
  EXPECT_PARSE_ERROR(RawGguf().header(0, ~uint64_t{0}).b, "metadata entry count is 18446744073709551615");
  EXPECT_PARSE_ERROR(RawGguf().header(uint64_t{1} << 62, 0).b, "tensor count is 4611686018427387904");
  EXPECT_PARSE_ERROR(RawGguf().header(1000, 0).zeros(100).b, "tensor count is 1000");
}

TEST(GgufHostile, MetadataArraysCannotAmplifyIntoHugeAllocations) {
  // 17M one-byte items fit in a 17 MB file but would take about 40 times that in memory.
  const uint64_t n = (uint64_t{1} << 24) + 1;
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(9).u32(0).u64(n).zeros(n).b,
                     "metadata 'k': metadata arrays hold more than 16777216 items in total");
  // Two arrays under the bound each but over it together.
  const uint64_t half = (uint64_t{1} << 23) + 1;
  RawGguf two;
  two.header(0, 2).str("a").u32(9).u32(0).u64(half).zeros(half).str("b").u32(9).u32(0).u64(half).zeros(half);
  EXPECT_PARSE_ERROR(two.b, "metadata 'b': metadata arrays hold more than");
}

TEST(GgufHostile, LengthsPastTheEnd) {
  // A key whose length runs past the end of the file.
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).u64(1000000000000ull).zeros(16).b,
                     "key of metadata entry 0: needs 1000000000000 bytes at offset 32, but the file "
                     "ends at 48 bytes");
  // A string value likewise.
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(8).u64(50).bytes("abc", 3).b,
                     "metadata 'k': needs 50 bytes");
  // Array lengths whose byte size overflows uint64, or exceeds the file.
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(9).u32(10).u64((uint64_t{1} << 61) + 1).b,
                     "metadata 'k': length of the uint64 array is 2305843009213693953");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(9).u32(8).u64(uint64_t{1} << 60).zeros(64).b,
                     "length of the string array is 1152921504606846976");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(9).u32(9).u64(~uint64_t{0}).b,
                     "length of the array array");
  // A tensor name past the end.
  EXPECT_PARSE_ERROR(RawGguf().header(1, 0).u64(~uint64_t{0}).zeros(40).b,
                     "name of tensor 0: needs 18446744073709551615 bytes");
}

TEST(GgufHostile, BadValueTypes) {
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(13).u32(0).b,
                     "metadata 'k': value type id 13 is unknown");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(9).u32(99).u64(0).b,
                     "array element type id 99 is unknown");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(7).u8(2).b, "bool byte is 2; expected 0 or 1");
  RawGguf deep = RawGguf().header(0, 1).str("k").u32(9);
  for (int i = 0; i < 20; ++i) deep.u32(9).u64(1);
  deep.u32(4).u64(0);
  EXPECT_PARSE_ERROR(deep.b, "arrays nested more than 8 deep");
}

TEST(GgufHostile, BadTensorInfos) {
  auto one_tensor = [](std::vector<uint64_t> dims, uint32_t type, uint64_t offset, size_t data) {
    return RawGguf().header(1, 0).tensor_info("t", std::move(dims), type, offset).pad(32).zeros(data).b;
  };
  EXPECT_EQ(GgufFile::parse(one_tensor({4, 2}, kF32, 0, 32)).tensor("t").bytes, 32u);
  EXPECT_PARSE_ERROR(one_tensor({4, 2}, kF32, 32, 32),
                     "tensor 't': data [offset 128, 32 bytes] extends past the end of the file (128 bytes)");
  EXPECT_PARSE_ERROR(one_tensor({4, 2}, kF32, ~uint64_t{0} - 31, 32),
                     "extends past the end of the file");
  EXPECT_PARSE_ERROR(one_tensor({4, 2}, kF32, 4, 64), "data offset 4 is not a multiple of the alignment 32");
  EXPECT_PARSE_ERROR(one_tensor({1, 1, 1, 1, 1}, kF32, 0, 32), "tensor 't': 5 dims; expected 1 to 4");
  EXPECT_PARSE_ERROR(one_tensor({}, kF32, 0, 32), "tensor 't': 0 dims; expected 1 to 4");
  EXPECT_PARSE_ERROR(one_tensor({4, 0}, kF32, 0, 32), "tensor 't': dim 1 is 0");
  EXPECT_PARSE_ERROR(one_tensor({4, ~uint64_t{0}}, kF32, 0, 32), "tensor 't': dim 1 is 18446744073709551615");
  EXPECT_PARSE_ERROR(one_tensor({uint64_t{1} << 32, uint64_t{1} << 32}, kF32, 0, 32),
                     "the element count of dims [4294967296, 4294967296] overflows int64");
  EXPECT_PARSE_ERROR(one_tensor({uint64_t{1} << 62}, kF32, 0, 32), "byte size");
  EXPECT_PARSE_ERROR(one_tensor({33}, kQ8_0, 0, 64), "dim 0 is 33, not a multiple of the q8_0 block size 32");
  EXPECT_PARSE_ERROR(one_tensor({4}, 4, 0, 32), "tensor 't': ggml type id 4 is unknown");
  EXPECT_PARSE_ERROR(one_tensor({4}, 1000, 0, 32), "ggml type id 1000 is unknown");
}

TEST(GgufHostile, BadAlignment) {
  auto with_alignment = [](RawGguf kv) {
    return kv.tensor_info("t", {8}, kF32, 0).pad(64).zeros(32).b;
  };
  EXPECT_EQ(GgufFile::parse(with_alignment(RawGguf().header(1, 1).kv_u32("general.alignment", 64)))
                .alignment(),
            64u);
  EXPECT_PARSE_ERROR(with_alignment(RawGguf().header(1, 1).kv_u32("general.alignment", 48)),
                     "general.alignment is 48; expected a power of two");
  EXPECT_PARSE_ERROR(with_alignment(RawGguf().header(1, 1).kv_u32("general.alignment", 0)),
                     "general.alignment is 0; expected a power of two");
  EXPECT_PARSE_ERROR(with_alignment(RawGguf().header(1, 1).str("general.alignment").u32(8).str("64")),
                     "metadata key 'general.alignment': expected uint32, found string");
}

TEST(GgufHostile, DuplicateNames) {
  EXPECT_PARSE_ERROR(RawGguf().header(0, 2).kv_u32("a", 1).kv_u32("a", 2).b,
                     "duplicate metadata key 'a' (entries 0 and 1)");
  EXPECT_PARSE_ERROR(RawGguf().header(2, 0).tensor_info("t", {8}, kF32, 0).tensor_info("t", {8}, kF32, 32)
                         .pad(32).zeros(64).b,
                     "duplicate tensor name 't' (tensors 0 and 1)");
}

// ---- the CLI -------------------------------------------------------------------------------------

struct CliResult {
  int code = -1;
  std::string out, err;
};

CliResult run_inspect(const std::string& path) {
  const std::string base = ::testing::TempDir() + "gguf_inspect_" + std::to_string(::getpid());
  const std::string cmd = std::string("'") + VELOXQUANT_CLI_PATH + "' inspect '" + path + "' >'" +
                          base + ".out' 2>'" + base + ".err'";
  const int status = std::system(cmd.c_str());
  CliResult r;
  if (status != -1 && WIFEXITED(status)) r.code = WEXITSTATUS(status);
  for (auto [file, text] : {std::pair{base + ".out", &r.out}, std::pair{base + ".err", &r.err}}) {
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    *text = ss.str();
    std::remove(file.c_str());
  }
  return r;
}

TEST(GgufInspect, PrintsMetadataAndTensorTable) {
  const std::string path = ::testing::TempDir() + "gguf_inspect_" + std::to_string(::getpid()) + ".gguf";
  const std::vector<uint8_t> bytes = small_valid_file();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
  const CliResult r = run_inspect(path);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("GGUF version 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[string x 2] [\"a\", \"bc\"]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("q8_0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("total: 2 tensors, 40 elements, 66 bytes"), std::string::npos) << r.out;

  std::ofstream(path, std::ios::binary | std::ios::trunc).write("GGUF\x01\0\0\0", 8);
  const CliResult bad = run_inspect(path);
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(bad.out.empty()) << bad.out;
  EXPECT_EQ(bad.err, "veloxquant: error: " + path + ": GGUF version 1 is not supported (it has "
                     "32-bit counts and lengths); expected version 2 or 3\n");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace veloxquant
