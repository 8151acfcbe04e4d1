#!/usr/bin/env python3
"""Trains a tiny byte-level BPE vocabulary and writes it as vocab-only GGUF files, one per
pre-tokenizer under test (bpe-<pre>.gguf beside this script).

    .venv-llamacpp/bin/python tests/data/tokenizer/make_bpe_fixtures.py

Deterministic: the training text is the first 300 000 bytes of corpus/train/gutenberg-train-00
from ../shared in 2000-byte chunks, plus fixed multilingual and numeric paragraphs (so that merges
inside multi-byte characters and across digits exist), and `tokenizers` trains BPE
deterministically. A model trained with one pre-tokenizer only learns merges inside its words, so
every pre-tokenizer would give the same ids; EXTRA_MERGES therefore appends merges (and their
tokens) across the places where the pre-tokenizers under test split differently: digit groups, a
punctuation mark or tab before a letter, upper-case contractions, runs of spaces and line breaks,
a space before a number. Needs `tokenizers`, `gguf` and `numpy` (scripts/llamacpp_venv.sh installs
them).
"""

import json
import lzma
import pathlib

import gguf
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

HERE = pathlib.Path(__file__).resolve().parent
SHARED = HERE.parents[3] / "shared"
TRAIN_FILE = SHARED / "corpus/train/gutenberg-train-00.txt.xz"
TRAIN_BYTES = 300_000
VOCAB_SIZE = 640

MULTILINGUAL = (
    "Café, naïve résumé; déjà vu à la française. Ça va? Übermäßig schön, straße. "
    "日本語のテキストです。日本語は難しい。東京と京都。 中文文本，你好世界。 "
    "Привет, мир! Это тест. Мир и труд. 안녕하세요 세계. Γειά σου κόσμε. "
    "١٢٣ ٤٥٦ — “quoted” ‘single’ … 😀😀 👍 ½ ² Ⅷ\n"
)
NUMERIC = (
    "In 1984 there were 12345 items at 3.14159 each, 1,000,000 in all; on 2024-01-15 about\n"
    "98765 more (42%) arrived. Call 555-0123 or 1234567890!\n\n  Totals: 100, 200, 300.\n"
)

# Appended after the trained merges, in this order; each side must already be a token.
EXTRA_MERGES = [
    ("1", "2"), ("12", "3"), ("123", "4"), ("1234", "5"), ("4", "5"), ("45", "6"), ("5", "6"),
    ("7", "8"), ("78", "9"), ("9", "0"), ("0", "0"), ("00", "0"), ("1", "4"), ("14", "1"),
    ("2", "0"), ("20", "2"), ("202", "4"), (" ", "1"), (" 1", "2"), (" ", "4"),
    ("(", "a"), ('"', "T"), ("\t", "b"), ("'", "S"), ("'", "L"), ("'L", "L"), ("'", "V"),
    ("'V", "e"), ("'", "s"), ("'", "t"), ("\n", "\n"), ("\n\n", "\n"), (" ", "\n"), ("!", "\n"),
    (".", "\n"), ("\r", "\n"), (" ", " "), ("  ", " "), ("!", "!"), ("?", "!"), ("+", "="),
    ("=", "="),
]

# A token no merge sequence builds: llama.cpp takes it whole only where the pre-tokenizer ignores
# merges for whole-word tokens (the llama-3 family).
WHOLE_WORD_ONLY = [" zebra"]

# Control tokens first (their ids are fixed by the trainer), then a user-defined one, which
# llama.cpp matches in text even without parse_special.
CONTROL = ["<|endoftext|>", "<|begin_of_text|>", "<|im_start|>", "<|im_end|>", "<|eot_id|>"]
USER_DEFINED = ["<tool_call>"]

# pre-tokenizer -> (bos, eos, add_bos_token or None for "absent", add_eos_token or None)
VARIANTS = {
    "llama-bpe": ("<|begin_of_text|>", "<|endoftext|>", True, None),
    "qwen2": ("<|endoftext|>", "<|im_end|>", False, None),
    "gpt-2": ("<|endoftext|>", "<|endoftext|>", None, None),
    "default": ("<|begin_of_text|>", "<|endoftext|>", None, True),
}


def training_texts():
    text = lzma.open(TRAIN_FILE, "rt", encoding="utf-8").read(TRAIN_BYTES)
    chunks = [text[i:i + 2000] for i in range(0, len(text), 2000)]
    return chunks + [MULTILINGUAL] * 20 + [NUMERIC] * 40


def gpt2_alphabet():
    """GPT-2's byte -> character map: printable Latin-1 bytes stand for themselves, the other 68
    take U+0100 onwards in byte order."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


def encode_bytes(text):
    table = gpt2_alphabet()
    return "".join(table[b] for b in text.encode("utf-8"))


def train():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=CONTROL + USER_DEFINED,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_texts(), trainer)
    model = json.loads(tok.to_str())["model"]
    vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in vocab]
    assert [i for _, i in vocab] == list(range(len(tokens))), "vocabulary ids are not dense"
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    known = set(tokens)
    for left, right in EXTRA_MERGES:
        a, b = encode_bytes(left), encode_bytes(right)
        assert a in known and b in known, f"merge {left!r} {right!r} needs both sides as tokens"
        merges.append(f"{a} {b}")
        if a + b not in known:
            tokens.append(a + b)
            known.add(a + b)
    tokens += [encode_bytes(w) for w in WHOLE_WORD_ONLY]
    return tokens, merges


def token_type(text):
    if text in CONTROL:
        return gguf.TokenType.CONTROL
    if text in USER_DEFINED:
        return gguf.TokenType.USER_DEFINED
    return gguf.TokenType.NORMAL


def write(pre, tokens, merges):
    bos, eos, add_bos, add_eos = VARIANTS[pre]
    path = HERE / f"bpe-{pre}.gguf"
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_name(f"veloxquant tokenizer fixture ({pre})")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([token_type(t) for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index(bos))
    w.add_eos_token_id(tokens.index(eos))
    if add_bos is not None:
        w.add_add_bos_token(add_bos)
    if add_eos is not None:
        w.add_add_eos_token(add_eos)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {path.name}: {len(tokens)} tokens, {len(merges)} merges, "
          f"{path.stat().st_size} bytes")


def main():
    tokens, merges = train()
    for pre in VARIANTS:
        write(pre, tokens, merges)


if __name__ == "__main__":
    main()
