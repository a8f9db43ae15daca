#!/usr/bin/env python3
"""Splits a GGUF model into parts as llama.cpp's `llama-gguf-split --split
--split-max-tensors N` does, with the gguf package's own split writer (the
one llama.cpp's converters use): PREFIX-00001-of-0000K.gguf onwards, the
first part holding the metadata, each holding at most N tensors, and
split.no / split.count / split.tensors.count in every part.

    tools/scripts/split_gguf.py IN.gguf OUT_PREFIX --max_tensors N

writes OUT_PREFIX-00001-of-0000K.gguf ... and prints their paths.
"""
import argparse
import pathlib
import sys

import gguf


def copy_metadata(reader: gguf.GGUFReader, writer: gguf.GGUFWriter) -> None:
    for field in reader.fields.values():
        # The header's own fields, the architecture (the writer adds it) and
        # an earlier split's keys are not the model's metadata.
        if (field.name.startswith("GGUF.") or field.name == gguf.Keys.General.ARCHITECTURE
                or field.name.startswith("split.")):
            continue
        # The writer lays its data out by its own alignment: tell it.
        if field.name == gguf.Keys.General.ALIGNMENT:
            writer.add_custom_alignment(int(field.contents()))
            continue
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), value_type, sub_type=sub_type)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input")
    parser.add_argument("output_prefix")
    parser.add_argument("--max_tensors", type=int, required=True)
    args = parser.parse_args()
    reader = gguf.GGUFReader(args.input)
    architecture = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    output = pathlib.Path(args.output_prefix + ".gguf")
    writer = gguf.GGUFWriter(output, architecture, split_max_tensors=args.max_tensors)
    copy_metadata(reader, writer)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, tensor.data, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    for path in writer.format_shard_names(output):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
