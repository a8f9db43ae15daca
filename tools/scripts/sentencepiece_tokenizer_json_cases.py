#!/usr/bin/env python3
"""Writes tests/data/hf_tokenizers/sp_*: tokenizer.json files in the
SentencePiece layouts that Llama 2, Mistral, Gemma and Phi-3 publish, made
the way those files are made (a SentencePiece model through the converters
of transformers/convert_slow_tokenizer.py), and the ids, ids with the
post-processor's BOS and decoded texts the Hugging Face `tokenizers` package
gives for a random-text corpus, which kvjit's tokenizer.json reader is
compared against.

  pip install sentencepiece==0.2.3 tokenizers==0.23.3 gguf protobuf httpx
  pip install --no-deps transformers==5.0.0
  python3 tools/scripts/sentencepiece_tokenizer_json_cases.py [--out DIR] [--sp-dir DIR]

transformers 5.0.0 asks for tokenizers<=0.23.0 and huggingface-hub<2.0 and
checks that when it is imported; this script keeps tokenizers 0.23.3 (it
checks the version), so it installs transformers without its dependencies
and skips that import-time check (transformers.dependency_versions_check).
Only transformers' converter code runs, never its hub code.

transformers 5.0.0's LlamaConverter and GemmaConverter cannot convert a BPE
SentencePiece model as shipped: SpmConverter.tokenizer() calls
`SpmExtractor(vocab_file).extract(vocab_scores)` and expects (vocab, merges),
but 5.0.0's SentencePieceExtractor.extract takes a model class, and
GemmaSentencePieceExtractor.extract reads a `self.sp` nobody sets (both raise).
The converters here get the extractor of transformers 4.x instead (vocab from
the SentencePiece model; merges from transformers' own generate_merges,
ordered by the converter's piece scores; for Gemma, 5.0.0's own
GemmaSentencePieceExtractor.extract with the `sp` it lacks). Everything else
(vocab, added tokens, normalizer, pre-tokenizer, decoder) is the converters'
own code, and the post-processor is the one transformers' TokenizersBackend
(LlamaTokenizerFast before v5) sets with add_bos_token=True.

Models (--sp-dir, default tests/data/sentencepiece):
  llama_style.model  read; written by sentencepiece_cases.py
  gemma_style.model  written here: trained as Gemma's was (BPE, byte
                     fallback, digits split, identity normalizer, whitespace
                     kept, no dummy prefix, <pad> <eos> <bos> <unk> as ids
                     0-3, <mask> a control symbol, <start_of_turn>,
                     <end_of_turn>, newline and ▁ runs, <table> user-defined)

What it writes (--out, default tests/data/hf_tokenizers), for each variant:
  sp_<name>.tokenizer.json  the tokenizer as `tokenizers` saves it
  sp_<name>.cases.json      {"texts": [...], "ids": [...] (encode without
                            special tokens), "ids_with_special": [...]
                            (add_special_tokens=True: the post-processor's
                            BOS), "decoded": [...] (decode of "ids" with
                            skip_special_tokens=True)}
The variants:
  llama_legacy            LlamaConverter, legacy=True: normalizer
                          Sequence[Prepend ▁, Replace " "->▁], no pre-tokenizer
  llama_metaspace         LlamaConverter, legacy=False: no normalizer,
                          Metaspace(prepend_scheme first, split false)
  gemma                   GemmaConverter on gemma_style.model
  metaspace_always_split  llama_metaspace with Metaspace(always, split true)
                          and decoder Sequence[ByteFallback, Metaspace(same)]
  metaspace_never         llama_metaspace with Metaspace(never, split false)
                          and the Metaspace(never) decoder alone
  normalizers             llama_legacy with normalizer Sequence[Strip both,
                          Lowercase, NFKC, Replace Regex(" {2,}")->" ",
                          Prepend ▁, Replace " "->▁]
  unk_no_fallback         llama_legacy with byte_fallback false (fuse_unk true)
  unk_unfused             llama_legacy with byte_fallback and fuse_unk false
  ignore_merges           llama_metaspace with ignore_merges true
  added_flags             llama_metaspace plus added tokens with AddedToken
                          flags: <|lstrip|> (special, lstrip), <|rstrip|>
                          (special, rstrip), fox (single_word), hello
                          (normalized), ing (not normalized; already vocab
                          piece, so it keeps that id)
  added_flags_legacy      the same added tokens on llama_legacy
Each variant's 1,000 texts are 650 of hf_tokenizer_cases.py's corpus
(spelling the variant's added tokens), 250 with the added tokens right next
to words, spaces and newlines, and 100 that are whole vocabulary pieces.
"""

import argparse
import importlib
import io
import json
import os
import random
import sys
import types

import sentencepiece as spm
import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers
from tokenizers import pre_tokenizers

from hf_tokenizer_cases import WORDS, corpus
from sentencepiece_cases import license_sentences

TOKENIZERS_VERSION = "0.23.3"
TRANSFORMERS_VERSION = "5.0.0"

LLAMA_SPECIALS = ["<s>", "</s>", "<unk>", "<|user|>"]
GEMMA_SPECIALS = ["<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "<start_of_turn>",
                  "<end_of_turn>", "<table>", "▁▁", "\n\n"]
GEMMA_USER_SYMBOLS = ["<start_of_turn>", "<end_of_turn>", "\n", "\n\n", "▁▁", "▁▁▁▁",
                      "<table>"]

# The added tokens of the added_flags variants: (content, special, flags).
FLAG_TOKENS = [
    ("<|lstrip|>", True, {"lstrip": True, "normalized": False}),
    ("<|rstrip|>", True, {"rstrip": True, "normalized": False}),
    ("fox", False, {"single_word": True, "normalized": False}),
    ("hello", False, {"normalized": True}),
    ("ing", False, {"normalized": False}),
]
# Words that put the flag tokens inside, before and after other words.
EXTRA_WORDS = ["hello", "Hello", "hellohello", "firefox", "foxy", "fox", "tokenizing",
               "ing", "ring", "ingot", "▁hello", "▁", "x", "_", "1", ".", "é", "日本",
               "<0x41>", "<0xE6>"]
GLUE = ["", "", "", " ", " ", "  ", "\n", " \n", "\n ", "\t", "\n\n", "   "]


def transformers_converters():
    """transformers' convert_slow_tokenizer module and its SentencePiece
    backend, imported without 5.0.0's dependency version check."""
    assert tokenizers.__version__ == TOKENIZERS_VERSION, tokenizers.__version__
    sys.modules.setdefault("transformers.dependency_versions_check",
                           types.ModuleType("transformers.dependency_versions_check"))
    import transformers
    converters = importlib.import_module("transformers.convert_slow_tokenizer")
    from transformers.tokenization_utils_sentencepiece import SentencePieceBackend
    from transformers.tokenization_utils_tokenizers import TokenizersBackend
    assert transformers.__version__ == TRANSFORMERS_VERSION, transformers.__version__
    return converters, SentencePieceBackend, TokenizersBackend


def train_gemma_style(out_path):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(license_sentences()), model_writer=model, model_type="bpe",
        vocab_size=1200, byte_fallback=True, split_digits=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=False, allow_whitespace_only_pieces=True,
        character_coverage=0.9995, pad_id=0, eos_id=1, bos_id=2, unk_id=3,
        pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>",
        control_symbols=["<mask>"], user_defined_symbols=GEMMA_USER_SYMBOLS,
        num_threads=1, minloglevel=2)
    with open(out_path, "wb") as f:
        f.write(model.getvalue())


def converted(kind, model_path, legacy=True):
    """The tokenizers.Tokenizer transformers makes of a SentencePiece model:
    the converter's output plus the post-processor TokenizersBackend sets."""
    converters, SentencePieceBackend, TokenizersBackend = transformers_converters()

    class Extractor(converters.SentencePieceExtractor):
        # transformers 4.x's SentencePieceExtractor.extract.
        def __init__(self, model):
            super().__init__(model)
            self.sp = spm.SentencePieceProcessor(model_file=model)

        def extract(self, vocab_scores=None):
            vocab = {self.sp.id_to_piece(i): i for i in range(self.sp.get_piece_size())}
            return vocab, converters.generate_merges(vocab, vocab_scores)

    class GemmaExtractor(converters.GemmaSentencePieceExtractor):
        def __init__(self, model):
            super().__init__(model)
            self.sp = spm.SentencePieceProcessor(model_file=model)

    if kind == "llama":
        class Converter(converters.LlamaConverter):
            SpmExtractor = Extractor
        names = {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}
    else:
        class Converter(converters.GemmaConverter):
            SpmExtractor = GemmaExtractor
        names = {"unk_token": "<unk>", "bos_token": "<bos>", "eos_token": "<eos>",
                 "pad_token": "<pad>"}
    original = SentencePieceBackend(vocab_file=model_path, legacy=legacy, **names)
    tokenizer = Converter(original).converted()
    backend = TokenizersBackend(tokenizer_object=tokenizer, add_bos_token=True,
                                add_eos_token=False, **names)
    return Tokenizer.from_str(backend.backend_tokenizer.to_str())


def edited(tokenizer, edit):
    """A copy of `tokenizer` whose JSON `edit` changed in place."""
    data = json.loads(tokenizer.to_str())
    edit(data)
    return Tokenizer.from_str(json.dumps(data))


def variants(llama_model, gemma_model):
    legacy = converted("llama", llama_model, legacy=True)
    metaspace = converted("llama", llama_model, legacy=False)
    gemma = converted("gemma", gemma_model)
    out = {"llama_legacy": legacy, "llama_metaspace": metaspace, "gemma": gemma}

    always = Tokenizer.from_str(metaspace.to_str())
    always.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always",
                                                    split=True)
    always.decoder = decoders.Sequence([
        decoders.ByteFallback(),
        decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)])
    out["metaspace_always_split"] = always

    never = Tokenizer.from_str(metaspace.to_str())
    never.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never",
                                                   split=False)
    never.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="never", split=False)
    out["metaspace_never"] = never

    norm = Tokenizer.from_str(legacy.to_str())
    norm.normalizer = normalizers.Sequence([
        normalizers.Strip(left=True, right=True), normalizers.Lowercase(),
        normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " "),
        normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    out["normalizers"] = norm

    def no_fallback(fuse):
        def edit(data):
            data["model"]["byte_fallback"] = False
            data["model"]["fuse_unk"] = fuse
        return edit
    out["unk_no_fallback"] = edited(legacy, no_fallback(True))
    out["unk_unfused"] = edited(legacy, no_fallback(False))
    out["ignore_merges"] = edited(
        metaspace, lambda data: data["model"].__setitem__("ignore_merges", True))

    for name, base in (("added_flags", metaspace), ("added_flags_legacy", legacy)):
        tokenizer = Tokenizer.from_str(base.to_str())
        for content, special, flags in FLAG_TOKENS:
            token = AddedToken(content, special=special, **flags)
            if special:
                tokenizer.add_special_tokens([token])
            else:
                tokenizer.add_tokens([token])
        out[name] = tokenizer
    return out


def adjacent_texts(rng, count, tokens, words):
    """Added tokens right next to words, spaces and newlines."""
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 7)):
            parts.append(rng.choice(tokens) if rng.random() < 0.5 else rng.choice(words))
            parts.append(rng.choice(GLUE))
        text = "".join(parts)
        texts.append(text if rng.random() < 0.7 else rng.choice(GLUE) + text)
    return texts


def piece_texts(rng, count, tokenizer):
    """Texts that are whole vocabulary pieces (▁ as a space), with and
    without the leading space, some after an added token; a few spell a
    byte-fallback piece such as <0x41> (which ignore_merges finds whole)."""
    added = {token.content for token in tokenizer.get_added_tokens_decoder().values()}
    pieces = sorted(piece for piece in tokenizer.get_vocab(with_added_tokens=False)
                    if piece not in added and not piece.startswith("<0x"))
    byte_pieces = ["<0x%02X>" % byte for byte in range(256)]
    texts = []
    for _ in range(count):
        text = rng.choice(pieces if rng.random() < 0.7 else byte_pieces).replace("▁", " ")
        kind = rng.random()
        if kind < 0.4:
            text = text.lstrip(" ") or text
        elif kind < 0.8:
            text = rng.choice(sorted(added)) + text
        texts.append(text)
    return texts


def cases(tokenizer, texts):
    ids = [tokenizer.encode(text, add_special_tokens=False).ids for text in texts]
    return {"texts": texts, "ids": ids,
            "ids_with_special": [tokenizer.encode(text, add_special_tokens=True).ids
                                 for text in texts],
            "decoded": [tokenizer.decode(i, skip_special_tokens=True) for i in ids]}


def sentencepiece_agreement(tokenizer, model_path, texts, specials):
    """How many texts `sentencepiece` encodes to the same ids (texts that
    spell added tokens left out: SentencePiece reads those as text)."""
    processor = spm.SentencePieceProcessor(model_file=model_path)
    plain = [text for text in texts if not any(token in text for token in specials)]
    same = sum(processor.encode(text) == tokenizer.encode(text, add_special_tokens=False).ids
               for text in plain)
    return "  agrees with sentencepiece on %d of %d texts spelling no added token" % (
        same, len(plain))


def summary(path):
    """One line per pipeline part of a tokenizer.json."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    model = {k: v for k, v in data["model"].items() if k not in ("vocab", "merges")}
    model["vocab"] = len(data["model"]["vocab"])
    model["merges"] = len(data["model"]["merges"])
    added = [{k: v for k, v in token.items() if v is not False}
             for token in data["added_tokens"]]
    lines = [os.path.basename(path)]
    for key in ("normalizer", "pre_tokenizer", "decoder", "post_processor"):
        value = data[key]
        if key == "post_processor" and value:
            value = {"single": value.get("single"), "pair": value.get("pair")}
        lines.append("  %-15s %s" % (key, json.dumps(value, ensure_ascii=False)))
    lines.append("  %-15s %s" % ("model", json.dumps(model, ensure_ascii=False)))
    lines.append("  %-15s %s" % ("added_tokens", json.dumps(added, ensure_ascii=False)))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    parser.add_argument("--out", default=os.path.join(root, "tests", "data", "hf_tokenizers"))
    parser.add_argument("--sp-dir", default=os.path.join(root, "tests", "data", "sentencepiece"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    llama_model = os.path.join(args.sp_dir, "llama_style.model")
    gemma_model = os.path.join(args.sp_dir, "gemma_style.model")
    train_gemma_style(gemma_model)

    words = WORDS + EXTRA_WORDS
    flag_texts = [content for content, _, _ in FLAG_TOKENS] + ["▁hello"]
    for seed, (name, tokenizer) in enumerate(variants(llama_model, gemma_model).items(), 10):
        specials = GEMMA_SPECIALS if name == "gemma" else LLAMA_SPECIALS
        if name.startswith("added_flags"):
            specials = specials + flag_texts
        rng = random.Random(seed)
        # 1,000 texts (the data of all variants stays under 6 MB).
        texts = corpus(seed, 650, specials)
        texts += adjacent_texts(rng, 250, specials, words)
        texts += piece_texts(rng, 100, tokenizer)
        json_path = os.path.join(args.out, "sp_%s.tokenizer.json" % name)
        tokenizer.save(json_path, pretty=False)
        data = cases(tokenizer, texts)
        with open(os.path.join(args.out, "sp_%s.cases.json" % name), "w",
                  encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")

        # The file as written encodes and decodes the same.
        reloaded = Tokenizer.from_file(json_path)
        assert cases(reloaded, texts) == data, name
        print(summary(json_path))
        if name in ("llama_legacy", "gemma"):
            print(sentencepiece_agreement(
                reloaded, gemma_model if name == "gemma" else llama_model, texts,
                GEMMA_SPECIALS + GEMMA_USER_SYMBOLS if name == "gemma" else LLAMA_SPECIALS))


if __name__ == "__main__":
    main()
