#!/usr/bin/env bash
# The GPU check: proves the CUDA (and wgpu) backends on a machine with an NVIDIA GPU but no
# Rust toolchain and no internet, from a copy of the working tree holding a bundle built on
# a development machine by scripts/gpu-bundle.sh. Run from the repository root:
#
#   scripts/gpu-check.sh [BUNDLE_DIR]        (default gpu-bundle)
#
# 1. prints nvidia-smi, and which CUDA libraries (driver, NVRTC, cuBLAS) will be loaded;
# 2. runs the CUDA backend's tests and the conformance suite with TENSORFIT_REQUIRE=cuda,wgpu
#    (wgpu on the NVIDIA Vulkan driver, through the bundled Vulkan loader if the machine has
#    none), so a device that cannot be opened is a failure, not a skip; then NCCL's
#    all-reduce on one rank (tensorfit-dist-check nccl);
# 3. times the seed network: a training step at batch 100, length 2000, truncated BPTT 50,
#    and inference at batch 100, length 2000, on cuda, wgpu and cpu (`tensorfit bench
#    --json`: median of timed runs after a warm-up), and PyTorch's cuDNN LSTM on the same
#    workloads;
# 4. prints one table, and exits non-zero if a test failed.
#
# Every part runs under `timeout`, within an overall budget of 7 min 40 s. Without a GPU it
# stops at once with a clear message and exit status 2.
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=${1:-gpu-bundle}
BUDGET=${GPU_CHECK_BUDGET:-460}   # seconds for everything (the limit is 8 minutes)
LOG_DIR=$(mktemp -d)
trap 'rm -rf "$LOG_DIR"' EXIT

say() { printf '\n== %s\n' "$*"; }
die() { printf 'gpu-check: %s\n' "$*" >&2; exit 2; }

# Seconds a part may take: what it wants, but no more than is left of the budget (less a
# few seconds for the table). Prints 0 when nothing is left.
allow() {
    local want=$1 left=$((BUDGET - SECONDS - 5))
    if [ "$left" -lt 5 ]; then echo 0; elif [ "$want" -lt "$left" ]; then echo "$want"; else echo "$left"; fi
}

# ---------------------------------------------------------------------------------------
# The machine
# ---------------------------------------------------------------------------------------
[ -x "$BUNDLE/bin/tensorfit" ] || die "no bundle at $BUNDLE/ (build it on a development machine with scripts/gpu-bundle.sh and copy it here)"
BUNDLE=$(cd "$BUNDLE" && pwd)
command -v nvidia-smi >/dev/null 2>&1 || die "no NVIDIA GPU here: nvidia-smi is not installed (this check needs an NVIDIA GPU and its driver)"
say "nvidia-smi"
timeout 30 nvidia-smi || die "nvidia-smi failed: no usable NVIDIA GPU or driver on this machine"
GPU_NAME=$(timeout 10 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)

# CUDA libraries: the driver's libcuda comes from the system; NVRTC and cuBLAS from a CUDA
# toolkit if there is one, else from PyTorch's pip packages (nvidia/*/lib), which the
# backend can load just as well.
lib_dirs=()
for d in "${CUDA_HOME:-/nonexistent}/lib64" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && lib_dirs+=("$d")
done
if command -v python3 >/dev/null 2>&1; then
    while IFS= read -r d; do [ -n "$d" ] && lib_dirs+=("$d"); done < <(timeout 60 python3 - <<'PY' 2>/dev/null
import glob, os, site
roots = set(site.getsitepackages() + [site.getusersitepackages()])
try:
    import torch
    roots.add(os.path.dirname(os.path.dirname(torch.__file__)))
except Exception:
    pass
for r in sorted(roots):
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib"))):
        if glob.glob(os.path.join(d, "libnvrtc.so*")) or glob.glob(os.path.join(d, "libcublas*.so*")):
            print(d)
PY
)
fi
CUDA_LIBS=$(IFS=:; echo "${lib_dirs[*]}")
export LD_LIBRARY_PATH="$CUDA_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Vulkan: the system loader if there is one, else the bundled one; the NVIDIA ICD from
# the driver's JSON, or one written here if the driver installed its library but no JSON.
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1'; then
    if [ -e "$BUNDLE/lib/libvulkan.so.1" ]; then
        export LD_LIBRARY_PATH="$BUNDLE/lib:$LD_LIBRARY_PATH"
        VULKAN_NOTE="bundled loader"
    else
        VULKAN_NOTE="no Vulkan loader (wgpu will be unavailable)"
    fi
else
    VULKAN_NOTE="system loader"
fi
icd=$(ls /etc/vulkan/icd.d/nvidia_icd*.json /usr/share/vulkan/icd.d/nvidia_icd*.json /usr/local/share/vulkan/icd.d/nvidia_icd*.json 2>/dev/null | head -n 1)
if [ -z "$icd" ] && ldconfig -p 2>/dev/null | grep -q 'libGLX_nvidia.so.0'; then
    icd="$LOG_DIR/nvidia_icd.json"
    printf '{"file_format_version":"1.0.1","ICD":{"library_path":"libGLX_nvidia.so.0","api_version":"1.3.0"}}\n' > "$icd"
fi
if [ -n "$icd" ]; then
    export VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd"
    VULKAN_NOTE="$VULKAN_NOTE, ICD $icd"
else
    VULKAN_NOTE="$VULKAN_NOTE, no NVIDIA Vulkan ICD found"
fi

say "libraries"
echo "CUDA library folders: ${CUDA_LIBS:-(system only)}"
echo "Vulkan: $VULKAN_NOTE"
for lib in libcuda.so libnvrtc.so libcublas.so; do
    found=$( (ldconfig -p 2>/dev/null | grep -o "/[^ ]*${lib}[.0-9]*$"; for d in "${lib_dirs[@]}"; do ls "$d"/${lib}* 2>/dev/null; done) | head -n 3 | tr '\n' ' ')
    echo "$lib: ${found:-not found}"
done
cat "$BUNDLE/MANIFEST" 2>/dev/null | head -n 2

say "tensorfit devices"
timeout "$(allow 60)" "$BUNDLE/bin/tensorfit" devices || true

# ---------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------
FAILED=()
run_tests() { # name, seconds, command...
    local name=$1 want=$2; shift 2
    local t; t=$(allow "$want")
    say "$name (timeout ${t}s)"
    if [ "$t" -eq 0 ]; then echo "no time left"; FAILED+=("$name (no time left)"); return; fi
    TENSORFIT_REQUIRE=cuda,wgpu timeout "$t" "$@" > "$LOG_DIR/$name.log" 2>&1
    local rc=$?
    # What ran, what each test printed about its devices, and the outcome.
    grep -E '^(test |skipped|cuda|wgpu|NVRTC|CUDA|a GTX|test result|rank )' "$LOG_DIR/$name.log" | tail -n 60
    case $rc in
        0) ;;
        124) FAILED+=("$name (timed out after ${t}s)") ;;
        *)
            FAILED+=("$name (exit $rc)")
            echo "-- failures:"
            grep -A 3 'panicked at' "$LOG_DIR/$name.log" | grep -v -E '^(stack backtrace|note:|--)' | head -n 40
            ;;
    esac
}
run_tests tensorfit-cuda-tests 120 "$BUNDLE/bin/tensorfit-cuda-tests" --nocapture
run_tests conformance 180 "$BUNDLE/bin/conformance" --nocapture
# NCCL on one rank (no mpirun: the process is rank 0 of 1): chosen by the ranks' vote,
# joined on cuda:0, and the all-reduce and broadcasts checked over it.
run_tests nccl 60 "$BUNDLE/bin/tensorfit-dist-check" nccl

# ---------------------------------------------------------------------------------------
# Timings
# ---------------------------------------------------------------------------------------
declare -A CELL
json_field() { python3 -c 'import json,sys
for line in reversed(sys.stdin.read().strip().splitlines()):
    try: d = json.loads(line)
    except ValueError: continue
    v = d.get(sys.argv[1]); print("" if v is None else v); break' "$1" 2>/dev/null; }
fmt_s() { python3 -c 'import sys; v=float(sys.argv[1]); print("%.3f s" % v if v < 100 else "%.0f s" % v)' "$1" 2>/dev/null || echo "$1"; }

time_cli() { # key (train|infer), seconds, timed runs after one warm-up, device
    local key=$1 want=$2 steps=$3 device=$4 t out rc ms secs
    t=$(allow "$want")
    if [ "$t" -eq 0 ]; then CELL[$key.$device]="no time left"; return; fi
    say "$key on $device (timeout ${t}s)"
    out=$(timeout "$t" "$BUNDLE/bin/tensorfit" bench --mode "$key" --device "$device" --batch 100 \
        --seq-len 2000 --tbptt 50 --iters "$steps" --json 2>"$LOG_DIR/$key.$device.err")
    rc=$?
    echo "$out" | tail -n 1
    ms=$(echo "$out" | json_field ms_per_step)
    secs=${ms:+$(python3 -c "print($ms / 1000)")}
    if [ "$rc" -eq 124 ]; then
        CELL[$key.$device]="timeout ${t}s"
    elif [ "$rc" -ne 0 ] || [ -z "$secs" ]; then
        CELL[$key.$device]="failed"
        tail -n 5 "$LOG_DIR/$key.$device.err"
        echo "(exit $rc; the table says \"failed\")"
    else
        CELL[$key.$device]=$(fmt_s "$secs")
        [ "$key" = train ] && CELL[peak.$device]=$(echo "$out" | json_field measured_peak_bytes)
    fi
}
time_cli train 60 3 cuda
time_cli infer 40 3 cuda
time_cli train 60 1 wgpu
time_cli infer 45 1 wgpu
time_cli train 90 1 cpu
time_cli infer 60 1 cpu

t=$(allow 90)
if [ "$t" -gt 0 ] && command -v python3 >/dev/null 2>&1; then
    say "PyTorch cuDNN LSTM (timeout ${t}s)"
    out=$(timeout "$t" python3 scripts/gpu_torch_lstm.py --batch 100 --seq-len 2000 --tbptt 50 --steps 3 2>"$LOG_DIR/torch.err")
    echo "$out"
    v=$(echo "$out" | json_field train_s_per_step); CELL[train.pytorch]=${v:+$(fmt_s "$v")}
    v=$(echo "$out" | json_field infer_s); CELL[infer.pytorch]=${v:+$(fmt_s "$v")}
    e=$(echo "$out" | json_field error); [ -n "$e" ] && CELL[train.pytorch]="$e"
    [ -z "$out" ] && tail -n 5 "$LOG_DIR/torch.err"
else
    CELL[train.pytorch]="skipped"
fi

# ---------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------
say "results: ${GPU_NAME:-unknown GPU}, $(date -u +%Y-%m-%d), ${SECONDS}s"
printf '%-46s | %-12s | %-12s | %-12s | %-14s\n' "workload (seed network)" "cuda" "wgpu" "cpu" "pytorch cudnn"
printf '%-46s-+-%-12s-+-%-12s-+-%-12s-+-%-14s\n' "$(printf '%.0s-' {1..46})" "------------" "------------" "------------" "--------------"
printf '%-46s | %-12s | %-12s | %-12s | %-14s\n' "training step, B 100, T 2000, tbptt 50 (/step)" \
    "${CELL[train.cuda]:-n/a}" "${CELL[train.wgpu]:-n/a}" "${CELL[train.cpu]:-n/a}" "${CELL[train.pytorch]:-n/a}"
printf '%-46s | %-12s | %-12s | %-12s | %-14s\n' "inference, B 100, T 2000" \
    "${CELL[infer.cuda]:-n/a}" "${CELL[infer.wgpu]:-n/a}" "${CELL[infer.cpu]:-n/a}" "${CELL[infer.pytorch]:-n/a}"
printf '%-46s | %-12s | %-12s | %-12s | %-14s\n' "training peak allocated (bytes)" \
    "${CELL[peak.cuda]:-n/a}" "${CELL[peak.wgpu]:-n/a}" "${CELL[peak.cpu]:-n/a}" ""
if [ "${#FAILED[@]}" -gt 0 ]; then
    printf '\nFAILED:\n'
    printf '  %s\n' "${FAILED[@]}"
    exit 1
fi
printf '\ntests: tensorfit-cuda-tests and conformance passed with TENSORFIT_REQUIRE=cuda,wgpu\n'
