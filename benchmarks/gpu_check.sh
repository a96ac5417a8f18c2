#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py): W4 and W5 % of the device's peak (fp32, TF32), CPU == GPU agreement,
# the paper presets' --estimate lines. Run it on a lent device from the repository root; under 8 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
exec timeout 470 "$PY" benchmarks/gpu_check.py "$@"
