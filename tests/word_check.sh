#!/usr/bin/env bash
# CTest: the tracked files describe the library, not how or where it was built. Fails, listing
# file:line, on words about the build process (work periods, remote machines and what travels to
# them, ticket notes, unpublished branches), on scripts reading a bare output variable instead of
# taking --out DIR, and on absolute paths to folders outside the repository.
# Exits 77 (CTest: skipped) when the source tree is not a git checkout.
# Usage: word_check.sh SOURCE_DIR
set -uo pipefail
source_dir=${1:?usage: word_check.sh SOURCE_DIR}
cd "$source_dir" || exit 2
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "skipped: $source_dir is not a git checkout (the check reads git ls-files)"
  exit 77
fi
# The pattern is assembled from pieces so that this file does not match itself.
s='ses''sion'
words="\\b(${s}s?|device to""ol|device ca""ll|le""nt|closing no""te|developer.s mach""ine|wi""p/)\\b"
words+="|car""ry \\[|car""ry .\\.|carr""ied\\)|carr""ied from|\\\$O""UT\\b|/[a-z]+/sha""red/"
allowed="${s}_|cudaStreamCaptur|inference ${s}"
hits=$(git ls-files -z | xargs -0 grep -nIiE "$words" -- 2>/dev/null | grep -viE "$allowed")
if [ -n "$hits" ]; then
  echo "$hits"
  echo "word check: $(echo "$hits" | wc -l) lines speak of how or where the project was built"
  exit 1
fi
echo "word check: $(git ls-files | wc -l) tracked files, no hit"
