#!/usr/bin/env bash
# The one command to run on the GPU machine (docs/gpu-check.md), once per device call:
#
#   bash build/gpu-bundle/carry-K/run.sh [--dry-run] [--stash DIR] [--out DIR] [--deadline SECONDS]
#
# Each call stores the part it carried (verified against its sha256) in the stash, /tmp/ebb-gpu,
# which lasts while the machine stays warm. The call that completes the set reassembles and verifies
# the bundle, runs the CUDA checks and the CUDA benchmarks, and writes gpu-report.json and
# gpu-check.log to $OUT. --dry-run walks the same steps on a machine without a GPU (what the CPU tests
# do). Exit status: 0 passed, 1 a check failed, 2 a part or the bundle is corrupt, 3 parts missing
# (call again with the next one). The work is done by run.py beside this file (Python 3, stdlib).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "${EBB_GPU_PYTHON:-python3}" "$here/run.py" --from "$here" "$@"
