#!/usr/bin/env python3
"""Writes tests/data/sentencepiece/: a small SentencePiece model trained as
Llama 2's was (BPE, byte fallback, digits split, the identity normalizer,
whitespace runs kept, a dummy prefix) and the ids the `sentencepiece`
package encodes the tokenizer corpus to, which
tests/unit/frontend/tokenizer/SentencePieceModelFile_test.cpp compares kvjit's
reading of tokenizer.model against.

  pip install sentencepiece==0.2.3 tokenizers==0.23.3 gguf
  python3 tools/scripts/sentencepiece_cases.py [--out DIR]

It trains on the license texts every Debian machine has
(/usr/share/common-licenses) and encodes the corpus of hf_tokenizer_cases.py
(many scripts, whitespace runs, digits, emoji, text that spells <s> and </s>)
with 1,000 texts. What it writes:
  llama_style.model     the model (the ModelProto protobuf)
  llama_style.ids.json  {"texts": [...], "ids": [...]}: for each text,
                        SentencePiece's ids (no BOS), and its decoded text
"""

import argparse
import glob
import io
import json
import os

import sentencepiece as spm

from hf_tokenizer_cases import corpus


def license_sentences():
    """The non-empty lines of the license texts every Debian machine has, the
    training text of the test models."""
    sentences = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                sentences.extend(line.rstrip("\n") for line in f if line.strip())
    return sentences


def train(out_path):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(license_sentences()), model_writer=model, model_type="bpe",
        vocab_size=1200, byte_fallback=True, split_digits=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=True, allow_whitespace_only_pieces=True,
        character_coverage=0.9995, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        user_defined_symbols=["<|user|>"], num_threads=1, minloglevel=2)
    with open(out_path, "wb") as f:
        f.write(model.getvalue())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                      "tests", "data", "sentencepiece"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    model_path = os.path.join(args.out, "llama_style.model")
    train(model_path)
    processor = spm.SentencePieceProcessor(model_file=model_path)
    texts = corpus(3, 1000, ["<s>", "</s>", "<unk>", "<|user|>"])
    ids = [processor.encode(text) for text in texts]
    decoded = [processor.decode(i) for i in ids]
    with open(os.path.join(args.out, "llama_style.ids.json"), "w", encoding="utf-8") as f:
        json.dump({"texts": texts, "ids": ids, "decoded": decoded}, f, ensure_ascii=False,
                  separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
