#!/usr/bin/env bash
# Run on a machine with network access, in the repository root, before the GPU check: fills .whl/ (git-ignored)
# with the wheels benchmarks/gpu/run.sh installs on a GPU machine that has no network: pypto's packages, built
# from this tree, and the third-party wheels such a machine may lack, for its Python (3.12 by default).
#   bash benchmarks/gpu/prepare.sh [python-version]
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${1:-3.12}
rm -rf .whl && mkdir -p .whl
python3 -m pip wheel -q --no-deps -w .whl ./pypto-core ./pypto-backend-cuda ./pypto-backend-opencl ./pypto-conformance
# cffi (the CUDA backend's driver calls) and pyopencl (OpenCL on NVIDIA's runtime), with what they need
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
    cffi pycparser platformdirs pyopencl pytools siphash24
ls -l .whl
du -sh .whl
