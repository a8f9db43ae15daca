#!/usr/bin/env python3
"""Counts the tests that did not run, from ctest's JUnit report and lit's xunit report.

    scripts/check_skips.py --ctest CTEST.xml --lit LIT.xml --allowlist tests/skip_allowlist.txt [--require_all]

Prints how many tests ran, how many skipped (GoogleTest's GTEST_SKIP, lit's
UNSUPPORTED) and the name and reason of each skip. With --require_all it exits
non-zero when a test outside the allow-list skipped, when a report is missing,
or when a report holds no test: a skipped test is a test that did not run.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
import xml.etree.ElementTree as ElementTree
from typing import List, NamedTuple, Optional, Tuple


class Skip(NamedTuple):
    name: str
    reason: str


def read_allowlist(path: str) -> List[Tuple[str, str]]:
    """(pattern, why) per entry; an entry without a reason is an error."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            pattern, _, why = text.partition("#")
            if not why.strip():
                sys.exit(f"{path}:{number}: an allow-list entry must say why it may skip: {text}")
            entries.append((pattern.strip(), why.strip()))
    return entries


def skip_reason(case: ElementTree.Element) -> Optional[str]:
    """The reason a JUnit/xunit test case did not run, or None if it ran."""
    skipped = case.find("skipped")
    if skipped is not None:
        return skipped.get("message") or skipped.text or "skipped"
    if case.get("status") in ("notrun", "disabled"):
        return case.get("status")
    return None


def gtest_skip_message(case: ElementTree.Element) -> Optional[str]:
    """GoogleTest prints the GTEST_SKIP() message on the line before '[  SKIPPED ]'."""
    output = case.findtext("system-out") or ""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("[  SKIPPED ]") and i > 0:
            previous = lines[i - 1].strip()
            if previous and not previous.startswith("["):
                return previous
    return None


def ctest_cases(path: str) -> Tuple[int, List[Skip]]:
    cases = ElementTree.parse(path).getroot().iter("testcase")
    total, skips = 0, []
    for case in cases:
        total += 1
        reason = skip_reason(case)
        if reason is not None:
            skips.append(Skip(case.get("name", "?"), gtest_skip_message(case) or reason))
    return total, skips


def lit_cases(path: str) -> Tuple[int, List[Skip]]:
    total, skips = 0, []
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        total += 1
        reason = skip_reason(case)
        if reason is None:
            continue
        # lit writes classname "suite.dir.sub" and name "file.test".
        suite, _, directory = case.get("classname", "").partition(".")
        relative = "/".join(filter(None, directory.split(".") + [case.get("name", "?")]))
        skips.append(Skip(f"{suite} :: {relative}", reason))
    return total, skips


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ctest", required=True, help="ctest --output-junit file")
    parser.add_argument("--lit", required=True, help="lit --xunit-xml-output file")
    parser.add_argument("--allowlist", required=True)
    parser.add_argument("--require_all", action="store_true")
    args = parser.parse_args()

    allowed = read_allowlist(args.allowlist)
    problems, total, skips = [], 0, []
    for path, reader, what in ((args.ctest, ctest_cases, "ctest"), (args.lit, lit_cases, "lit")):
        if not os.path.isfile(path):
            problems.append(f"no {what} report at {path}: its tests did not run")
            continue
        count, found = reader(path)
        if count == 0:
            problems.append(f"the {what} report {path} holds no test")
        total += count
        skips += found

    unexpected = []
    for skip in skips:
        why = next((w for p, w in allowed if fnmatch.fnmatchcase(skip.name, p)), None)
        marker = f"allowed: {why}" if why else "NOT ALLOWED"
        print(f"  skipped: {skip.name} ({skip.reason}) [{marker}]")
        if why is None:
            unexpected.append(skip)
    print(f"{total} tests, {total - len(skips)} ran, {len(skips)} skipped "
          f"({len(skips) - len(unexpected)} on the allow-list {args.allowlist})")

    if not args.require_all:
        return 0
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if unexpected:
        print(f"error: {len(unexpected)} test(s) skipped that must run here; each skip above says why "
              f"(a missing ../shared or model, or a test to add to {args.allowlist} with its reason)",
              file=sys.stderr)
    return 1 if problems or unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
