#!/bin/bash
# The GPU checks and figures in one run, for a machine with a CUDA GPU (CI never runs this; see benchmarks/README.md).
#   bash benchmarks/gpu.sh [tests|bench|all]     (OUT=dir keeps one log per step; default /tmp/subclassaot_gpu)
# imports: every module of the library and the samples. tests: the `gpu`-marked tests (compiled Triton kernels against reference.py on the GPU, fused blocks against unfused).
# bench: benchmarks/jagged.py (eager and inductor backends), benchmarks/fp8.py (quantize and training tables) and the
# cast-transpose tile sweep of benchmarks/fp8_tune.py. Each step has its own time limit so that one slow step cannot
# take the whole lease; a step that fails or times out is reported and the next one runs.
set -u -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/subclassaot_gpu}
mkdir -p "$OUT"
PY=${PYTHON:-python3}

step() {  # step NAME SECONDS CMD...: run CMD with a limit, log to $OUT/NAME.txt, report the exit status
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    echo "=== $name: $*"
    timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.txt"
    echo "=== $name: rc ${PIPESTATUS[0]} in $((SECONDS - start)) s" | tee -a "$OUT/steps.txt"
}

which=${1:-all}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/env.txt"
$PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/env.txt"
# Every module of the library and the samples imports (the machine's torch may be older than CI's): list failures.
step imports 60 $PY -c "
import importlib, pkgutil, sys
bad = 0
for pkg in ('subclassaot', 'subclasses', 'policies'):
    for m in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + '.'):
        if m.name.endswith('__main__'):
            continue
        try:
            importlib.import_module(m.name)
        except Exception as e:
            bad += 1
            print('FAILED', m.name, type(e).__name__, e)
print('import failures:', bad)
"
if [[ $which == tests || $which == all ]]; then
    step tests 240 $PY -m pytest -q -p no:cacheprovider -m gpu tests/subclasses/test_fp8_kernels.py \
        tests/subclasses/test_fp8_cast_transpose.py tests/subclasses/test_nested_kernels.py \
        tests/subclasses/test_jagged_pipeline.py
fi
if [[ $which == bench || $which == all ]]; then
    step jagged_eager 90 $PY benchmarks/jagged.py --repeat 20
    step jagged_inductor 150 $PY benchmarks/jagged.py --repeat 20 --backend inductor
    step fp8 150 $PY benchmarks/fp8.py --iters 20 --tables quantize,training
    step fp8_tune_ct 150 $PY -m benchmarks.fp8_tune --only cast_transpose --iters 20
fi
