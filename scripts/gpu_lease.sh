#!/usr/bin/env bash
# Full-protocol runs on a short GPU lease: several `python -m fltutor run` commands at once on one GPU.
#
# The engine batches the seeds of one table cell into one sweep; running four or five such commands side by
# side kept an H100 95-98 % busy (nvidia-smi, 2026-11-26; one command alone was not measured), and one
# 15-minute lease ran 16 table cells this way (README, notebook 04's Table 1). Each command writes its own results folder,
# so nothing races on results/; bring them home with `python -m fltutor merge`.
#
#   scripts/gpu_lease.sh prepare                  # here, once: what a bare box lacks, in ignored folders
#   scripts/gpu_lease.sh run BUDGET_S JOBS_FILE   # there: every stream of JOBS_FILE until BUDGET_S seconds
#
# prepare writes .whl/ (papermill, ipykernel, pytest and opacus wheels for Python 3.12, for a box with torch but
# no Jupyter), .gitshallow/ (a blobless copy of HEAD, so provenance records the commit there) and
# .gpudata/{MNIST,FashionMNIST}/raw/*.xz (from $FLTUTOR_DATA, compressed to fit a 64 MiB upload; not
# under data/, where full-size folders would hide the bundled subset from this checkout's quick runs).
# All three are in .gitignore: carry them (the device tool's carry: .whl, .gitshallow, .gpudata). Run it after the last commit before the lease: the box's
# tables record that commit, and code changed since would be recorded as the commit's. JOBS_FILE has one job per line, `STREAM NAME ARGS...`, where
# ARGS are `fltutor run` arguments (shell quoting); the jobs of a stream run in order, the streams at
# once. Each job gets `-p results_dir /tmp/res/STREAM/<paper>` only if ARGS name one (give it), and its
# own --out. After every job /tmp/res and the logs are packed into $OUT/results.tgz, so a lease that ends
# mid-run still returns what finished. A second `run` on the same (still warm) machine skips the jobs that
# finished in an earlier call (/tmp/done) and resumes the cut-off ones from their checkpoints under runs/.
# STREAMS="s1" runs only the streams named, e.g. a job too long to finish beside the others. Beside the streams, run starts the GPU-only tests (those pytest skips
# without CUDA) and writes their report to $OUT/gpu_tests.txt; GPU_TESTS=0 leaves them out. Example line:
#   s1 A-fedavg -f configs/04_paper.yaml -p distributions '["A"]' -p seeds '[2, 3, 4]' -p methods '["fedavg"]' -p results_dir /tmp/res/s1/waffle_weighted
set -u
here=$(cd "$(dirname "$0")/.." && pwd)

prepare() {
    cd "$here" || exit 1
    mkdir -p .whl && python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl papermill ipykernel pytest || exit 1
    rm -f .whl/debugpy-*.whl   # 5 MB that ipykernel only imports when a debugger attaches
    # opacus (dp_fedavg's accountant) without its dependencies: the box's torch, numpy and scipy serve it.
    python3 -m pip download -q --no-deps --only-binary=:all: -d .whl opacus opt_einsum || exit 1
    rm -rf .gitshallow /tmp/gitshallow.$$
    git config uploadpack.allowFilter true   # the clone's server side is this checkout: let it filter blobs out
    git -c protocol.file.allow=always clone -q --depth 1 --filter=blob:none --no-checkout "file://$here" \
        /tmp/gitshallow.$$ && git -C /tmp/gitshallow.$$ read-tree HEAD &&
        git -C /tmp/gitshallow.$$ remote remove origin && mv /tmp/gitshallow.$$/.git .gitshallow
    local ok=$?; git config --unset uploadpack.allowFilter; [ $ok -eq 0 ] || exit 1
    for d in MNIST FashionMNIST; do
        [ -d "${FLTUTOR_DATA:-/nonexistent}/$d/raw" ] || continue
        mkdir -p ".gpudata/$d/raw"
        for f in "$FLTUTOR_DATA/$d/raw"/*-ubyte; do xz -T2 -9 -c "$f" > ".gpudata/$d/raw/$(basename "$f").xz"; done
    done
    du -shc .whl .gitshallow .gpudata 2>/dev/null | tail -1
}

run() {
    local budget=$1 jobs=$2
    T0=$(date +%s); DEADLINE=$((T0 + budget)); OUT=${OUT:-/tmp/out}
    cd "$here" || exit 1
    export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} MPLBACKEND=Agg FLTUTOR_DATA=${FLTUTOR_DATA:-$here/.gpudata}
    mkdir -p "$OUT" /tmp/res /tmp/logs
    # a second call on a still-warm box finds the first call's wheels installed: use them, don't reinstall
    [ -d /tmp/site/papermill ] && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    if ls .whl/*.whl > /dev/null 2>&1 && ! python3 -c "import papermill, ipykernel" 2> /dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 9
        export PYTHONPATH=/tmp/site:$here${PYTHONPATH:+:$PYTHONPATH}
    fi
    export PYTHONPATH=$here${PYTHONPATH:+:$PYTHONPATH}   # script jobs (python3 scripts/x.py) import fltutor from here
    [ -d .gitshallow ] && [ ! -e .git ] && mv .gitshallow .git
    python3 - <<'EOF'
import glob, lzma, os
for f in glob.glob(".gpudata/*/raw/*.xz"):
    if not os.path.exists(f[:-3]):
        with lzma.open(f) as i, open(f[:-3] + ".tmp", "wb") as o:
            o.write(i.read())
        os.replace(f[:-3] + ".tmp", f[:-3])
EOF
    python3 -c "import papermill, ipykernel, torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" || exit 8
    echo "commit $(git rev-parse HEAD 2>&1 | head -1); setup $(( $(date +%s) - T0 )) s"
    if [ "${GPU_TESTS:-1}" = 1 ] && python3 -c "import pytest" 2> /dev/null; then   # the tests that skip without CUDA
        (timeout 300 python3 -m pytest -q -o addopts=-ra -p no:cacheprovider tests/test_federation.py tests/test_engine.py \
            -k "gpu or cuda" > "$OUT/gpu_tests.txt" 2>&1; echo "gpu tests rc=$? (at +$(( $(date +%s) - T0 )) s)") &
    fi
    local streams
    streams=${STREAMS:-$(awk 'NF && $1 !~ /^#/ {print $1}' "$jobs" | awk '!seen[$0]++')}   # STREAMS="s1 s6": only those
    for s in $streams; do stream "$s" "$jobs" & done
    wait
    pack
    echo "total $(( $(date +%s) - T0 )) s"
}

pack() {   # one file back, replaced atomically, so a lease cut off mid-copy still returns the last whole one
    (flock 9; tar czf "$OUT/.results.tgz" -C /tmp res logs 2> /dev/null; mv "$OUT/.results.tgz" "$OUT/results.tgz") 9> /tmp/pack.lock
}

stream() {
    local s=$1 file=$2 line first name args left t rc
    while IFS= read -r line; do
        read -r first name args <<< "$line"
        [ "$first" = "$s" ] && [ -n "$name" ] || continue
        if grep -qxF "$s $name" /tmp/done 2> /dev/null; then echo "[$s] $name finished in an earlier call"; continue; fi
        left=$((DEADLINE - $(date +%s)))
        if [ $left -lt 30 ]; then echo "[$s] skip $name (${left} s left)"; continue; fi
        t=$(date +%s)
        if [[ "$args" == scripts/*.py* ]]; then   # a script job: its own flags name /tmp/runs/STREAM and /tmp/res/STREAM/
            eval "timeout -k 5 $left python3 $args" > "/tmp/logs/$s-$name.log" 2>&1
        else
            eval "timeout -k 5 $left python3 -m fltutor run $args --out /tmp/nb/$s-$name --no-progress" \
                > "/tmp/logs/$s-$name.log" 2>&1
        fi
        rc=$?
        [ $rc -eq 0 ] && echo "$s $name" >> /tmp/done
        echo "[$s] $name rc=$rc $(( $(date +%s) - t )) s (at +$(( $(date +%s) - T0 )) s)"
        pack
    done < "$file"
}

case "${1:-}" in
    prepare) prepare ;;
    run) [ $# -eq 3 ] || { echo "usage: $0 run BUDGET_S JOBS_FILE" >&2; exit 2; }; run "$2" "$3" ;;
    *) echo "usage: $0 prepare | run BUDGET_S JOBS_FILE" >&2; exit 2 ;;
esac
