#!/usr/bin/env python3
"""Writes tests/data/hf_tokenizers/: tokenizer.json files and the ids the
Hugging Face `tokenizers` package gives for a random-text corpus, which
tests/unit/frontend/tokenizer/HfTokenizerPipeline_test.cpp compares kvjit's
tokenizer.json reader against.

  pip install tokenizers==0.23.3 gguf
  python3 tools/scripts/hf_tokenizer_cases.py [--gguf PATH] [--out DIR]

What it writes:
  corpus.json            the texts, a JSON list of strings
  <name>.tokenizer.json  small trained tokenizers in the layouts of Llama 3 and
                         Qwen2.5 (and one exercising every Split behaviour)
  <name>.ids.json        for each text, the ids `tokenizers` encodes it to
                         (add_special_tokens=False)
  smollm2.ids.json       the same for SmolLM2's tokenizer.json, which is not
                         committed (2 MiB): the test rebuilds it from the GGUF
                         exactly as smollm2_tokenizer_json() below does.
"""

import argparse
import json
import os
import random

import gguf
from tokenizers import Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
                  r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
                 r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS = ("the quick brown fox jumps over lazy dog it's they're we'll I'd "
         "HELLO World tokenizer Llama Qwen SmolLM don't WON'T café naïve "
         "résumé Ångström straße İstanbul ΣΟΦΊΑ σοφία Москва привет 日本語 "
         "中文字符 한국어 العربية हिन्दी ﬁle ①②③ ½ ² Ⅻ ١٢٣ ๑๒").split()
CODE = ["def f(x):\n    return x**2\n", "int main() { return 0; }",
        "for (i = 0; i < 10; ++i) {\n\tsum += a[i];\n}",
        "if x != None and y >= 3.14:", "<div class=\"a\">&amp;</div>",
        "SELECT * FROM t WHERE id=42;", "// comment\r\n/* block */",
        "$HOME/.cache/kvjit", "foo_bar-baz.qux@example.com",
        "https://example.org/a?b=1&c=2#d"]
# Decomposed accents (NFC composes them), compatibility forms (NFKC folds
# them) and whitespace that regex engines class differently.
ODDITIES = ["e\u0301", "a\u0308", "n\u0303o", "\u212b", "\ufb01", "\u00a0",
            "\u3000", "\u2028", "\u000b", "\u000c", "\u0085", "\u200b",
            "\U0001f600", "\U0001f44d\U0001f3fd", "\u2163", "\uff21\uff22"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t \t",
          "      "]


def random_text(rng, special_tokens):
    parts = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.35:
            parts.append(rng.choice(WORDS))
        elif kind < 0.5:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
        elif kind < 0.6:
            parts.append(rng.choice(CODE))
        elif kind < 0.72:
            parts.append(rng.choice(ODDITIES))
        elif kind < 0.8:
            parts.append(rng.choice("!?.,;:'\"()[]{}-_*/\\+=#@%^&|~`<>"))
        elif kind < 0.85 and special_tokens:
            parts.append(rng.choice(special_tokens))
        else:
            parts.append("".join(chr(rng.randint(0x20, 0x2fff))
                                 for _ in range(rng.randint(1, 4))))
        parts.append(rng.choice(SPACES) if rng.random() < 0.3 else " ")
    text = "".join(parts)
    # Some texts start or end with whitespace, some do not.
    return text if rng.random() < 0.3 else text.strip()


def corpus(seed, count, special_tokens):
    rng = random.Random(seed)
    texts = ["", " ", "\n", "123", "1234567", " 12 345", "Hello world",
             " Hello", "hello  world", "it's", "IT'S", "a\u0301\u0301",
             "e\u0301t\u00e9", "\u00c5\u212b"]
    while len(texts) < count:
        text = random_text(rng, special_tokens)
        # Characters outside the Basic Multilingual Plane's surrogate range
        # only: JSON strings cannot carry lone surrogates to C++.
        if not any(0xd800 <= ord(c) <= 0xdfff for c in text):
            texts.append(text)
    return texts


def trained(pre_tokenizer, normalizer, special_tokens, ignore_merges):
    tokenizer = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if normalizer is not None:
        tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000, special_tokens=special_tokens, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(corpus(1, 3000, []), trainer)
    # A non-special added token, which `tokenizers` also finds in any text.
    tokenizer.add_tokens(["<tool_call>"])
    return tokenizer


def small_tokenizers():
    llama3 = trained(
        pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated",
                                 invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                     use_regex=False)]),
        None, ["<|begin_of_text|>", "<|eot_id|>"], ignore_merges=True)
    qwen25 = trained(
        pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated",
                                 invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False,
                                     trim_offsets=False, use_regex=False)]),
        normalizers.NFC(), ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        ignore_merges=False)
    # Every Split behaviour, inversion, literal patterns, Digits and the
    # other normalizers, in no real model's arrangement.
    split_behaviors = trained(
        pre_tokenizers.Sequence([
            pre_tokenizers.Split(";", behavior="removed"),
            pre_tokenizers.Split(Regex(r"\s+"), behavior="merged_with_next"),
            pre_tokenizers.Split(Regex(r"[.,!?]"), behavior="merged_with_previous"),
            pre_tokenizers.Split(Regex(r"[()\[\]{}]"), behavior="contiguous"),
            pre_tokenizers.Split(Regex(r"\p{L}+"), behavior="isolated",
                                 invert=True),
            pre_tokenizers.Digits(individual_digits=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]),
        normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()]),
        ["<s>"], ignore_merges=False)
    nfd = trained(
        pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]),
        normalizers.Sequence([normalizers.NFD(), normalizers.NFKD()]),
        ["<s>"], ignore_merges=False)
    return {"llama3_style": llama3, "qwen25_style": qwen25,
            "split_behaviors": split_behaviors, "nfd_digits": nfd}


def field_values(reader, key):
    field = reader.get_field(key)
    return [field.contents(index) for index in range(len(field.data))]


def smollm2_tokenizer_json(gguf_path):
    """SmolLM2's tokenizer.json rebuilt from its GGUF: every token in
    model.vocab, control (type 3) and user-defined (type 4) tokens also in
    added_tokens, and the pre-tokenizer of SmolLM2's official file."""
    reader = gguf.GGUFReader(gguf_path)
    tokens = field_values(reader, "tokenizer.ggml.tokens")
    types = field_values(reader, "tokenizer.ggml.token_type")
    merges = [merge.split(" ", 1)
              for merge in field_values(reader, "tokenizer.ggml.merges")]
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": kind == 3}
             for i, (t, kind) in enumerate(zip(tokens, types))
             if kind in (3, 4)]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False,
             "trim_offsets": True, "use_regex": True}]},
        "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": merges}}


def write_json(path, value, indent=None):
    with open(path, "w", encoding="utf-8") as out:
        json.dump(value, out, ensure_ascii=False, indent=indent)
        out.write("\n")


def ids_of(tokenizer, texts):
    return [tokenizer.encode(text, add_special_tokens=False).ids
            for text in texts]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", default=os.path.expanduser(
        "~/.cache/kvjit/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    parser.add_argument("--out", default=os.path.join(
        os.path.dirname(__file__), "..", "..", "tests", "data",
        "hf_tokenizers"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    special_texts = ["<|im_start|>", "<|im_end|>", "<|endoftext|>",
                     "<|begin_of_text|>", "<|eot_id|>", "<tool_call>", "<s>"]
    texts = corpus(2, 300, special_texts)
    write_json(os.path.join(args.out, "corpus.json"), texts, indent=0)
    for name, tokenizer in small_tokenizers().items():
        tokenizer.save(os.path.join(args.out, name + ".tokenizer.json"),
                       pretty=False)
        write_json(os.path.join(args.out, name + ".ids.json"),
                   ids_of(tokenizer, texts))

    smollm2 = Tokenizer.from_str(json.dumps(smollm2_tokenizer_json(args.gguf)))
    write_json(os.path.join(args.out, "smollm2.ids.json"),
               ids_of(smollm2, texts))


if __name__ == "__main__":
    main()
