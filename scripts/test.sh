#!/usr/bin/env bash
# Builds kvjit and runs every test: GoogleTest binaries and the lit suite, via ctest.
#
#   scripts/test.sh [--require_all] [CTEST_ARGS...]
#
# Ends with the count of tests that ran and skipped, and why each skipped.
# Tests that need ../shared or the downloaded model skip where those are
# absent; with --require_all (what .ci/run uses) any skip outside
# tests/skip_allowlist.txt, or a report missing, fails the run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${KVJIT_BUILD_DIR:-$root/build}

check_args=()
if [[ ${1:-} == --require_all ]]; then
  check_args+=(--require_all)
  shift
fi

"$root/scripts/build.sh"
# Reports of an earlier run must not stand in for this one's.
ctest_report=$build_dir/ctest-results.xml
lit_report=$build_dir/tests/lit/lit-results.xml
rm -f "$ctest_report" "$lit_report"
ctest_status=0
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" --output-junit "$ctest_report" "$@" ||
  ctest_status=$?
check_status=0
python3 "$root/scripts/check_skips.py" --ctest "$ctest_report" --lit "$lit_report" \
  --allowlist "$root/tests/skip_allowlist.txt" "${check_args[@]}" || check_status=$?
((ctest_status == 0)) || exit "$ctest_status"
exit "$check_status"
