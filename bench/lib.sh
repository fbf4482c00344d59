# Shared by the bench/*/run scripts: building, and recording figures in RESULTS.md.
# Source it: . "$(dirname "$0")/../lib.sh"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RESULTS_DIR="$ROOT/bench/results"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
mkdir -p "$RESULTS_DIR"

# Builds the Release tree (benchmarks are timed: never a sanitizer or debug build).
bench_build() {
  make -C "$ROOT" --no-print-directory BUILD_TYPE=Release cmake-build >&2
}

# Appends a dated section to RESULTS.md: title, the command, the RESULT lines of a file,
# and optional extra markdown (a file).
bench_record() {
  local title="$1" command="$2" result_file="$3" extra="${4:-}"
  {
    echo
    echo "## $title — $(date -u +%Y-%m-%d)"
    echo
    echo "Command: \`$command\` (machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r))"
    echo
    echo '```'
    grep '^RESULT ' "$result_file" || true
    echo '```'
    if [ -n "$extra" ] && [ -f "$extra" ]; then
      echo
      cat "$extra"
    fi
  } >> "$ROOT/bench/RESULTS.md"
}
