#!/usr/bin/env bash
# The GPU check: the CUDA backend's tests, the conformance suite on the cuda backend (and on opencl where
# NVIDIA's OpenCL runtime is present), then benchmarks/gpu_bench.py against torch and Triton.
#
# On a GPU machine without network, in the repository root, after benchmarks/gpu/prepare.sh filled .whl/
# on a machine with network:   OUT=/some/dir bash benchmarks/gpu/run.sh
# Nothing of pypto needs to be installed there first: the wheels go to a private folder on PYTHONPATH.
# Results land in $OUT: log.txt, cuda-tests.{txt,xml}, conformance.json, opencl.json, bench.json and
# gpu-results.md (the RESULTS.md fragment). About 2.5 minutes on an H200 machine.
set -u
source "$(dirname "$0")/setup.sh"
LOG="$OUT/log.txt"
: >"$LOG"
export MAX_EXAMPLES=${MAX_EXAMPLES:-100}
LIMIT=${LIMIT:-240}  # seconds for each correctness process (they run side by side)
T0=$SECONDS
stamp() { echo "[$((SECONDS - T0)) s] $*" >>"$LOG"; }
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
    nvcc --version 2>&1 | tail -2
    $PY -c "import sys, numpy, torch; print(sys.version.split()[0], 'numpy', numpy.__version__, 'torch', torch.__version__)" 2>&1
    $PY -c "import json, pypto as pt; print(json.dumps(pt.get_runtime_info()['backends']['cuda'], default=str))" 2>&1
} >>"$LOG"

# -- 1. correctness, in parallel processes (the GPU and 16 cores are shared well by them) -------------------
stamp "tests and conformance start"
timeout "$LIMIT" $PY -m pytest pypto-backend-cuda/tests -q -rs -p no:cacheprovider --junitxml="$OUT/cuda-tests.xml" \
    >"$OUT/cuda-tests.txt" 2>&1 &
parts=("test_case and float32" "test_case and not float32" "test_array_case or test_gradient_case or test_declaration" "test_fuzz")
for i in "${!parts[@]}"; do
    timeout "$LIMIT" $PY -m pypto_conformance --backend cuda --quiet-table --max-examples "$MAX_EXAMPLES" \
        -k "${parts[$i]}" --report "/tmp/conformance-$i.json" -- -p no:cacheprovider >"/tmp/conformance-$i.txt" 2>&1 &
done
# OpenCL on NVIDIA's runtime, when the driver ships it (the SIMT path on a real GPU), alongside
ICD=$(ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 /usr/local/nvidia/lib64/libnvidia-opencl.so.1 \
      /usr/local/nvidia/lib/libnvidia-opencl.so.1 /usr/lib64/libnvidia-opencl.so.1 2>/dev/null | head -1)
if [ -n "$ICD" ]; then
    mkdir -p /tmp/pypto-icd && echo "$ICD" >/tmp/pypto-icd/nvidia.icd
    stamp "opencl on $ICD"
    OCL_ICD_VENDORS=/tmp/pypto-icd timeout "$LIMIT" $PY -m pypto_conformance --backend opencl --quiet-table \
        --max-examples 30 --report "$OUT/opencl.json" -- -p no:cacheprovider >/tmp/opencl.txt 2>&1 &
else
    stamp "no NVIDIA OpenCL runtime (libnvidia-opencl.so.1) on this machine: OpenCL not checked"
fi
wait
stamp "tests and conformance done"
for i in "${!parts[@]}"; do echo "== conformance part $i: ${parts[$i]}"; tail -n 12 "/tmp/conformance-$i.txt"; done >>"$LOG"
$PY - "$OUT/conformance.json" /tmp/conformance-*.json <<'PYEOF' >>"$LOG" 2>&1
import json, sys, collections
merged = None
for path in sys.argv[2:]:
    try:
        d = json.load(open(path))
    except (OSError, ValueError) as e:
        print("no report", path, e)
        continue
    if merged is None:
        merged = d
    else:
        merged["results"] += d["results"]
if merged:
    merged["summary"] = dict(collections.Counter(r["outcome"] for r in merged["results"]))
    json.dump(merged, open(sys.argv[1], "w"), indent=1)
    print("conformance (cuda):", merged["summary"])
    for r in merged["results"]:
        if r["outcome"] not in ("passed", "xfailed", "skipped"):
            print("  ", r["outcome"], r["nodeid"], (r.get("message") or "")[:300].replace("\n", " | "))
PYEOF
tail -n 3 "$OUT/cuda-tests.txt" >>"$LOG"
[ -f /tmp/opencl.txt ] && { echo "== opencl"; tail -n 25 /tmp/opencl.txt; } >>"$LOG"
if [ -f "$OUT/opencl.json" ]; then  # the first failing case again, each launch logged and waited for
    first=$($PY -c "import json,sys; r=[x for x in json.load(open(sys.argv[1]))['results'] if x['outcome']=='failed' and x['nodeid'].startswith('test_conformance.py::test_case')]; print(r[0]['case'] if r else '')" "$OUT/opencl.json")
    if [ -n "$first" ]; then
        for size in -1 0 1; do
            echo "== opencl probe: $first, size $size"
            OCL_ICD_VENDORS=/tmp/pypto-icd timeout 40 $PY benchmarks/gpu/opencl_probe.py "$first" "$size" 2>&1 | tail -n 80
        done >>"$LOG"
    fi
fi

# -- 3. benchmarks, alone on the GPU -------------------------------------------------------------------------
stamp "benchmarks start"
timeout "${BENCH_LIMIT:-200}" $PY benchmarks/gpu_bench.py --json "$OUT/bench.json" --md "$OUT/gpu-results.md" >>"$LOG" 2>&1
stamp "benchmarks done (exit $?)"
tail -n 60 "$LOG"
