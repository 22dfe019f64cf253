#!/usr/bin/env bash
# Accelerator readiness check on one CUDA GPU (issue 12, item 5): install, GPU tests,
# training benchmarks at the blog's scale; CSVs under $OUT. Sized to end in under
# 8 minutes on one H200 (16 cores), every step capped with `timeout`.
#
#   OUT=/some/dir scripts/device_check.sh              # on the GPU machine
#   OUT=/tmp/dc  scripts/device_check.sh --dry-run     # anywhere: every size shrunk
#   scripts/device_check.sh --fetch-wheels             # here, before a machine with
#                                                      # no package index (see below)
#
# Steps (each one a row of $OUT/steps.csv: step, status ok|failed|timeout|skipped, rc,
# seconds, limit):
#  1. install: `pip install -e ".[cuda]"` (the project with jax[cuda13]). Where the
#     python already holds a CUDA jax (this workplace's H200 image: jax 0.11.2 with
#     jax-cuda13-plugin, no network) and .whl/ holds the missing pure-Python
#     dependencies (mctx, pgx, svgwrite, tensorboardX; `--fetch-wheels` downloads them
#     here), the same install runs offline: `--no-index --find-links .whl
#     --no-build-isolation`; if pip cannot resolve the extra offline (another CUDA
#     wheel set than jax[cuda13] asks for), the project and the wheels are installed
#     with --no-deps over the image's own CUDA jax. The repository is also put on
#     PYTHONPATH, so the checks run even if the editable install fails.
#  2. tests: tests/test_search_mctx_match.py (our PUCT and Gumbel vs mctx),
#     tests/test_search_reference.py and tests/test_curiosity.py (kernel vs slow
#     reference searches) and tests/test_train_trainer.py (compiled iterations of all
#     five algorithms), slow cases included (-m ""), float32 matmuls at full precision
#     (JAX_DEFAULT_MATMUL_PRECISION=highest: the GPU's TF32 default would test
#     rounding, not the kernels), 4 xdist workers when pytest-xdist is there (memory
#     not preallocated then); JUnit XML in $OUT/tests.xml.
#  3. bench: `curiosity-search bench train --repeats 1` for configs/hex9_gumbel.yaml
#     and configs/hex9_curiosity.yaml at the blog's scale: ResNet 6 x 128, bf16
#     compute, self-play batch 4096 (halved once if it does not fit), train batch
#     1024; moves and updates per iteration cut from the configs' 16 and 32 to 8 and
#     16 (same positions per update) to fit the time. Rows appended to
#     $OUT/bench_train.csv (the columns of curiosity_search/bench/train.py: positions/s,
#     network evaluations/s, FLOPs/s, the phase split, compile seconds).
#  4. summary: $OUT/bench_summary.csv, per config: positions/s, network
#     evaluations/s, network FLOP/s and the fraction of the H200's bf16 dense peak.
#     PEAK: 989e12 FLOP/s, NVIDIA's H200 SXM datasheet figure for dense BF16 tensor
#     core math (1,979 TFLOP/s is with 2:4 sparsity); override with PEAK_BF16_FLOPS.
#     MATMUL_CEILING: 790e12 FLOP/s, an 8192^3 bf16 matrix product measured on this
#     workplace's H200s (769-798 TFLOP/s, /work/.library/device/KINDS.md), the
#     practical ceiling; override with MATMUL_CEILING_FLOPS. FLOPs are network FLOPs
#     only (XLA's count of one forward pass; an update = 3 forward passes), as the
#     training runs count them: search arithmetic is left out.
#
# Also in $OUT: device_check.log (everything printed), env.txt (nvidia-smi, versions).
# Exit status: 0 when every step that ran passed.
#
# --dry-run (CPU, a test runs it): no install; pytest only collects the GPU test
# selection and runs one small test; the benches run on a 3x3 board with a 1 x 8
# ResNet, 8 games, 8 moves (so that games end inside the first iteration), 1 update,
# 4 simulations, one timed iteration.
#
# Environment: OUT (required), PYTHON (default python3), BUDGET_S (whole script,
# default 470; 1200 for a dry run), BENCH_BATCH (4096), BENCH_MOVES (8), BENCH_UPDATES (16),
# WHEELS (default .whl), PEAK_BF16_FLOPS, MATMUL_CEILING_FLOPS.
#
# With the workplace's device tool: run `scripts/device_check.sh --fetch-wheels` here
# once (it fills .whl/, which git ignores), then call the tool with carry [".whl"]
# and the command `bash scripts/device_check.sh`.

set -uo pipefail

SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
REPO="$(dirname "$(dirname "$SCRIPT")")"
cd "$REPO" || exit 2

# `device_check.sh --step FUNCTION ARGS...` (internal): one step's function in its own
# process, so that `timeout` can stop it; DRY_RUN and OUT come from the caller's
# environment.
STEP_MODE=0
if [[ ${1:-} == --step ]]; then
    STEP_MODE=1
    shift
else
    DRY_RUN=0
    FETCH_WHEELS=0
    for arg in "$@"; do
        case "$arg" in
            --dry-run) DRY_RUN=1 ;;
            --fetch-wheels) FETCH_WHEELS=1 ;;
            -h|--help) sed -n '2,/^$/p' "$SCRIPT" | sed 's/^# \{0,1\}//'; exit 0 ;;
            *) echo "error: unknown argument $arg (expected --dry-run, --fetch-wheels" \
                    "or --help)" >&2
               exit 2 ;;
        esac
    done
    export DRY_RUN
fi
PY="${PYTHON:-python3}"
WHEELS="${WHEELS:-.whl}"
GPU_TESTS=(tests/test_search_mctx_match.py tests/test_search_reference.py
           tests/test_curiosity.py tests/test_train_trainer.py)
if [[ $DRY_RUN == 1 ]]; then
    BATCH=8
    SIZES=(env.size=3 network.blocks=1 network.width=8 train.batch_size=8
           selfplay.moves_per_iteration=8 train.updates_per_iteration=1
           search.num_simulations=4 search.eval_num_simulations=4
           selfplay.random_opening_moves=1 selfplay.sampling_moves=1
           selfplay.replay_capacity=64)
else
    BATCH="${BENCH_BATCH:-4096}"
    SIZES=(network.blocks=6 network.width=128 train.batch_size=1024
           selfplay.moves_per_iteration="${BENCH_MOVES:-8}"
           train.updates_per_iteration="${BENCH_UPDATES:-16}")
fi
# The pure-Python dependencies the H200 image lacks, at the versions this project is
# tested with (pyproject.toml's lower bounds).
MISSING_WHEELS=(mctx==0.0.71 pgx==2.6.0 svgwrite tensorboardX==2.6.5)

# The steps' functions --------------------------------------------------------------
install_project() {
    local pip=("$PY" -m pip install --no-build-isolation)
    local has_cuda_jax=0
    "$PY" -c "import jax; jax.devices('gpu')" >/dev/null 2>&1 && has_cuda_jax=1
    echo "a CUDA jax already installed: $has_cuda_jax"
    if [[ -d "$WHEELS" ]]; then
        # Offline: the image's packages plus the carried wheels.
        "${pip[@]}" --no-index --find-links "$WHEELS" -e ".[cuda]" && return 0
        if [[ $has_cuda_jax == 1 ]]; then
            echo "the [cuda] extra did not resolve offline; the image's CUDA jax stays,"
            echo "the project and the carried wheels go in with --no-deps"
            "${pip[@]}" --no-deps --no-index "$WHEELS"/*.whl \
                && "${pip[@]}" --no-deps --no-index -e . && return 0
        fi
        return 1
    fi
    "${pip[@]}" -e ".[cuda]"
}

check_imports() {
    "$PY" - <<'EOF'
import jax, mctx, pgx  # noqa: F401
import curiosity_search  # noqa: F401
print("jax", jax.__version__, "backend", jax.default_backend(), "devices", jax.devices())
EOF
}

run_tests() {
    local args=(-q -m "" -p no:cacheprovider --junitxml="$OUT/tests.xml")
    if [[ $DRY_RUN == 1 ]]; then
        "$PY" -m pytest --collect-only -q -m "" -p no:cacheprovider "${GPU_TESTS[@]}" \
            | tail -n 1 || return 1
        "$PY" -m pytest "${args[@]}" \
            "tests/test_search_reference.py::test_halving_schedule_matches_reference"
        return
    fi
    if "$PY" -c "import xdist" 2>/dev/null; then
        args+=(-n 4)
        export XLA_PYTHON_CLIENT_PREALLOCATE=false
    fi
    JAX_DEFAULT_MATMUL_PRECISION=highest "$PY" -m pytest "${args[@]}" "${GPU_TESTS[@]}"
    local rc=$?
    unset XLA_PYTHON_CLIENT_PREALLOCATE
    return $rc
}

bench_one() {  # bench_one CONFIG BATCH LOG
    "$PY" -m curiosity_search.cli bench train --config "$1" --repeats 1 \
        --out "$OUT/bench_train.csv" \
        --set network.trunk=resnet network.compute_dtype=bfloat16 selfplay.batch_size="$2" \
        eval.every=0 logging.tensorboard=false "${SIZES[@]}" 2>&1 | tee "$3"
}

summarize() {
    "$PY" - "$OUT/bench_train.csv" "$OUT/bench_summary.csv" <<'EOF'
import csv, os, sys

source, target = sys.argv[1], sys.argv[2]
peak = float(os.environ.get("PEAK_BF16_FLOPS", 989e12))
ceiling = float(os.environ.get("MATMUL_CEILING_FLOPS", 790e12))
with open(source, newline="") as handle:
    rows = list(csv.DictReader(handle))
out = []
for row in rows:
    flops = float(row["flops_per_sec"])
    selfplay_flops = (float(row["selfplay_evaluations_per_sec"])
                      * float(row["forward_flops"]))
    out.append({
        "config": row["config"], "device": row["device"], "network": row["network"],
        "compute_dtype": row["compute_dtype"], "games": row["games"],
        "num_simulations": row["num_simulations"],
        "positions_per_sec": row["positions_per_sec"],
        "evaluations_per_sec": row["evaluations_per_sec"],
        "selfplay_evaluations_per_sec": row["selfplay_evaluations_per_sec"],
        "forward_flops": row["forward_flops"],
        "flops_per_sec": f"{flops:.4g}",
        "peak_bf16_flops": f"{peak:.4g}",
        "peak_fraction": f"{flops / peak:.3g}",
        "selfplay_peak_fraction": f"{selfplay_flops / peak:.3g}",
        "matmul_ceiling_fraction": f"{flops / ceiling:.3g}",
        "selfplay_fraction": row["selfplay_fraction"],
        "update_in_scan_ratio": row["update_in_scan_ratio"],
        "compile_seconds": row["compile_seconds"],
    })
with open(target, "w", newline="") as handle:
    writer = csv.DictWriter(handle, fieldnames=list(out[0]))
    writer.writeheader()
    writer.writerows(out)
columns = ("config", "games", "positions_per_sec", "evaluations_per_sec", "flops_per_sec",
           "peak_fraction")
print(" | ".join(columns))
for row in out:
    print(" | ".join(str(row[c]) for c in columns))
EOF
}

if [[ $STEP_MODE == 1 ]]; then
    "$@"
    exit
fi

# The whole check ---------------------------------------------------------------------
if [[ $FETCH_WHEELS == 1 ]]; then
    mkdir -p "$WHEELS"
    exec "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$WHEELS" "${MISSING_WHEELS[@]}"
fi

if [[ -z "${OUT:-}" ]]; then
    echo "error: set OUT to the folder for the CSVs and the log" >&2
    exit 2
fi
mkdir -p "$OUT" || exit 2
OUT="$(cd "$OUT" && pwd)"
export OUT
exec > >(tee -a "$OUT/device_check.log") 2>&1

START=$SECONDS
# The GPU run must end inside 8 minutes; a dry run on a shared CPU compiles slowly.
BUDGET_S="${BUDGET_S:-$(( DRY_RUN == 1 ? 1200 : 470 ))}"
STEPS="$OUT/steps.csv"
echo "step,status,rc,seconds,limit_s" > "$STEPS"
FAILED=0

export PYTHONUNBUFFERED=1
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export CURIOSITY_SEARCH_JAX_CACHE="${CURIOSITY_SEARCH_JAX_CACHE:-/tmp/curiosity_search_jax_cache}"
export MPLBACKEND=Agg

remaining() { echo $(( BUDGET_S - (SECONDS - START) )); }

# run_step NAME CAP RESERVE FUNCTION ARGS...: runs the step's FUNCTION in its own
# process under `timeout`, for at most CAP seconds and at most what is left of the
# budget minus RESERVE (kept for the steps after it); one row of steps.csv. Returns
# the function's exit status (124 on timeout, 125 when skipped for lack of time).
run_step() {
    local name=$1 cap=$2 reserve=$3
    shift 3
    local left=$(( $(remaining) - reserve ))
    local limit=$(( cap < left ? cap : left ))
    if (( limit < 10 )); then
        echo "== $name: skipped, ${left}s of the budget left"
        echo "$name,skipped,,0,$limit" >> "$STEPS"
        FAILED=1
        return 125
    fi
    echo "== $name (at most ${limit}s): $*"
    local begin=$SECONDS rc status
    timeout -k 10 "$limit" bash "$SCRIPT" --step "$@"
    rc=$?
    case $rc in
        0) status=ok ;;
        124|137) status=timeout; FAILED=1 ;;
        *) status=failed; FAILED=1 ;;
    esac
    echo "$name,$status,$rc,$(( SECONDS - begin )),$limit" >> "$STEPS"
    echo "== $name: $status (rc $rc, $(( SECONDS - begin ))s)"
    return $rc
}

{
    date -u
    echo "dry_run=$DRY_RUN repo=$REPO python=$(command -v "$PY")"
    nvidia-smi 2>&1 || echo "nvidia-smi: not available"
    "$PY" -c "import sys; print('python', sys.version)"
    "$PY" -m pip list 2>/dev/null \
        | grep -iE '^(jax|jaxlib|jax-cuda[0-9]+-(plugin|pjrt)|flax|optax|chex|mctx|pgx|orbax-checkpoint|numpy|nvidia-cudnn-cu[0-9]+) ' \
        || true
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# 1. install
if [[ $DRY_RUN == 1 ]]; then
    echo "install,skipped,,0,0" >> "$STEPS"
else
    run_step install 120 380 install_project
fi
if ! run_step imports 60 0 check_imports; then
    echo "error: the project does not import; nothing else can run" >&2
    exit 1
fi
BACKEND="$("$PY" -c "import jax; print(jax.default_backend())" 2>/dev/null)"
if [[ $DRY_RUN == 0 && "$BACKEND" != "gpu" ]]; then
    echo "warning: jax's backend is '$BACKEND', not gpu: the numbers below are not a GPU's" >&2
    FAILED=1
fi

# 2. tests
run_step tests 200 250 run_tests

# 3. bench: each config gets an even share of what is left; a batch that does not fit
# is halved once per try while time remains.
CONFIGS=(configs/hex9_gumbel.yaml configs/hex9_curiosity.yaml)
for index in "${!CONFIGS[@]}"; do
    config=${CONFIGS[$index]}
    name=$(basename "$config" .yaml)
    batch=$BATCH
    share=$(( ($(remaining) - 15) / (${#CONFIGS[@]} - index) ))
    deadline=$(( SECONDS + share ))
    while true; do
        log="$(mktemp)"
        run_step "bench_${name}_b${batch}" 400 $(( $(remaining) - (deadline - SECONDS) )) \
            bench_one "$config" "$batch" "$log"
        rc=$?
        if [[ $rc != 0 && $rc != 124 && $rc != 125 && $rc != 137 && $batch -gt 256 ]] \
            && grep -qE 'RESOURCE_EXHAUSTED|[Oo]ut of memory|the run needs an estimated' "$log"
        then
            batch=$(( batch / 2 ))
            echo "== $name did not fit: again with self-play batch $batch"
            rm -f "$log"
            continue
        fi
        rm -f "$log"
        break
    done
done

# 4. summary
if [[ -s "$OUT/bench_train.csv" ]]; then
    run_step summary 30 0 summarize
else
    echo "summary,skipped,,0,0" >> "$STEPS"
    FAILED=1
fi

echo
echo "== steps ($(( SECONDS - START ))s in all; files in $OUT)"
column -s, -t "$STEPS" 2>/dev/null || cat "$STEPS"
exit $FAILED
