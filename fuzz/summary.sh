#!/bin/sh
# fuzz/summary.sh [runs.tsv] - totals per target from the lines fuzz/run.sh
# appends: runs, minutes, executions, and the coverage (edges), features
# and corpus size of the last run (libFuzzer loads the whole working corpus
# first, so the last run covers everything found so far), plus failed runs.
f=${1:-build/fuzz/runs.tsv}
echo "| target | runs | minutes | executions | edges (cov) | features | corpus | failed runs |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
awk -F '\t' '
{ t = $2; runs[t]++; secs[t] += $3; execs[t] += $4; cov[t] = $5; ft[t] = $6;
  corp[t] = $7; if ($8 != 0) bad[t]++ }
END {
  for (t in runs)
    printf "| %s | %d | %.1f | %d | %s | %s | %s | %d |\n", t, runs[t], secs[t] / 60,
           execs[t], cov[t], ft[t], corp[t], bad[t] + 0
}' "$f" | sort
awk -F '\t' '{ s += $3; e += $4 } END { printf "| all | %d | %.1f | %d | | | | |\n", NR, s / 60, e }' "$f"
