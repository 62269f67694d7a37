#!/usr/bin/env bash
# Runs every libFuzzer target built in BUILD_DIR (default build-fuzz) for FUZZ_SECONDS (default
# 300) on its seed corpus fuzz/corpus/<target>/. New inputs go to a scratch corpus, not the repo;
# a crash stops with the target's report and leaves its input in BUILD_DIR/<target>-crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-300}
ran=0
for corpus in fuzz/corpus/*/; do
    target=$(basename "$corpus")
    binary="$BUILD_DIR/$target"
    [[ -x "$binary" ]] || { echo "fuzz: $target is not built, skipped"; continue; }
    scratch="$BUILD_DIR/$target-corpus"
    crashes="$BUILD_DIR/$target-crashes"
    mkdir -p "$scratch" "$crashes"
    echo "fuzz: $target for ${SECONDS_EACH}s"
    start=$(date +%s)
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$binary" -max_total_time="$SECONDS_EACH" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="$crashes/" "$scratch" "$corpus" 2>"$BUILD_DIR/$target.log" \
        || { tail -60 "$BUILD_DIR/$target.log"; echo "fuzz: $target FAILED (input in $crashes/)"; exit 1; }
    grep -E "^stat::number_of_executed_units|^#[0-9]+ +DONE" "$BUILD_DIR/$target.log" | tail -2
    echo "fuzz: $target passed in $(( $(date +%s) - start ))s"
    ran=$((ran + 1))
done
[[ $ran -gt 0 ]] || { echo "fuzz: no target was built"; exit 1; }
