#!/bin/sh
# eval/leakage/grid.sh PIECE... - the paper's grid of the cross-shard
# evaluation in pieces (docs/LEAKAGE.md, "The paper's grid"), each piece one
# run.py process into OUT/PIECE that rewrites its results.json after every
# held-out trial, so a stopped piece loses at most one trial.  Pieces:
#   sift-5k sift-10k    the bundled SIFT set (datasets/sift, 10,000 vectors)
#   large-20k           the large SIFT set's 20,000 prefix (DATA_LARGE)
#   text-5k text-10k text-20k   the text set (DATA_TEXT), cosine defaults
# Trial counts per world: CALIB_5K/TRIALS_5K (default 2/8), CALIB_10K/
# TRIALS_10K (1/4), CALIB_20K/TRIALS_20K (1/3); PAIRS (5); FIRST_PAIR (0:
# pairs before it are skipped, for extending an earlier run; the piece
# then writes OUT/PIECE-from-N).  Run pieces side
# by side (one per background job); NICE (15) and MESS_LIBRARY as usual.
# Then: eval/leakage/grid.py sift=OUT/sift-5k ... --out OUT.
set -u
cd "$(dirname "$0")/../.." || exit 1
: "${DATA_TEXT:=datasets/text/debian}" "${DATA_LARGE:=datasets/large}"
: "${OUT:=docs/eval/leakage-grid}" "${PAIRS:=5}" "${NICE:=15}"
: "${CALIB_5K:=2}" "${TRIALS_5K:=8}" "${CALIB_10K:=1}" "${TRIALS_10K:=4}"
: "${CALIB_20K:=1}" "${TRIALS_20K:=3}" "${FIRST_PAIR:=0}"
: "${MESS_LIBRARY:=$(pwd)/build/libmess.so}"
export MESS_LIBRARY
PY=${PYTHON:-/usr/bin/python3}
# With the kernel's autogroup scheduling (sched_autogroup_enabled = 1) a
# process's nice value only ranks it within its session's group, and a
# background job started with setsid is a group of its own at nice 0: nice
# alone does not make the grid yield to other sessions.  The group's own
# nice does (raising it needs no privilege).
[ -w /proc/self/autogroup ] && echo "$NICE" > /proc/self/autogroup 2>/dev/null
for piece in "$@"; do
    case $piece in
        sift-5k)   set -- --prefix 5000 --calib "$CALIB_5K" --trials "$TRIALS_5K" ;;
        sift-10k)  set -- --prefix 10000 --calib "$CALIB_10K" --trials "$TRIALS_10K" ;;
        large-20k) set -- --data "$DATA_LARGE" --prefix 20000 --calib "$CALIB_20K" \
                          --trials "$TRIALS_20K" ;;
        text-5k)   set -- --data "$DATA_TEXT" --metric cos --prefix 5000 \
                          --calib "$CALIB_5K" --trials "$TRIALS_5K" ;;
        text-10k)  set -- --data "$DATA_TEXT" --metric cos --prefix 10000 \
                          --calib "$CALIB_10K" --trials "$TRIALS_10K" ;;
        text-20k)  set -- --data "$DATA_TEXT" --metric cos --prefix 20000 \
                          --calib "$CALIB_20K" --trials "$TRIALS_20K" ;;
        *) echo "grid.sh: unknown piece $piece" >&2; exit 2 ;;
    esac
    dir=$OUT/$piece
    [ "$FIRST_PAIR" = 0 ] || dir=$dir-from-$FIRST_PAIR
    mkdir -p "$dir"
    echo "grid.sh: $piece started $(date -u +%H:%M:%S)" >&2
    nice -n "$NICE" /usr/bin/time -f "$piece: %e s wall, %U s user CPU" \
        "$PY" eval/leakage/run.py --pairs "$PAIRS" --first-pair "$FIRST_PAIR" \
        --out "$dir" "$@" > "$dir/last-line.json" 2> "$dir/log.txt" || exit 1
    tail -1 "$dir/log.txt" >&2
done
