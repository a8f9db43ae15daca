#!/usr/bin/env python3
"""Checks that two GGUF files hold the same model: every tensor (name, type,
shape, bytes) and every metadata key and value, whatever their order in the
files. Prints each difference and exits 1 where there is one.

  gguf_equal.py EXPECTED.gguf ACTUAL.gguf

regen_transformers_data.sh checks with it that write_transformers_weights.py
writes what llama.cpp's convert_hf_to_gguf.py writes.
"""
import argparse
import sys

import gguf
import numpy as np


def metadata(reader):
    """{key: value} of the file's key-value pairs (GGUF.* are the header's counts)."""
    values = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        values[key] = field.contents()
    return values


def tensors(reader):
    return {t.name: t for t in reader.tensors}


def differences(expected_path, actual_path):
    expected, actual = gguf.GGUFReader(expected_path), gguf.GGUFReader(actual_path)
    found = []
    expected_keys, actual_keys = metadata(expected), metadata(actual)
    for key in sorted(set(expected_keys) | set(actual_keys)):
        if key not in actual_keys:
            found.append("metadata %s: missing (expected %r)" % (key, expected_keys[key]))
        elif key not in expected_keys:
            found.append("metadata %s: not expected (%r)" % (key, actual_keys[key]))
        elif expected_keys[key] != actual_keys[key]:
            found.append("metadata %s: %r, expected %r" % (key, actual_keys[key], expected_keys[key]))
    expected_tensors, actual_tensors = tensors(expected), tensors(actual)
    for name in sorted(set(expected_tensors) | set(actual_tensors)):
        if name not in actual_tensors:
            found.append("tensor %s: missing" % name)
            continue
        if name not in expected_tensors:
            found.append("tensor %s: not expected" % name)
            continue
        want, got = expected_tensors[name], actual_tensors[name]
        if want.tensor_type != got.tensor_type:
            found.append("tensor %s: type %s, expected %s" % (name, got.tensor_type.name, want.tensor_type.name))
        elif list(want.shape) != list(got.shape):
            found.append("tensor %s: shape %s, expected %s" % (name, list(got.shape), list(want.shape)))
        elif not np.array_equal(np.asarray(want.data).view(np.uint8), np.asarray(got.data).view(np.uint8)):
            found.append("tensor %s: different bytes" % name)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("expected")
    parser.add_argument("actual")
    args = parser.parse_args()
    found = differences(args.expected, args.actual)
    for difference in found:
        print("gguf_equal.py: %s differs from %s: %s" % (args.actual, args.expected, difference), file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
