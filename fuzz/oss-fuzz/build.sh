#!/bin/bash -eu
# Builds pushwire's fuzz targets the way OSS-Fuzz does: with the environment's $CXX,
# $CXXFLAGS and $LIB_FUZZING_ENGINE, one binary per target in $OUT, each with its seed corpus
# (<target>_seed_corpus.zip, regressions included) and dictionary (<target>.dict).
# Outside OSS-Fuzz: CXX=clang++-14 CXXFLAGS="-fsanitize=address,fuzzer-no-link"
#   LIB_FUZZING_ENGINE=-fsanitize=fuzzer OUT=/tmp/out fuzz/oss-fuzz/build.sh
SRC_DIR="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${OUT:?set OUT}"
mkdir -p "$OUT"
targets=$(sed -n 's/^ *\(msg_dispatch.*\)$/\1/p; s/^ *\(flow_pool.*\)$/\1/p' "$SRC_DIR/fuzz/CMakeLists.txt" | tr -s ' \n' ' ')
for t in $targets; do
  $CXX $CXXFLAGS -std=c++20 -I"$SRC_DIR/include" -I"$SRC_DIR/fuzz" -I"$SRC_DIR/tests/flow" \
    "$SRC_DIR/fuzz/$t.cpp" "$SRC_DIR/fuzz/fail.cpp" $LIB_FUZZING_ENGINE -o "$OUT/$t"
  seeds=()
  for d in "$SRC_DIR/fuzz/corpus/$t" "$SRC_DIR/fuzz/regressions/$t"; do [ -d "$d" ] && seeds+=("$d"); done
  if [ ${#seeds[@]} -gt 0 ]; then
    (cd "$SRC_DIR" && find "${seeds[@]}" -type f | zip -q -j "$OUT/${t}_seed_corpus.zip" -@)
  fi
  if [ -f "$SRC_DIR/fuzz/dict/$t.dict" ]; then cp "$SRC_DIR/fuzz/dict/$t.dict" "$OUT/$t.dict"; fi
done
echo "built: $targets"
