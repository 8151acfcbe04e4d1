// The BPE trainer: merges in frequency order (Sennrich et al.'s worked example), exact vocabulary
// size, and a trained vocabulary that the runtime's tokenizer loads and round-trips text with.
#include "runtime/tokenizer/bpe_trainer.h"

#include <gtest/gtest.h>

#include "expect_error.h"
#include "veloxquant/tokenizer.h"

namespace veloxquant {
namespace {

BpeWordCounts sennrich_words() {
  BpeWordCounts w("gpt-2");
  for (const auto& [word, count] : {std::pair{"low", 5}, {"lower", 2}, {"newest", 6}, {"widest", 3}}) {
    for (int i = 0; i < count; ++i) w.add(word);
  }
  return w;
}

Tokenizer load(const TrainedBpe& bpe) {
  GgufWriter w;
  for (auto& [key, value] : bpe_tokenizer_metadata(bpe)) w.add_metadata(key, value);
  return Tokenizer::from_gguf(GgufFile::parse(w.to_bytes()));
}

const char* kText =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity.\n\n"
    "There were a king with a large jaw and a queen with a plain face, on the throne of England.";

TEST(BpeTrainer, MergesTheMostFrequentPairFirst) {
  BpeTrainerOptions o;
  o.vocab_size = 2 + 256 + 4;
  const TrainedBpe bpe = train_bpe(sennrich_words(), o);
  // "es" and "st" both occur 9 times; the tie goes to the pair of older (lower) symbols.
  EXPECT_EQ(bpe.merges, (std::vector<std::string>{"e s", "es t", "l o", "lo w"}));
  EXPECT_EQ(bpe.tokens.back(), "low");
  EXPECT_EQ(bpe.tokens.size(), o.vocab_size);
}

TEST(BpeTrainer, StopsWhenNoPairIsFrequentEnough) {
  BpeTrainerOptions o;
  o.vocab_size = 4096;
  o.min_pair_count = 6;
  // After the four merges above only "newest" (6 times) has pairs seen 6 times or more.
  const TrainedBpe bpe = train_bpe(sennrich_words(), o);
  EXPECT_EQ(bpe.merges, (std::vector<std::string>{"e s", "es t", "l o", "lo w", "e w", "n ew",
                                                   "new est"}));
  EXPECT_EQ(bpe.tokens.size(), 2 + 256 + 7u);
}

TEST(BpeTrainer, TrainedVocabularyRoundTripsThroughTheRuntimeTokenizer) {
  BpeWordCounts words("gpt-2");
  for (int i = 0; i < 3; ++i) words.add(kText);
  BpeTrainerOptions o;
  o.vocab_size = 2 + 256 + 60;
  const TrainedBpe bpe = train_bpe(words, o);
  ASSERT_EQ(bpe.tokens.size(), o.vocab_size);
  const Tokenizer tok = load(bpe);
  EXPECT_EQ(tok.vocab_size(), o.vocab_size);
  EXPECT_EQ(tok.bos(), 0);
  EXPECT_EQ(tok.eos(), 1);
  const std::vector<int32_t> ids = tok.encode(kText, /*add_special=*/true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 0);  // BOS is added
  EXPECT_EQ(tok.decode(ids), kText);
  // 60 merges learnt on this very text must shorten it well below one token per byte.
  EXPECT_LT(ids.size(), std::string_view(kText).size() * 2 / 3);
  // Bytes never seen in training still encode, through their byte tokens.
  const std::string unseen = "\xC3\xA9t\xC3\xA9 \xE2\x82\xAC";
  EXPECT_EQ(tok.decode(tok.encode(unseen, false)), unseen);
}

TEST(BpeTrainer, IsDeterministic) {
  BpeWordCounts a("gpt-2"), b("gpt-2");
  a.add(kText);
  b.add(kText);
  BpeTrainerOptions o;
  o.vocab_size = 2 + 256 + 40;
  EXPECT_EQ(train_bpe(a, o).merges, train_bpe(b, o).merges);
}

TEST(BpeTrainer, RejectsAVocabularyWithNoRoomForMerges) {
  BpeTrainerOptions o;
  o.vocab_size = 258;
  EXPECT_CONTAINS(test::error_message<Error>([&] { train_bpe(sennrich_words(), o); }),
                  "BPE vocabulary size 258 leaves no room for merges; expected more than 258");
  o.vocab_size = 300;
  o.special_tokens = {"<s>", "<s>"};
  EXPECT_CONTAINS(test::error_message<Error>([&] { train_bpe(sennrich_words(), o); }),
                  "BPE special token '<s>' is empty or repeated");
}

TEST(BpeTrainer, RejectsAnUnknownPreTokenizer) {
  EXPECT_CONTAINS(test::error_message<FormatError>([] { BpeWordCounts w("gpt-5"); }),
                  "unsupported pre-tokenizer 'gpt-5'");
  // Gemma 4's words are UTF-8 with escaped spaces, not what a byte-level vocabulary merges.
  EXPECT_CONTAINS(test::error_message<Error>([] { BpeWordCounts w("gemma4"); }),
                  "pre-tokenizer 'gemma4' is SentencePiece-style");
}

}  // namespace
}  // namespace veloxquant
