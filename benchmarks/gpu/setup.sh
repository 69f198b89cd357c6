# Sourced by run.sh and profile.sh: the Python to use, pypto's wheels from .whl/ (made by prepare.sh) installed
# once into a private folder on PYTHONPATH, the kernel cache, and $OUT.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-$PWD/benchmarks/out/gpu}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
SITE=${PYPTO_GPU_SITE:-/tmp/pypto-site}
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
if [ ! -d "$SITE/pypto" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE" .whl/*.whl \
        || { echo "installing the wheels in .whl/ failed (run benchmarks/gpu/prepare.sh first)"; exit 1; }
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYPTO_CACHE_DIR=${PYPTO_CACHE_DIR:-/tmp/pypto-cache}
