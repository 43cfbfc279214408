#!/bin/sh
# fuzz/run.sh SECONDS TARGET... - runs each libFuzzer target for SECONDS
# under nice -n 19, one at a time, from the repository root.  The working
# corpus is build/fuzz/corpus/NAME (seeded from fuzz/corpus/NAME), crashes
# land in fuzz/regress/NAME, and one line per run is appended to
# build/fuzz/runs.tsv: date, target, seconds actually run, executions,
# coverage (edges), features, corpus size, exit status.
set -u
secs=$1
shift
mkdir -p build/fuzz
for t in "$@"; do
    work=build/fuzz/corpus/$t
    mkdir -p "$work" "fuzz/regress/$t"
    log=build/fuzz/$t.log
    t0=$(date +%s)
    nice -n 19 "build/fuzz/fuzz_$t" -max_total_time="$secs" -rss_limit_mb=2048 \
        -timeout=20 -print_final_stats=1 -artifact_prefix="fuzz/regress/$t/" \
        "$work" "fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    ran=$(($(date +%s) - t0))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
    cov=$(printf '%s\n' "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    ft=$(printf '%s\n' "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    corp=$(printf '%s\n' "$last" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$ran" \
        "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$rc" >>build/fuzz/runs.tsv
    echo "fuzz_$t: ${ran} s, ${execs:-?} executions, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, exit $rc"
    [ "$rc" -eq 0 ] || tail -n 40 "$log"
done
