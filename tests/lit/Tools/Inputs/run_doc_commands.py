#!/usr/bin/env python3
"""Runs the ```sh blocks of a Markdown page, in order, as one bash script
with `set -euxo pipefail`, in the current directory: the test that keeps a
guide's commands working. Each block's commands are echoed (bash -x) so that
a failure shows which one.

  run_doc_commands.py PAGE.md
"""
import re
import subprocess
import sys


def main():
    with open(sys.argv[1], encoding="utf-8") as page:
        blocks = re.findall(r"^```sh\n(.*?)^```$", page.read(), flags=re.M | re.S)
    if not blocks:
        sys.exit(f"{sys.argv[1]}: no ```sh blocks")
    script = "set -euxo pipefail\n" + "\n".join(blocks)
    sys.exit(subprocess.run(["bash", "-c", script]).returncode)


if __name__ == "__main__":
    main()
