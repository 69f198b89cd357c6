#!/usr/bin/env bash
# Nsight Compute on one launch of each benchmarked kernel (speed of light, occupancy, memory), and a cProfile of
# the host path of small calls. Run after benchmarks/gpu/run.sh installed the wheels (same PYPTO_GPU_SITE):
#   OUT=/some/dir bash benchmarks/gpu/profile.sh      -> $OUT/profile.txt
set -u
source "$(dirname "$0")/setup.sh"
$PY benchmarks/gpu/kernels.py >/dev/null 2>&1  # compile first, outside the profiler
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
    timeout "${NCU_LIMIT:-150}" "$NCU" --clock-control none --target-processes all -k 'regex:^(softmax|layernorm|vector_add|matmul)_k' \
        --launch-count 6 --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
        $PY benchmarks/gpu/kernels.py >"$OUT/profile.txt" 2>&1
    echo "ncu exit $?" >>"$OUT/profile.txt"
else
    echo "ncu not found" >"$OUT/profile.txt"
fi
$PY benchmarks/gpu/kernels.py --host-profile >>"$OUT/profile.txt" 2>&1
