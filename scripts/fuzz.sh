#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a while.
#   scripts/fuzz.sh [seconds per target, default 20] [build dir, default build-fuzz]
# make check runs it briefly (a smoke run); longer runs find more. A crash fails the script
# (the input is saved as crash-* in the build dir).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-20}"
out="${2:-$root/build-fuzz}"
mkdir -p "$out/obj"
cxx="${FUZZ_CXX:-clang++}"
flags=(-std=c++20 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -msse4.2
       -I"$root/base/include" -I"$root/transport/include" -I"$root/transport/src" -I"$root/engine/include"
       -I"$root/engine/src")

# Library sources, compiled once (instrumented for coverage) and linked into every target:
# the base library, the transport but its verbs provider (libibverbs may be absent), the
# protocol and formats.
lib=()
for f in "$root"/base/src/*.cpp "$root"/transport/src/{core,tcp,shm}/*.cpp \
         "$root"/engine/src/protocol/*.cpp "$root"/engine/src/common/*.cpp; do
  lib+=("$f")
done
objects=()
stale=()
for f in "${lib[@]}"; do
  o="$out/obj/$(echo "${f#$root/}" | tr '/' '_').o"
  objects+=("$o")
  if [ ! -f "$o" ] || [ "$f" -nt "$o" ]; then stale+=("$f" "$o"); fi
done
printf '%s\n' "${stale[@]}" | xargs -r -P "$(nproc)" -n 2 sh -c \
  "$cxx ${flags[*]} -fsanitize=fuzzer-no-link -c \"\$0\" -o \"\$1\" 2>>\"$out/build.log\" || { echo \"fuzz: cannot compile \$0\" >&2; exit 255; }"

targets=("$root/engine/fuzz/protocol_fuzz.cpp")
for f in "$root"/transport/fuzz/*_fuzz.cpp; do [ -f "$f" ] && targets+=("$f"); done

status=0
for t in "${targets[@]}"; do
  name=$(basename "$t" .cpp)
  if ! "$cxx" "${flags[@]}" -fsanitize=fuzzer "$t" "${objects[@]}" -o "$out/$name" 2> "$out/$name.build.log"; then
    echo "fuzz: cannot build $name:"; tail -20 "$out/$name.build.log"; exit 1
  fi
  mkdir -p "$out/corpus-$name"
  echo "fuzz: $name for ${seconds}s"
  if ! (cd "$out" && ./"$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
          -print_final_stats=1 "corpus-$name" > "$name.log" 2>&1); then
    echo "fuzz: $name FOUND A CRASH:"; tail -40 "$out/$name.log"; status=1
  else
    grep -E "stat::number_of_executed_units" "$out/$name.log" | tail -1 | sed "s/^/fuzz: $name: /"
  fi
done
exit $status
