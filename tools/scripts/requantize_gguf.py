#!/usr/bin/env python3
"""Requantizes a GGUF model with llama.cpp's own quantizer (llama_model_quantize,
through llama-cpp-python), for benchmarks of weight types no fetched model has.

    $(tools/scripts/reference_env.sh | tail -n1) tools/scripts/requantize_gguf.py IN.gguf OUT.gguf q4_k_m

Requantizing an already quantized model compounds the rounding; the result is
for measuring speed, not quality. Tensors whose rows the type cannot hold (a
K-quant needs a multiple of 256 columns) fall back as llama.cpp decides, as in
any published Q4_K_M GGUF of the same model.
"""
import argparse
import ctypes
import sys

import llama_cpp

FILE_TYPES = {
    "q4_k_m": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M,
    "q5_k_m": llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_K_M,
    "q6_k": llama_cpp.LLAMA_FTYPE_MOSTLY_Q6_K,
    "q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0,
    "f16": llama_cpp.LLAMA_FTYPE_MOSTLY_F16,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("type", choices=sorted(FILE_TYPES))
    args = parser.parse_args()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FILE_TYPES[args.type]
    params.allow_requantize = True
    params.nthread = 1
    status = llama_cpp.llama_model_quantize(args.input.encode(), args.output.encode(), ctypes.byref(params))
    if status != 0:
        print(f"requantize_gguf.py: llama_model_quantize({args.input} -> {args.output}, {args.type}) failed: {status}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
