#!/usr/bin/env bash
# Builds xgrammar's C++ library (pinned in scripts/deps/xgrammar.pin, checked
# by sha256) into $KVJIT_DEPS_DIR/xgrammar-VERSION (default
# $HOME/.cache/kvjit/deps), where CMake looks for it. No package ships it:
# Debian has none, and PyPI's wheels hold a Python extension, not the
# static library and headers kvjit links. Idempotent: an installed prefix is
# left alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pin=$root/scripts/deps/xgrammar.pin
field() { sed -n "s/^$1=//p" "$pin"; }
version=$(field version)
url=$(field url)
sha256=$(field sha256)
deps_dir=${KVJIT_DEPS_DIR:-$HOME/.cache/kvjit/deps}
prefix=$deps_dir/xgrammar-$version
if [[ -f $prefix/lib/libxgrammar.a && -f $prefix/include/xgrammar/xgrammar.h ]]; then
  echo "kvjit setup: xgrammar $version present in $prefix"
  exit 0
fi

echo "kvjit setup: building xgrammar $version into $prefix"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
archive=$work/xgrammar-$version.tar.gz
curl -fsSL --retry 3 -o "$archive" "$url"
if ! echo "$sha256  $archive" | sha256sum --check --quiet -; then
  echo "kvjit setup: error: $url does not have the sha256 pinned in $pin" >&2
  exit 1
fi
tar -xzf "$archive" -C "$work"
src=$work/xgrammar-$version
mkdir -p "$work/build"
# The sdist's own config.cmake turns on its Python bindings (which need
# tvm_ffi); a config.cmake in the build folder takes its place.
cat >"$work/build/config.cmake" <<'CONFIG'
set(XGRAMMAR_BUILD_PYTHON_BINDINGS OFF)
set(XGRAMMAR_BUILD_CXX_TESTS OFF)
set(XGRAMMAR_ENABLE_CPPTRACE OFF)
CONFIG
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# Its flags end in -Werror and -flto: a newer compiler's new warning must not
# fail the build, and LTO objects in a static archive would tie kvjit to the
# exact compiler that built them.
cmake -G Ninja -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="-fno-lto -Wno-error" -DCMAKE_INSTALL_PREFIX="$prefix" "${launcher[@]}" >/dev/null
cmake --build "$work/build"
cmake --install "$work/build" >/dev/null
echo "kvjit setup: xgrammar $version installed in $prefix"
