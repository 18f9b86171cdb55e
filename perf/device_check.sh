#!/usr/bin/env bash
# nbdata's GPU device check: the GPU test suite, then the GPU perf rows (staging, the fused
# augment kernel and JPEG decode, each on its own), then the ImageNet-style GPU rows, on a
# machine with one CUDA GPU (made for an H100/H200). Run from anywhere:
#
#     OUT=/some/dir BUDGET_S=520 bash perf/device_check.sh
#
# Everything goes under $OUT (default ./device_out), in at most 7 files:
#   device_check.log  every step's full output, in order (also on stdout)
#   summary.txt       each step's exit status and time, then the perf tables
#   perf_gpu.txt      the gpu tables (staging, augment, decode)
#   pytest_gpu.txt    the GPU suite's report
#   profile_decode.txt  cProfile of the decode + augment steps (host time)
#   env.txt           the machine, the driver and the Python packages found
#   steps.tar.gz      each step's output as its own file
# Each step runs under `timeout` (its own limit, cut to what is left of BUDGET_S) and the
# script goes on after a failure; a step that would start with less than it needs is
# skipped (and says so). It never waits on anything without a timeout.
#
# Packages. The [cuda,test] extras are numba-cuda, cuda-core (cuda-bindings), nvImageCodec
# with nvJPEG, pytest and simplejpeg. Device machines without a network (as this
# project's) have numba-cuda, cuda-core, pytest, torch and CuPy but not nvImageCodec or
# simplejpeg: those come as wheels in ./.whl (fetched on a machine with a network by
# `bash perf/device_wheels.sh`, carried along with the working tree) and are installed
# from there with --no-index. With a network and no ./.whl the script installs them from
# PyPI instead. Nothing else is installed: nbdata itself is imported from this checkout
# (PYTHONPATH), so no build step is needed.
set -u
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 1
OUT="${OUT:-$REPO/device_out}"
mkdir -p "$OUT"
T0=$(date +%s)
BUDGET_S="${BUDGET_S:-520}"
PY="${PY:-python3}"
THREADS="$(nproc 2>/dev/null || echo 8)"
WORK="$(mktemp -d /tmp/nbdata_device.XXXXXX)"
mkdir -p "$WORK/steps"
LOG="$OUT/device_check.log"
: > "$LOG"
: > "$OUT/summary.txt"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export NBDATA_GPU_TESTS=device
unset NUMBA_ENABLE_CUDASIM

say() { echo "$*" | tee -a "$LOG"; }
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }

# step NAME LIMIT_S NEED_S CMD...: CMD under timeout min(LIMIT_S, time left), its output in
# $WORK/steps/NAME.txt and the log; skipped when fewer than NEED_S seconds are left.
step() {
  local name=$1 limit=$2 need=$3; shift 3
  local rem; rem=$(left)
  if [ "$rem" -lt "$need" ]; then
    say "=== SKIPPED $name: ${rem}s left, it needs ${need}s"
    echo "SKIPPED ${rem}s left" > "$WORK/steps/$name.txt"
    printf '%-28s skipped (%ss left)\n' "$name" "$rem" >> "$OUT/summary.txt"
    return 0
  fi
  [ "$rem" -lt "$limit" ] && limit=$rem
  say "=== $name (limit ${limit}s, at ${rem}s left) === $*"
  local t=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" < /dev/null > "$WORK/steps/$name.txt" 2>&1
  local rc=$?
  cat "$WORK/steps/$name.txt" >> "$LOG"
  tail -n 40 "$WORK/steps/$name.txt"
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && say "--- $name TIMED OUT after ${limit}s"
  say "--- $name rc=$rc in $(( $(date +%s) - t ))s"
  printf '%-28s rc=%-4s %4ss\n' "$name" "$rc" "$(( $(date +%s) - t ))" >> "$OUT/summary.txt"
  echo "$rc" > "$WORK/steps/$name.rc"
  return 0
}
rc_of() { cat "$WORK/steps/$1.rc" 2>/dev/null || echo none; }

# ------------------------------------------------------------------ 0. the machine
step env 25 5 bash -c 'date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current,clocks.max.sm --format=csv; nproc; free -g | head -2; command -v '"$PY"'; '"$PY"' --version; git log -1 --oneline 2>/dev/null || true; ls .whl 2>/dev/null'

# ------------------------------------------------------------------ 1. packages
install() {
  local site; site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  if ls .whl/*.whl > /dev/null 2>&1; then
    echo "installing the carried wheels into $site:"; ls -la .whl
    # Into the interpreter's own site-packages: nvImageCodec's wheel ships nvidia/__init__.py,
    # which beside a second nvidia/ folder on sys.path would hide one of them.
    "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile \
      --no-cache-dir .whl/*.whl
  elif timeout 8 "$PY" -c 'import urllib.request; urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=6)' 2>/dev/null; then
    echo "no ./.whl; PyPI answers: installing the missing [cuda,test] packages from it"
    "$PY" -m pip install -q --disable-pip-version-check --no-cache-dir \
      "nvidia-nvimgcodec-cu13[nvjpeg]>=0.9" "simplejpeg>=1.7" "numba-cuda>=0.30" "cuda-core>=1.2" "pytest>=7"
  else
    echo "no ./.whl and no network: nvImageCodec and simplejpeg stay missing (decode rows and"
    echo "the JPEG tests will say so). Fetch them with: bash perf/device_wheels.sh, carry .whl"
  fi
}
if [ "${SKIP_INSTALL:-0}" = 1 ]; then say "=== install skipped (SKIP_INSTALL=1)"; else
  step install 120 20 bash -c "$(declare -f install); PY=$PY; install"
  if [ "$(rc_of install)" != 0 ] && ls .whl/*.whl > /dev/null 2>&1; then
    # site-packages not writable: a folder of our own on PYTHONPATH, its nvidia/ a namespace
    # portion beside the interpreter's
    step install_target 120 20 "$PY" -m pip install -q --disable-pip-version-check --no-index \
      --no-deps --no-compile --no-cache-dir --target /tmp/nbdata_site .whl/*.whl
    rm -f /tmp/nbdata_site/nvidia/__init__.py
    export PYTHONPATH="$PYTHONPATH:/tmp/nbdata_site"
    export LD_LIBRARY_PATH="/tmp/nbdata_site/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi

cat > "$WORK/versions.py" <<'EOF'
"""What the [cuda,test] extras need, found or not, with versions; the GPU as CUDA sees it."""
import importlib, importlib.metadata as md, sys
print(sys.version.split()[0], sys.executable)
for mod, dist in [("numpy", "numpy"), ("numba", "numba"), ("numba.cuda", "numba-cuda"),
                  ("cuda.core", "cuda-core"), ("cuda.bindings", "cuda-bindings"),
                  ("nvidia.nvimgcodec", None), ("simplejpeg", "simplejpeg"), ("pytest", "pytest"),
                  ("pytest_timeout", "pytest-timeout"), ("cupy", None), ("torch", "torch"),
                  ("torchvision", "torchvision"), ("hypothesis", "hypothesis"), ("pyarrow", "pyarrow")]:
    try:
        m = importlib.import_module(mod)
        v = getattr(m, "__version__", None)
        if v is None and dist:
            v = md.version(dist)
        print(f"  {mod:20s} {v}")
    except Exception as e:
        print(f"  {mod:20s} MISSING ({type(e).__name__}: {str(e)[:120]})")
try:
    from nvidia import nvimgcodec as n
    print("  nvImageCodec CUDA", getattr(n, "__cuda_version__", "?"))
    for kind in ("HW_GPU_ONLY", "GPU_ONLY", "HYBRID_CPU_GPU"):
        try:
            n.Decoder(device_id=0, backends=[n.Backend(getattr(n.BackendKind, kind))])
            print(f"  nvImageCodec decoder with {kind} only: made")
        except Exception as e:
            print(f"  nvImageCodec decoder with {kind} only: {type(e).__name__}: {e}")
except Exception as e:
    print("  nvImageCodec:", type(e).__name__, e)
from nbdata.gpu import runtime
be = runtime.backend()
print("nbdata backend:", be.name, "device", be.device_id, getattr(be.device, "name", ""))
EOF
step versions 60 10 "$PY" "$WORK/versions.py"
cp "$WORK/steps/env.txt" "$OUT/env.txt" 2>/dev/null
cat "$WORK/steps/install.txt" "$WORK/steps/versions.txt" >> "$OUT/env.txt" 2>/dev/null

# ------------------------------------------------------------------ 2. the perf rows, each part alone
# Each part in its own process (a crash or hang in one leaves the others). Full sizes:
# 256 x 256x256x3 batches (50 MB), 512 JPEGs in batches of 64.
PARTS_ARGS="${PERF_ARGS:---repeats 5}"
for part in staging augment decode; do
  step "perf_$part" 100 30 "$PY" -m perf.gpu_pipeline --parts "$part" $PARTS_ARGS
done
for part in staging augment decode; do
  cat "$WORK/steps/perf_$part.txt"; echo
done | grep -v '^Traceback' > "$OUT/perf_gpu.txt"
# Where the decode path's host time goes (cProfile of the decode + augment steps).
step profile_decode 60 30 "$PY" -m perf.gpu_profile --top 35
cp "$WORK/steps/profile_decode.txt" "$OUT/profile_decode.txt" 2>/dev/null

# ------------------------------------------------------------------ 3. the GPU suite
# The kernels compile once per test process; pytest-timeout (when there) bounds each test.
TIMEOUT_ARGS=""
# (pytest-timeout registers itself through its entry point: naming it with -p again fails)
"$PY" -c 'import pytest_timeout' 2>/dev/null && TIMEOUT_ARGS="--timeout=90"
# -o addopts="": pyproject's addopts name xdist's --dist, which pytest refuses where xdist
# is off (-p no:xdist, as here) or not installed (the [test] extra brings it; a device
# machine's own Python may lack it)
step pytest_gpu 200 60 "$PY" -m pytest -q -o addopts="" -p no:cacheprovider -p no:xdist $TIMEOUT_ARGS \
  tests/gpu tests/examples -rfEsx --durations=10
cp "$WORK/steps/pytest_gpu.txt" "$OUT/pytest_gpu.txt" 2>/dev/null

# ------------------------------------------------------------------ 4. ImageNet-style rows
# perf/imagenet.py rows in fresh processes: 0 = nbdata GPU (decode + crop/flip/normalize/CHW),
# 1 = nbdata GPU decode only. The --quick set (512 images, a few seconds to write) unless
# enough time is left for the full 20,000 (written once, then both rows).
if [ "$(left)" -gt 260 ]; then
  step imagenet_gpu_full 150 200 "$PY" -m perf.imagenet 0 "$THREADS" 1
  step imagenet_decode_full 90 60 "$PY" -m perf.imagenet 1 "$THREADS" 1
else
  step imagenet_gpu_quick 60 40 "$PY" -m perf.imagenet 0 "$THREADS" 2 --quick
  step imagenet_decode_quick 40 30 "$PY" -m perf.imagenet 1 "$THREADS" 2 --quick
fi

# ------------------------------------------------------------------ the end
say "total $(( $(date +%s) - T0 ))s of a ${BUDGET_S}s budget"
{ echo; echo "== perf tables =="; cat "$OUT/perf_gpu.txt";
  echo "== imagenet rows =="; grep -h -E '^\{|images' "$WORK"/steps/imagenet_*.txt 2>/dev/null | tail -n 8
  echo "== pytest =="; tail -n 3 "$WORK/steps/pytest_gpu.txt" 2>/dev/null; } >> "$OUT/summary.txt"
tar -C "$WORK" -czf "$OUT/steps.tar.gz" steps 2>/dev/null
cat "$OUT/summary.txt"
rm -rf "$WORK"
exit 0
