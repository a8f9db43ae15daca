"""Checks kvjit perplexity --kl_divergence output against bounds.

    check_kl.py OUTPUT MAX_MEAN_KLD MIN_SAME_TOP_PERCENT

Prints "within bounds", or what is out of them (and exits 1); a NaN or a
missing figure is out of bounds.
"""

import math
import re
import sys

text = open(sys.argv[1]).read()
max_kld, min_top = float(sys.argv[2]), float(sys.argv[3])
kld = re.search(r"Mean KLD\s*:\s*(\S+)", text)
top = re.search(r"Same top token\s*:\s*(\S+)", text)
if not kld or not top:
    sys.exit(f"no Mean KLD or Same top token in {sys.argv[1]}")
kld_value, top_value = float(kld.group(1)), float(top.group(1))
if not (math.isfinite(kld_value) and kld_value <= max_kld and top_value >= min_top):
    sys.exit(f"mean KLD {kld_value} (at most {max_kld}), same top token {top_value}% (at least {min_top}%)")
print("within bounds")
