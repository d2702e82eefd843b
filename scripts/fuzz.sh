#!/usr/bin/env bash
# Builds one libFuzzer target of fuzz/ on the stable toolchain and runs it.
#
#   scripts/fuzz.sh TARGET [RUNS] [libFuzzer options...]
#   scripts/fuzz.sh list
#
# RUNS defaults to 1,000,000 inputs (-1: until stopped). The run starts from the
# committed seeds in fuzz/corpus/TARGET, keeps what it learns in
# fuzz/corpus-work/TARGET and writes any crashing input to fuzz/artifacts/TARGET/.
# Replay one input: fuzz/target/<triple>/release/TARGET FILE
# FUZZ_NO_BUILD=1 runs the binary last built; MAX_LEN caps input size (16384).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/fuzz"
targets=$(sed -n 's/^name = "\([a-z_]*\)"$/\1/p' Cargo.toml | grep -v cinnabar-fuzz)
target=${1:-}
if [ -z "$target" ] || [ "$target" = list ]; then
    echo "targets:" $targets
    exit 0
fi
if ! grep -qx "$target" <<<"$targets"; then
    echo "unknown target '$target'; targets:" $targets >&2
    exit 2
fi
runs=${2:-1000000}
shift $(( $# < 2 ? $# : 2 ))

# What cargo-fuzz passes to rustc, all of it available on stable: libFuzzer's
# coverage instrumentation (8-bit counters, PC table, comparison tracing) and the
# `fuzzing` cfg. The explicit --target keeps these flags off build scripts.
triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="${RUSTFLAGS:-} -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
[ -n "${FUZZ_NO_BUILD:-}" ] || cargo build --release --target "$triple" --bin "$target"

bin="target/$triple/release/$target"
work="corpus-work/$target"
mkdir -p "$work" "artifacts/$target"
seeds=()
[ -d "corpus/$target" ] && seeds=("corpus/$target")
dict=()
[ -f "dict/$target.dict" ] && dict=("-dict=dict/$target.dict")
exec "$bin" "$work" "${seeds[@]}" "${dict[@]}" \
    -runs="$runs" -timeout=10 -rss_limit_mb=2048 -max_len="${MAX_LEN:-16384}" \
    -artifact_prefix="artifacts/$target/" -print_final_stats=1 "$@"
