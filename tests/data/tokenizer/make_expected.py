#!/usr/bin/env python3
"""Records llama.cpp's tokenization of a list of tricky strings into JSON fixtures that
tests/runtime/tokenizer_test.cpp compares the C++ tokenizer with.

    scripts/llamacpp_venv.sh                                       # once: builds the oracle
    .venv-llamacpp/bin/python tests/data/tokenizer/make_bpe_fixtures.py
    .venv-llamacpp/bin/python tests/data/tokenizer/make_expected.py

For each vocabulary it writes expected-<name>.json: for every string the ids llama.cpp gives with
add_special / parse_special off and on, for every token its piece (llama_token_to_piece with
special=false) and whether it ends generation, and for stories260K what llama-cpp-python's
detokenize makes of the ids with BOS (it drops the space after BOS, as Tokenizer::decode does;
without a space prefix it would drop a space the text had, so the variant does not record it).
Texts and pieces are stored as hex so that malformed UTF-8 survives JSON.

Vocabularies: shared/models/stories260K.gguf (SentencePiece), the same vocabulary with
add_space_prefix=false and add_eos_token=true (written to a temporary file; the C++ test derives
the same metadata itself, so no copy of the shared model is committed), and the byte-level BPE
fixtures bpe-<pre>.gguf.
"""

import ctypes
import json
import pathlib
import sys
import tempfile

import gguf
import llama_cpp

HERE = pathlib.Path(__file__).resolve().parent
SHARED = HERE.parents[3] / "shared"
STORIES = SHARED / "models/stories260K.gguf"
BPE_PRES = ["llama-bpe", "qwen2", "gpt-2", "default"]
# Real text, read in place at test time (shared data is not copied into the project): the ids of
# a few of its lines are stored, and of the whole file a count and a hash.
CORPUS = "corpus/wikitext-2-raw/wiki.test.raw"

# str entries are UTF-8 encoded; bytes entries are passed as they are (malformed UTF-8).
STRINGS = [
    "",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    " \n ",
    "  \n  x",
    "a\tb",
    "Hello world",
    " Hello world",
    "Hello  world",
    "Hello world ",
    "Hello world  ",
    "   leading",
    "trailing   ",
    "multiple   spaces   here",
    "hello\n\n\nworld",
    "line one\nline two\r\nline three",
    "Once upon a time, there was a little girl named Lily.",
    "She liked to play outside. One day, she saw a big, red ball!",
    "12345",
    "3.14",
    "1,000,000 and 2024-01-15",
    "1234567890",
    "a1b22c333d4444",
    "Hello, world! How's it going?",
    "don't",
    "DON'T",
    "I'll we've they're she's I'm he'd",
    "'s 'S 'll 'LL 're 'Ve",
    "rock 'n' roll",
    "x==y && z!=w || (a+b)*c",
    "x+=1; y==2",
    '"The (a) end." \'Tis',
    "It'S 'Ve 'LL 'd",
    " 1234 4 45 12 1",
    "Hi!!\nthere?!\n\n\nend.\n",
    "\t\tb \tb",
    "a  \n\n  b",
    "20240115 3.14159",
    "a zebra, zebras and a Zebra",
    "$100 + 50% = ~150 <tag> ^_^ |pipe|",
    "...",
    "?!?",
    "email@example.com http://x.org/a?b=c#d",
    "é",
    "café",
    "naïve résumé déjà vu",
    "e\u0301",
    "Übermäßig schön",
    "日本語",
    "日本語のテキストです。",
    "中文文本，你好世界",
    "Привет, мир!",
    "안녕하세요",
    "Γειά σου κόσμε",
    "١٢٣ ٤٥٦",
    "½ ² Ⅷ",
    "😀",
    "😀😀 👍",
    "👨\u200d👩\u200d👧",
    "\u00a0nbsp\u00a0",
    "ideographic\u3000space",
    "\u2581already escaped",
    "“quoted” ‘single’ …",
    "<s>",
    "</s>",
    "<unk>",
    "<s>Hello</s>",
    " <s> ",
    "<|endoftext|>",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|>Hello<|eot_id|>",
    "call <tool_call>now</tool_call>",
    "<tool_call><tool_call>",
    b"\xff\xfe",
    b"abc\xe6\x97",
    b"\xc3(",
    b"\x80\x80x",
    b"\xf0\x9f\x98",
    b"\xed\xa0\x80 surrogate",
    b"\xc0\x80 overlong",
    b"nul\x00byte",
]


def as_bytes(s):
    return s if isinstance(s, bytes) else s.encode("utf-8")


def readable(b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


class Oracle:
    """One vocabulary loaded by llama.cpp (vocab only)."""

    def __init__(self, path):
        self.llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        self.vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self.n = llama_cpp.llama_vocab_n_tokens(self.vocab)

    def tokenize(self, text, add_special, parse_special):
        return list(self.llm.tokenize(text, add_bos=add_special, special=parse_special))

    def piece(self, token):
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, False)
        assert 0 <= n <= len(buf), f"piece of {token} did not fit"
        return buf.raw[:n]

    def is_eog(self, token):
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))


def record(name, path, source, detokenize, corpus=True):
    oracle = Oracle(path)
    cases = []
    for s in STRINGS:
        b = as_bytes(s)
        case = {
            "hex": b.hex(),
            "text": readable(b),
            "ids": oracle.tokenize(b, False, False),
            "ids_add_special": oracle.tokenize(b, True, False),
            "ids_parse_special": oracle.tokenize(b, False, True),
        }
        if detokenize:
            case["detokenize_add_special"] = oracle.llm.detokenize(case["ids_add_special"]).hex()
        cases.append(case)
    out = {
        "source": source,
        "llama_cpp_python": llama_cpp.__version__,
        "vocab_size": oracle.n,
        "bos": llama_cpp.llama_vocab_bos(oracle.vocab),
        "eos": llama_cpp.llama_vocab_eos(oracle.vocab),
        "pieces": [oracle.piece(t).hex() for t in range(oracle.n)],
        "end_of_generation": [t for t in range(oracle.n) if oracle.is_eog(t)],
        "cases": cases,
    }
    if corpus:
        out["corpus"] = record_corpus(oracle)
    target = HERE / f"expected-{name}.json"
    target.write_text(compact_json(out))
    print(f"wrote {target.name}: {len(cases)} strings, {oracle.n} tokens")


def fnv1a64(ids):
    """FNV-1a over the ids as little-endian int32, the C++ test's digest of a long tokenization."""
    h = 0xCBF29CE484222325
    for t in ids:
        for byte in (t & 0xFFFFFFFF).to_bytes(4, "little"):
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def corpus_lines():
    """1-based numbers of the corpus lines whose ids are stored: the first 8 that are not blank
    and the first 6 with non-ASCII characters."""
    lines = (SHARED / CORPUS).read_bytes().split(b"\n")
    plain = [i for i, line in enumerate(lines) if line.strip()][:8]
    wide = [i for i, line in enumerate(lines) if any(b >= 0x80 for b in line)][:6]
    return lines, sorted(set(plain + wide))


def record_corpus(oracle):
    lines, chosen = corpus_lines()
    whole = oracle.tokenize((SHARED / CORPUS).read_bytes(), False, False)
    return {
        "file": CORPUS,
        "lines": [{"line": i + 1, "ids": oracle.tokenize(lines[i], False, False)} for i in chosen],
        "whole_file": {"tokens": len(whole), "fnv1a64": fnv1a64(whole)},
    }


def compact_json(obj):
    """One line per top-level key, per case and per corpus line, so that fixtures diff well."""
    def dump(v):
        return json.dumps(v, ensure_ascii=False)

    def rows(items):
        return "[\n" + ",\n".join("  " + dump(i) for i in items) + "\n]"

    lines = []
    for key, value in obj.items():
        if key == "cases":
            lines.append(f"{dump(key)}: {rows(value)}")
        elif key == "corpus":
            inner = ", ".join(f"{dump(k)}: {rows(v) if k == 'lines' else dump(v)}"
                              for k, v in value.items())
            lines.append(f"{dump(key)}: {{{inner}}}")
        else:
            lines.append(f"{dump(key)}: {dump(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write_spm_variant(target):
    """stories260K's tokenizer metadata with add_space_prefix=false and add_eos_token=true."""
    reader = gguf.GGUFReader(str(STORIES))
    f = reader.fields
    tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8")
              for i in f["tokenizer.ggml.tokens"].data]
    scores = [float(f["tokenizer.ggml.scores"].parts[i][0])
              for i in f["tokenizer.ggml.scores"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0])
             for i in f["tokenizer.ggml.token_type"].data]
    w = gguf.GGUFWriter(str(target), arch="llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_space_prefix(False)
    w.add_add_eos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    if not STORIES.exists():
        sys.exit(f"missing {STORIES}")
    record("stories260k", STORIES, "shared:models/stories260K.gguf", detokenize=True)
    with tempfile.TemporaryDirectory() as tmp:
        variant = pathlib.Path(tmp) / "spm-variant.gguf"
        write_spm_variant(variant)
        record("stories260k-variant", variant,
               "shared:models/stories260K.gguf tokenizer, add_space_prefix=false, "
               "add_eos_token=true", detokenize=False, corpus=False)
    for pre in BPE_PRES:
        record(f"bpe-{pre}", HERE / f"bpe-{pre}.gguf", f"bpe-{pre}.gguf", detokenize=False)


if __name__ == "__main__":
    main()
