#!/usr/bin/env bash
# CTest: the suites and peer figures that ship in bench/ (bench/suites, bench/peers) match the
# project's shared copies in ../shared/{suites,peers} beside the source tree, where that folder
# exists. Fails on a file whose contents differ and on a shared file the repo lacks (copy it into
# bench/ to adopt it); exits 77 (CTest: skipped) when there is no shared folder.
# Usage: suites_match.sh SOURCE_DIR
set -uo pipefail
source_dir=${1:?usage: suites_match.sh SOURCE_DIR}
shared=$(cd "$source_dir/.." && pwd)/shared
if [ ! -d "$shared" ]; then
  echo "skipped: no shared folder at $shared (nothing to compare the shipped suites with)"
  exit 77
fi
status=0 compared=0
for kind in suites peers; do
  [ -d "$shared/$kind" ] || continue
  for file in "$shared/$kind"/*.csv; do
    [ -e "$file" ] || continue
    name=$(basename "$file")
    ours=$source_dir/bench/$kind/$name
    if [ ! -f "$ours" ]; then
      echo "new: $shared/$kind/$name is not in bench/$kind/ (copy it there to adopt it)"
      status=1
    elif ! cmp -s "$file" "$ours"; then
      echo "differs: bench/$kind/$name and $shared/$kind/$name"
      diff "$ours" "$file" | head -10
      status=1
    else
      compared=$((compared + 1))
    fi
  done
done
[ $status -eq 0 ] && echo "suites match: $compared files identical to $shared"
exit $status
