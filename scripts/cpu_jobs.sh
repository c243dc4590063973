#!/usr/bin/env bash
# Full-protocol runs on this machine's CPU as background jobs that outlive the shell and resume where they stopped.
#
#   scripts/cpu_jobs.sh start TAG JOBS_FILE   # pin the code, start one background chain per stream
#   scripts/cpu_jobs.sh start TAG             # again, later: the list TAG started with (runs/bg/TAG/jobs.txt),
#                                             # only the streams TAG ran before (STREAMS= picks others)
#   scripts/cpu_jobs.sh status TAG            # what finished, what runs, each job's last round
#   scripts/cpu_jobs.sh stop TAG              # stop every chain of TAG (a job resumes from its last checkpoint)
#   scripts/cpu_jobs.sh add TAG JOBS_FILE     # more jobs for TAG: a running stream takes them after its current
#                                             # ones, an idle stream starts (they run TAG's pinned commit)
#   scripts/cpu_jobs.sh merge TAG [--dry-run] # the tables of TAG's finished jobs into this checkout's results/
#                                             # (python -m fltutor merge; its flags pass through)
#
# JOBS_FILE has configs/gpu/next_lease.txt's format, one job per line: `STREAM NAME fltutor-run-args`, where the
# args name `-p results_dir /tmp/res/STREAM/<paper>`. The streams run at once, one CPU thread each unless THREADS
# says more (two streams on this 2-core machine); a stream's jobs run in order. STREAMS="s4 s7" starts only those
# streams.
#
# Everything of TAG lives under runs/bg/TAG/ (ignored by git: it outlives a session only on the same disk; a fresh
# clone starts without it, and every job of TAG then starts over, as s48's did on 2026-11-29): wt/ a git worktree of the
# commit that started TAG, so that a later `start TAG` runs the same code and its checkpoints resume (a run's
# cells are keyed by a hash of the package source: edited code would start them over); runs/NAME the job's
# checkpoints (run_root); res/NAME/<paper> its tables (results_dir, rewritten from /tmp/res/STREAM/); logs/NAME.log;
# done, the jobs that finished; streams, the streams started. `start TAG` again (after `stop`, a reboot or a new
# session) restarts those streams, skips the finished jobs and resumes the others from their last checkpoint
# (every 10 rounds by default). Bring tables home with
# `python -m fltutor merge runs/bg/TAG/res/NAME/<paper>`. FLTUTOR_DATA must point at the full datasets.
# A job whose args start with scripts/ runs that script instead (`STREAM NAME scripts/gma_ablations.py --out-root
# /tmp/runs/STREAM --results-dir /tmp/res/STREAM/gma ...`): /tmp/runs/STREAM becomes runs/NAME and /tmp/res/STREAM/
# res/NAME/, and the script's own flags say where they go.
# THREADS=N runs each job of the streams it starts on N CPU threads (default 1; say it again at a restart): one
# long job that must finish inside a session can take both cores (`THREADS=2 STREAMS=s11 ... start TAG FILE`).
# DRY=1 prints each job's command instead of running it; CPU_JOBS_DIR moves runs/bg elsewhere.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
root=${CPU_JOBS_DIR:-$here/runs/bg}   # where each TAG's folder goes

usage() {
    echo "usage: $0 start TAG [JOBS_FILE] | add TAG JOBS_FILE | status TAG | stop TAG | merge TAG [MERGE_FLAGS...]" >&2
    exit 2
}

check_tag() {
    [[ "$1" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "TAG: '$1' must be letters, digits, '.', '_' or '-'" >&2; exit 2; }
}

start() {
    local tag=$1 jobs=${2:-$root/$1/jobs.txt} bg="$root/$1" s streams
    [ -f "$jobs" ] || { echo "JOBS_FILE: no file '$jobs' (give one the first time TAG starts)" >&2; exit 2; }
    [ -n "${FLTUTOR_DATA:-}" ] || [ -n "${DRY:-}" ] || {
        echo "FLTUTOR_DATA is unset: point it at the full datasets (torchvision's layout) for full-protocol runs" >&2; exit 2; }
    [ -n "${DRY:-}" ] || python -c "import papermill, torch, fltutor" 2> /dev/null || {
        echo "python: '$(command -v python)' cannot import papermill, torch and fltutor; activate the environment of requirements.txt first" >&2
        exit 2; }
    if [ -n "${STREAMS:-}" ]; then
        streams=$STREAMS
    elif [ -z "${2:-}" ] && [ -s "$bg/streams" ]; then   # a restart: the streams TAG ran, not every one of its list
        streams=$(cat "$bg/streams")
        echo "restarting the streams $tag ran before: $(echo $streams) (STREAMS=\"...\" starts others of its list)"
    else
        streams=$(awk 'NF && $1 !~ /^#/ {print $1}' "$jobs" | awk '!seen[$0]++')
    fi
    [ -n "$streams" ] || { echo "JOBS_FILE: '$jobs' has no job lines (STREAM NAME ARGS...)" >&2; exit 2; }
    local cores; cores=$(getconf _NPROCESSORS_ONLN 2> /dev/null || nproc --all)   # not nproc: it obeys OMP_NUM_THREADS
    [[ "${THREADS:-1}" =~ ^[1-9][0-9]*$ ]] && [ "${THREADS:-1}" -le "$cores" ] || {
        echo "THREADS: got '${THREADS}'; CPU threads per job, a whole number from 1 to this machine's $cores" >&2; exit 2; }
    export THREADS=${THREADS:-1}
    echo "each job of the streams started runs on $THREADS CPU thread(s)"
    mkdir -p "$bg/logs" "$bg/pids"
    for s in $streams; do
        if [ -f "$bg/pids/$s" ] && kill -0 -- "-$(cat "$bg/pids/$s")" 2> /dev/null; then
            echo "stream $s of $tag is running already (process group $(cat "$bg/pids/$s")); stop it first" >&2; exit 2
        fi
    done
    for s in $streams; do   # what a later `start TAG` restarts
        grep -qxF "$s" "$bg/streams" 2> /dev/null || echo "$s" >> "$bg/streams"
    done
    if [ ! -d "$bg/wt" ] && [ -z "${DRY:-}" ]; then
        git -C "$here" worktree add -q --detach "$bg/wt" HEAD || exit 1
    fi
    [ -d "$bg/wt" ] && echo "$tag runs commit $(git -C "$bg/wt" rev-parse --short HEAD) ($bg/wt)"
    # the list as started, for a later start; the saved list itself is left in place (a running chain of another
    # stream reads it as it goes, so replacing the file would hide the jobs `add` appends from that chain)
    [ "$jobs" -ef "$bg/jobs.txt" ] || { cp "$jobs" "$bg/jobs.txt.tmp" && mv "$bg/jobs.txt.tmp" "$bg/jobs.txt"; }
    # the chains run a copy of this script: bash reads a script as it goes, so an edit here would reach them mid-run
    cp "$0" "$bg/cpu_jobs.sh.tmp" && mv "$bg/cpu_jobs.sh.tmp" "$bg/cpu_jobs.sh"
    for s in $streams; do
        if [ -n "${DRY:-}" ]; then chain "$bg" "$s"; continue; fi
        setsid bash "$bg/cpu_jobs.sh" _chain "$bg" "$s" > /dev/null 2>&1 < /dev/null &
        echo "$!" > "$bg/pids/$s"
        echo "stream $s started (process group $!; log $bg/logs/chain-$s.log)"
    done
}

chain() {   # the jobs of one stream, in order; runs in its own process group
    local bg=$1 s=$2 line first name args t rc
    while IFS= read -r line; do
        read -r first name args <<< "$line"
        [ "$first" = "$s" ] && [ -n "$name" ] || continue
        if grep -qxF "$name" "$bg/done" 2> /dev/null; then echo "[$s] $name finished earlier"; continue; fi
        args=${args//\/tmp\/res\/$s\//$bg\/res\/$name\/}
        local cmd
        if [[ "$args" == scripts/*.py* ]]; then   # a script job names its own folders: /tmp/runs/STREAM is the job's
            cmd="python ${args//\/tmp\/runs\/$s/$bg\/runs\/$name}"
        else
            cmd="python -m fltutor run $args -p run_root $bg/runs/$name --out $bg/nb/$name --no-progress"
        fi
        if [ -n "${DRY:-}" ]; then echo "$cmd"; continue; fi
        t=$(date +%s)
        echo "$(date -u +%FT%TZ) [$s] start $name" >> "$bg/logs/chain-$s.log"
        (cd "$bg/wt" && eval "PYTHONPATH=$bg/wt OMP_NUM_THREADS=${THREADS:-1} MPLBACKEND=Agg $cmd") > "$bg/logs/$name.log" 2>&1
        rc=$?
        { [ $rc -eq 0 ] || [ $rc -eq 3 ]; } && echo "$name" >> "$bg/done"   # 3: finished, a diverged run in its table
        echo "$(date -u +%FT%TZ) [$s] $name rc=$rc $(( $(date +%s) - t )) s" >> "$bg/logs/chain-$s.log"
        [ $rc -eq 0 ] || [ $rc -eq 3 ] || break   # 3: a run diverged (reported in its table); anything else stops
    done < "$bg/jobs.txt"
}

status() {
    local bg="$root/$1" f pid
    [ -d "$bg" ] || { echo "TAG: no $bg" >&2; exit 2; }
    for f in "$bg"/pids/*; do
        [ -e "$f" ] || continue
        pid=$(cat "$f")
        if kill -0 -- "-$pid" 2> /dev/null; then echo "stream $(basename "$f"): running"; else echo "stream $(basename "$f"): stopped"; fi
    done
    echo "finished: $(cat "$bg/done" 2> /dev/null | tr '\n' ' ')"
    python3 - "$bg" <<'EOF'
import datetime, json, pathlib, sys
now = datetime.datetime.now(datetime.timezone.utc)
for ck in sorted(pathlib.Path(sys.argv[1], "runs").glob("*/**/checkpoint.json")):
    try:
        got = json.loads(ck.read_text())
        rnd, when = got.get("round"), datetime.datetime.fromisoformat(got["written"])
        age = f", written {when:%H:%M} UTC, {(now - when).total_seconds() / 60:.0f} min ago"
    except (ValueError, KeyError, TypeError):
        rnd, age = "?", ""
    try:   # the run's planned rounds, from the results file a checkpoint writes beside it
        rnd = f"{rnd} of {json.loads((ck.parent / 'results-0.json').read_text())['settings']['rounds']}"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    print(f"  {ck.parent.relative_to(sys.argv[1])}: round {rnd}{age}")
EOF
    tail -n 3 "$bg"/logs/chain-*.log 2> /dev/null
}

add() {   # append JOBS_FILE's new jobs to TAG's list in place; start the streams that are not running
    local tag=$1 jobs=$2 bg="$root/$1" line first name rest s added=0 streams="" idle=""
    [ -f "$bg/jobs.txt" ] || { echo "TAG: $tag has no $bg/jobs.txt (never started): use start" >&2; exit 2; }
    [ -f "$jobs" ] || { echo "JOBS_FILE: no file '$jobs'" >&2; exit 2; }
    while IFS= read -r line || [ -n "$line" ]; do
        read -r first name rest <<< "$line"
        [ -n "$name" ] && [[ "$first" != \#* ]] || continue
        if awk -v n="$name" '$1 !~ /^#/ && $2 == n {found = 1} END {exit !found}' "$bg/jobs.txt"; then
            echo "job $name is in $tag's list already: not added"; continue
        fi
        printf '%s\n' "$line" >> "$bg/jobs.txt"   # in place: a running chain reads the file as it goes
        added=$((added + 1))
        [[ " $streams " == *" $first "* ]] || streams="$streams $first"
    done < "$jobs"
    echo "added $added job(s) to $tag; they run its pinned commit $(git -C "$bg/wt" rev-parse --short HEAD 2> /dev/null || echo '(no worktree yet)')"
    for s in $streams; do
        if [ -f "$bg/pids/$s" ] && kill -0 -- "-$(cat "$bg/pids/$s")" 2> /dev/null; then
            echo "stream $s is running: it takes its new jobs after its current ones"
        else
            idle="$idle $s"
        fi
    done
    [ -z "$idle" ] || STREAMS="${idle# }" start "$tag"
}

stop() {
    local bg="$root/$1" f
    [ -d "$bg" ] || { echo "TAG: no $bg" >&2; exit 2; }
    for f in "$bg"/pids/*; do
        [ -e "$f" ] || continue
        kill -- "-$(cat "$f")" 2> /dev/null && echo "stopped stream $(basename "$f")"
    done
    sleep 5   # papermill shuts its kernel down; one left behind (its own session) is found by its PYTHONPATH
    for f in /proc/[0-9]*/environ; do
        if tr '\0' '\n' 2> /dev/null < "$f" | grep -qxF "PYTHONPATH=$bg/wt"; then
            f=${f%/environ}; kill "${f#/proc/}" 2> /dev/null && echo "stopped process ${f#/proc/} (a kernel of $1)"
        fi
    done
    return 0
}

merge() {   # the finished jobs' tables into this checkout's results/, one fltutor merge for them all
    local tag=$1 bg="$root/$1" name d sources=() empty=""
    shift
    [ -d "$bg" ] || { echo "TAG: no $bg" >&2; exit 2; }
    [ -s "$bg/done" ] || { echo "$tag has no finished job yet (status TAG says how far each one is)" >&2; exit 2; }
    while IFS= read -r name; do
        [ -n "$name" ] || continue
        local found=0
        for d in "$bg/res/$name"/*/; do   # one folder per paper (gma, waffle_ibp, ...)
            [ -d "$d" ] && [ -n "$(ls "$d"/*.csv 2> /dev/null)" ] || continue
            sources+=("${d%/}"); found=1
        done
        [ $found -eq 1 ] || empty="$empty $name"
    done < <(awk '!seen[$0]++' "$bg/done")
    [ -z "$empty" ] || echo "finished without a table under $bg/res/NAME/<paper>/:$empty (nothing of theirs to merge)"
    [ ${#sources[@]} -gt 0 ] || { echo "no tables to merge from $tag" >&2; exit 2; }
    if [ -n "${DRY:-}" ]; then echo "python -m fltutor merge ${sources[*]} $*"; return 0; fi
    (cd "$here" && python -m fltutor merge "${sources[@]}" "$@") || exit $?
    [[ " $* " == *" --dry-run "* ]] || echo "now: python scripts/readme_results.py && python scripts/readme_figures.py"
}

case "${1:-}" in
    start) [ $# -eq 2 ] || [ $# -eq 3 ] || usage; check_tag "$2"; start "$2" "${3:-}" ;;
    status) [ $# -eq 2 ] || usage; check_tag "$2"; status "$2" ;;
    stop) [ $# -eq 2 ] || usage; check_tag "$2"; stop "$2" ;;
    add) [ $# -eq 3 ] || usage; check_tag "$2"; add "$2" "$3" ;;
    merge) [ $# -ge 2 ] || usage; check_tag "$2"; merge "${@:2}" ;;
    _chain) chain "$2" "$3" ;;
    *) usage ;;
esac
