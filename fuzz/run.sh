#!/usr/bin/env bash
# Runs every libFuzzer target built in BUILD_DIR (default build-fuzz) for FUZZ_SECONDS (default
# 300) on its seed corpus fuzz/corpus/<target>/, FUZZ_JOBS targets at a time (default: the number
# of cores; each libFuzzer process uses one). New inputs go to a scratch corpus, not the repo; a
# crash fails the run with the target's report and leaves its input in BUILD_DIR/<target>-crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-300}
JOBS=${FUZZ_JOBS:-$(nproc)}

fuzz_one() {  # target corpus: runs one target, prints its summary, returns non-zero on a finding
    local target=$1 corpus=$2
    local binary="$BUILD_DIR/$target" scratch="$BUILD_DIR/$target-corpus" crashes="$BUILD_DIR/$target-crashes"
    local log="$BUILD_DIR/$target.log" start
    mkdir -p "$scratch" "$crashes"
    start=$(date +%s)
    if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$binary" -max_total_time="$SECONDS_EACH" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="$crashes/" "$scratch" "$corpus" 2>"$log"; then
        tail -60 "$log"
        echo "fuzz: $target FAILED (input in $crashes/)"
        return 1
    fi
    grep -E "^stat::number_of_executed_units|^#[0-9]+ +DONE" "$log" | tail -2 | sed "s/^/fuzz: $target: /"
    echo "fuzz: $target passed in $(($(date +%s) - start))s"
}

targets=()
for corpus in fuzz/corpus/*/; do
    target=$(basename "$corpus")
    if [[ -x "$BUILD_DIR/$target" ]]; then targets+=("$target"); else echo "fuzz: $target is not built, skipped"; fi
done
[[ ${#targets[@]} -gt 0 ]] || { echo "fuzz: no target was built"; exit 1; }
echo "fuzz: ${#targets[@]} targets for ${SECONDS_EACH}s each, $JOBS at a time"

for target in "${targets[@]}"; do
    while [[ $(jobs -rp | wc -l) -ge $JOBS ]]; do sleep 1; done
    rm -f "$BUILD_DIR/$target.failed"
    { fuzz_one "$target" "fuzz/corpus/$target/" || touch "$BUILD_DIR/$target.failed"; } &
done
wait
failed=0
for target in "${targets[@]}"; do [[ ! -e "$BUILD_DIR/$target.failed" ]] || failed=1; done
[[ $failed -eq 0 ]] || { echo "fuzz: a target failed"; exit 1; }
