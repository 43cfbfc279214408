#!/bin/sh
# tests/cli_account.sh - `mess account` and `mess plan` from the command
# line: the documented forms, their JSON last lines, the paper's regression
# value, consistency between subcommands, and refusals of bad input.
# Last line: "N passed, N failed".
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

# close A B TOL: |A - B| <= TOL
close() {
    awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'
}
run() { "$MESS" "$@" >"$tmp/out" 2>"$tmp/err"; }

# The paper's random-LSH regression value and the exact mixture.
if run account random-lsh --p-store 0.21 --bits 128 --angle 0.05 --delta 0.01 &&
    close "$(json xi_paper)" 20.041 0.0005 && close "$(json xi_mixture)" 12.4652 0.0001; then
    ok "random-lsh reproduces 20.041 (Chernoff form) and the mixture 12.465"
else
    bad "random-lsh"
fi

# R = 1: eta_R is the single report's ln((1-p_q)/p_q).
if run account access --p-prr 0.1 --p-irr 0.2 --repeats 1 --distance 10 &&
    close "$(json eta_R)" "$(awk 'BEGIN { q = 0.1*0.8 + 0.2*0.9; printf "%.12g", log((1-q)/q) }')" 1e-6 &&
    close "$(json xi_ap)" "$(awk -v e="$(json eta_R)" 'BEGIN { printf "%.12g", 10*e }')" 1e-5; then
    ok "access R=1 and xi_ap = eta_R * DQ"
else
    bad "access R=1"
fi

# Without --distance there is no xi_ap.
if run account access --p-prr 0.1 --p-irr 0.2 --repeats 5 && [ -z "$(json xi_ap)" ] &&
    [ -n "$(json eta_R)" ]; then
    ok "access without --distance"
else
    bad "access without --distance"
fi

# Search: R = 1 gives gamma_eq = 0 and gamma_ne = eta_1; xi_sp adds up.
run account access --p-prr 0.05 --p-irr 0.05 --repeats 1
eta1=$(json eta_R)
if run account search --p-prr 0.05 --p-irr 0.05 --repeats 1 --bits 128 --distance 9 &&
    close "$(json gamma_eq)" 0 1e-9 && close "$(json gamma_ne)" "$eta1" 1e-6 &&
    close "$(json xi_sp)" "$(awk -v e="$eta1" 'BEGIN { printf "%.12g", 9*e }')" 1e-4; then
    ok "search R=1 reduces to one report"
else
    bad "search R=1"
fi

# Stored: fixed route on one shard equals the single-shard value; the
# uniform route is never above the pure bound.
if run account stored --p-store 0.08 --distances 9 --per-item 1 --delta 1e-5 --fixed &&
    close "$(json xi_pure)" "$(awk 'BEGIN { printf "%.12g", 9*log(0.92/0.08) }')" 1e-5; then
    ok "stored --fixed, one shard"
else
    bad "stored --fixed"
fi
if run account stored --p-store 0.08 --distances 3,0,7,12,1,1,2,9 --per-item 2 --delta 1e-5 --tail 20 &&
    [ "$(json u_max)" = 21 ] &&
    awk -v a="$(json xi_pld)" -v b="$(json xi_pure)" 'BEGIN { exit !(a > 0 && a <= b) }' &&
    awk -v a="$(json tail_augmented)" -v b="$(json tail_bound)" 'BEGIN { exit !(a <= b && b <= 1) }'; then
    ok "stored uniform route, tail bound above the augmented tail"
else
    bad "stored uniform"
fi

# Versions: by default every differing bit changes (twice the distances);
# one version is one snapshot; the per-bit closed forms.
if run account stored --p-store 0.08 --distances 6,0,14,24,2,2,4,18 --per-item 2 --delta 1e-5 &&
    want=$(json xi_pld) &&
    run account versions --p-store 0.08 --distances 3,0,7,12,1,1,2,9 --per-item 2 --delta 1e-5 &&
    close "$(json xi_pld)" "$want" 1e-9 && [ "$(json u_max)" = 42 ] &&
    close "$(json eta_changed)" "$(awk 'BEGIN { printf "%.12g", 2*log(0.92/0.08) }')" 1e-7 &&
    close "$(json shown)" 0.8528 1e-9 &&
    close "$(json read_error)" "$(awk 'BEGIN { printf "%.12g", 0.0064/0.8528 }')" 1e-9; then
    ok "versions: twice the distances, 2 eta_D per changed bit, shown and read error"
else
    bad "versions"
fi
if run account stored --p-store 0.08 --distances 3,0,7,12,1,1,2,9 --per-item 2 --delta 1e-5 &&
    want=$(json xi_pld) &&
    run account versions --p-store 0.08 --distances 3,0,7,12,1,1,2,9 --per-item 2 --delta 1e-5 --versions 1 &&
    close "$(json xi_pld)" "$want" 1e-9 && close "$(json xi_pld_snapshot)" "$want" 1e-9 &&
    run account stored --p-store 0.08 --distances 4,0,7,24,1,2,2,9 --per-item 2 --delta 1e-5 &&
    want=$(json xi_pld) &&
    run account versions --p-store 0.08 --distances 3,0,7,12,1,1,2,9 --changed 1,0,0,12,0,1,0,0 \
        --per-item 2 --delta 1e-5 --versions 40 && close "$(json xi_pld)" "$want" 1e-9; then
    ok "versions: one version is a snapshot, --changed counts each changed bit twice"
else
    bad "versions --versions 1 / --changed"
fi
# Past the limits: the route programme (named with its remedy) and, for
# the identifier-fixed route, the doubled distance itself.
"$MESS" account versions --p-store 0.08 --per-item 500 --delta 0.01 \
    --distances "$(awk 'BEGIN { for (i = 0; i < 1024; i++) printf "%s%d", (i ? "," : ""), i % 100 }')" \
    >"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] && grep -q "^mess: account versions: the route distribution is too large.*--fixed gives the worst route" "$tmp/err" &&
    ok "versions: too large a route distribution names --fixed" || bad "versions past the route limit"
"$MESS" account versions --p-store 0.08 --per-item 1024 --fixed --delta 0.01 \
    --distances "$(awk 'BEGIN { for (i = 0; i < 1024; i++) printf "%s4096", (i ? "," : "") }')" \
    >"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] && grep -q "^mess: account versions: " "$tmp/err" && ! grep -q -- "--fixed gives" "$tmp/err" &&
    ok "versions --fixed past the largest distance: refused" || bad "versions --fixed past the limit"
"$MESS" account --help 2>&1 | grep -q '^  versions ' && ok "account --help lists versions" ||
    bad "account --help without versions"

# Help for every form, with the theorem it comes from.
okh=1
for w in access search stored versions random-lsh report summary; do
    "$MESS" account "$w" --help >"$tmp/out" 2>&1 || okh=0
    grep -q "Theorem\|Corollary\|Appendix" "$tmp/out" || okh=0
done
"$MESS" plan --help >"$tmp/out" 2>&1 && grep -q "Proposition 4.1" "$tmp/out" || okh=0
[ $okh = 1 ] && ok "--help of every form cites its result" || bad "help"

# Refusals: exit code 2, a message, no JSON.
refuse_mess() { refuse 2 "$*" "$MESS" "$@"; }
refuse_mess account access --p-prr 0 --p-irr 0 --repeats 3
refuse_mess account access --p-prr 0.7 --p-irr 0.1 --repeats 3
refuse_mess account access --p-prr 0.1 --p-irr 0.1 --repeats 0
refuse_mess account search --p-prr 0.1 --p-irr 0.1 --repeats 3 --bits 10 --distance 11
refuse_mess account stored --p-store 0 --distances 1,2 --per-item 1 --delta 0.01
refuse_mess account stored --p-store 0.1 --distances 1,x --per-item 1 --delta 0.01
refuse_mess account stored --p-store 0.1 --distances 1,2 --per-item 3 --delta 0.01
refuse_mess account stored --p-store 0.1 --distances 1,2 --per-item 1 --delta 1
refuse_mess account random-lsh --p-store 0.1 --bits 128 --angle 2 --delta 0.01
refuse_mess account versions --p-store 0.1 --distances 1,2 --per-item 1
refuse_mess account versions --p-store 0.1 --distances 1,2 --changed 2,0 --per-item 1 --delta 0.01
refuse_mess account versions --p-store 0.1 --distances 1,2 --changed 1 --per-item 1 --delta 0.01
refuse_mess account versions --p-store 0.1 --distances 1,2 --changed 1,0 --versions 1 --per-item 1 --delta 0.01
refuse_mess account nothing
refuse_mess account access --p-prr 0.1 --p-irr 0.1 --repeats 3 --bogus 1

# Report and plan on the bundled SIFT set with a small client.
seed=0101010101010101010101010101010101010101010101010101010101010101
export seed # through the environment (--seed-env), never argv
if "$MESS" init --client "$tmp/c" --server "$tmp/s" --train datasets/sift/learn.bvecs \
    --shards 4 --per-item 2 --bits 64 --train-sample 1000 --seed-env seed >/dev/null 2>&1; then
    # consecutive query rows as challenge pairs
    if run account report --client "$tmp/c" --pairs datasets/sift/query.bvecs --delta 1e-5 --repeats 3 &&
        [ "$(json pairs)" = 100 ] && [ "$(grep -c '^{"pair"' "$tmp/out")" = 100 ] &&
        awk -v a="$(json max_xi_pld)" -v b="$(json max_xi_pure)" 'BEGIN { exit !(a > 0 && a <= b) }'; then
        ok "report: 100 real pairs"
    else
        bad "report"
    fi
    # the first pair's distances through `account stored` give the same value
    first=$(grep '^{"pair":0,' "$tmp/out")
    d=$(printf '%s\n' "$first" | sed -n 's/.*"d":\[\([0-9,]*\)\].*/\1/p')
    want=$(printf '%s\n' "$first" | sed -n 's/.*"xi_pld":\([^,}]*\).*/\1/p')
    if run account stored --p-store 0.08 --distances "$d" --per-item 2 --delta 1e-5 &&
        close "$(json xi_pld)" "$want" 1e-6; then
        ok "report agrees with account stored"
    else
        bad "report vs stored"
    fi
    want=$(printf '%s\n' "$first" | sed -n 's/.*"xi_pld_history":\([^,}]*\).*/\1/p')
    if run account versions --p-store 0.08 --distances "$d" --per-item 2 --delta 1e-5 &&
        close "$(json xi_pld)" "$want" 1e-6; then
        ok "report's history value agrees with account versions"
    else
        bad "report vs versions"
    fi
    # the bottom line: its numbers are the accountants'
    if run account summary --client "$tmp/c" --delta 1e-5; then
        cp "$tmp/out" "$tmp/summary"
        sj() { tail -n 1 "$tmp/summary" | sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p"; }
        okk=1
        grep -q "^What the server sees: 4 shards; each item is stored as 2 entries" "$tmp/summary" &&
            grep -q "^What it cannot conclude: " "$tmp/summary" &&
            grep -q "^What it can conclude: " "$tmp/summary" || okk=0
        run account random-lsh --p-store 0.08 --bits 128 --angle 0.05 --delta 1e-5
        close "$(sj item_xi_pld)" "$(json xi_mixture)" 1e-5 || okk=0
        run account versions --p-store 0.08 --distances 1 --per-item 1 --delta 1e-5
        close "$(sj eta_D)" "$(json eta_D)" 1e-7 && close "$(sj eta_changed)" "$(json eta_changed)" 1e-7 &&
            close "$(sj update_shown)" "$(json shown)" 1e-9 &&
            close "$(sj update_read_error)" "$(json read_error)" 1e-9 || okk=0
        # the paragraphs are wrapped at 76 columns: join them to search
        tr '\n' ' ' <"$tmp/summary" >"$tmp/summary.joined"
        grep -q "($(awk -v e="$(sj eta_D)" 'BEGIN { printf "%.2f", e }') nats per bit)" "$tmp/summary.joined" &&
            grep -q "which 2 entries were one item" "$tmp/summary.joined" &&
            [ "$(head -n -1 "$tmp/summary" | awk 'length($0) > 76 || / $/' | wc -l)" = 0 ] || okk=0
        # (1 + TV) / 2 from one entry: the mixture's xi is 0 just above TV, positive below
        tv=$(sj item_entry_tv)
        run account random-lsh --p-store 0.08 --bits 64 --angle 0.05 --delta "$(awk -v t="$tv" 'BEGIN { printf "%.12g", t * (1 + 1e-6) }')"
        close "$(json xi_mixture)" 0 0 || okk=0
        run account random-lsh --p-store 0.08 --bits 64 --angle 0.05 --delta "$(awk -v t="$tv" 'BEGIN { printf "%.12g", t * (1 - 1e-6) }')"
        awk -v x="$(json xi_mixture)" 'BEGIN { exit !(x > 0) }' || okk=0
        [ $okk = 1 ] && ok "summary: the paragraph and its numbers agree with the accountants" ||
            bad "summary numbers"
    else
        bad "summary"
    fi
    refuse_mess account summary --client "$tmp/c" --angle 0.7
    refuse_mess account summary --angle 0.05
    "$MESS" init --client "$tmp/c0" --server "$tmp/s0" --train datasets/sift/learn.bvecs --shards 2 \
        --per-item 1 --bits 64 --train-sample 500 --p-store 0 --seed-env seed >/dev/null 2>&1
    "$MESS" account summary --client "$tmp/c0" >"$tmp/out" 2>"$tmp/err"
    [ $? = 1 ] && grep -q "^mess: the client stores without noise (p_store 0, " "$tmp/err" &&
        ok "summary: a client without storage noise is refused" || bad "summary of a noiseless client"
    # consecutive query rows as (old, new) versions of one id
    if run account report --client "$tmp/c" --pairs datasets/sift/query.bvecs --delta 1e-5 --updates &&
        [ "$(json updates)" = 100 ] && [ "$(grep -c '^{"update"' "$tmp/out")" = 100 ] &&
        close "$(json read_error)" "$(awk 'BEGIN { printf "%.12g", 0.0064/0.8528 }')" 1e-9 &&
        awk -v a="$(json mean_read_share)" -v b="$(json max_read_share)" 'BEGIN { exit !(a > 0 && a <= b && b < 1) }'; then
        first=$(grep '^{"update":0,' "$tmp/out")
        c=$(printf '%s\n' "$first" | sed -n 's/.*"changed":\[\([0-9,]*\)\].*/\1/p')
        want=$(printf '%s\n' "$first" | sed -n 's/.*"xi_pld_changed":\([^,}]*\).*/\1/p')
        mean=$(printf '%s\n' "$first" | sed -n 's/.*"changed_mean":\([^,}]*\).*/\1/p')
        share=$(printf '%s\n' "$first" | sed -n 's/.*"read_share":\([^,}]*\).*/\1/p')
        if run account versions --p-store 0.08 --distances "$c" --per-item 2 --delta 1e-5 &&
            close "$(json xi_pld)" "$want" 1e-6 &&
            close "$share" "$(awk -v m="$mean" 'BEGIN { printf "%.12g", 0.8528*m/(2*64) }')" 1e-6; then
            ok "report --updates: 100 real updates, agrees with account versions"
        else
            bad "report --updates vs versions"
        fi
    else
        bad "report --updates"
    fi
    if run plan --client "$tmp/c" --data datasets/sift/base.bvecs --queries datasets/sift/query.bvecs \
        --sample 10 -k 5 --pools 4,40,400,4000,40000 --target 0.5 --threads 2 &&
        awk -v r="$(tail -n 1 "$tmp/out" | sed -n 's/.*\[40000,\([0-9.]*\)\].*/\1/p')" 'BEGIN { exit !(r > 0.99) }' &&
        [ "$(json pool)" != null ]; then
        ok "plan: recall curve and smallest pool"
    else
        bad "plan"
    fi
    # both curves; the paper's model is the pessimistic one at small pools
    cpaper=$(tail -n 1 "$tmp/out" | sed -n 's/.*"curve_paper":\[\[4,\([0-9.]*\)\].*/\1/p')
    ccond=$(tail -n 1 "$tmp/out" | sed -n 's/.*"curve_conditional":\[\[4,\([0-9.]*\)\].*/\1/p')
    if [ "$(json model)" = '"conditional"' ] && [ -n "$cpaper" ] && [ -n "$ccond" ] &&
        awk -v a="$cpaper" -v b="$ccond" 'BEGIN { exit !(a >= 0 && a <= 1 && b >= 0 && b <= 1) }'; then
        ok "plan: paper and conditional curves"
    else
        bad "plan curves"
    fi
    if run plan --client "$tmp/c" --data datasets/sift/base.bvecs --queries datasets/sift/query.bvecs \
        --sample 5 -k 5 --pools 4,40,400 --model paper &&
        [ "$(json model)" = '"paper"' ]; then
        ok "plan --model paper"
    else
        bad "plan --model paper"
    fi
    # dataset + parameters instead of a client state: the same seed and
    # parameters give the same hashes, hence the same prediction
    if run plan --train datasets/sift/learn.bvecs --shards 4 --per-item 2 --bits 64 \
        --train-sample 1000 --seed-env seed --data datasets/sift/base.bvecs \
        --queries datasets/sift/query.bvecs --sample 5 -k 5 --pools 4,40,400 --model paper; then
        tail -n 1 "$tmp/out" | sed 's/"seconds":[0-9.]*,//' >"$tmp/train.json"
        run plan --client "$tmp/c" --data datasets/sift/base.bvecs --queries datasets/sift/query.bvecs \
            --sample 5 -k 5 --pools 4,40,400 --model paper
        if tail -n 1 "$tmp/out" | sed 's/"seconds":[0-9.]*,//' | cmp -s - "$tmp/train.json"; then
            ok "plan --train equals plan --client for the same seed"
        else
            bad "plan --train vs --client"
        fi
    else
        bad "plan --train"
    fi
    refuse_mess plan --client "$tmp/c" --data datasets/sift/base.bvecs --queries datasets/sift/query.bvecs --model best
    refuse_mess plan --client "$tmp/c" --data datasets/sift/base.bvecs --queries datasets/sift/query.bvecs --shards 8
    refuse_mess plan --client "$tmp/c" --data datasets/sift/base.bvecs --queries datasets/sift/query.bvecs --pools 0,5
else
    bad "init for report/plan"
fi

finish
