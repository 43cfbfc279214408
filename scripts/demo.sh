#!/bin/sh
# scripts/demo.sh - private nearest-neighbour search end to end on the
# bundled real SIFT set with the `mess` tool (make demo).
#
# One process plays both roles here, but the two states are separate:
# client.mess holds every secret (mode 0600), the directory server/ is what
# an untrusted host would store (docs/PROTOCOL.md, "Server directory").
set -eu
MESS=${MESS:-build/mess}
D=${DATA:-datasets/sift}
W=$(mktemp -d /tmp/mess_demo_XXXXXX)
trap 'rm -rf "$W"' EXIT
C="$W/client.mess"
S="$W/server"

# field KEY: a value of the JSON object on stdin's last line
field() { tail -n 1 | sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p"; }
step() { printf '\n== %s\n' "$*"; }

step "1. client: train per-shard IsoHash on public training vectors, draw the keys"
echo "\$ mess init --client client.mess --server server --train $D/learn.bvecs --threads 2"
$MESS init --client "$C" --server "$S" --train "$D/learn.bvecs" --threads 2 >"$W/out"
echo "   M=$(field shards <"$W/out") shards, t=$(field per_item <"$W/out") per item," \
     "kappa=$(field bits <"$W/out") bits, p_D=$(field p_store <"$W/out")," \
     "p_q=$(field p_query <"$W/out") (PRR $(field p_prr <"$W/out") then IRR $(field p_irr <"$W/out"))," \
     "$(field seconds <"$W/out") s"
ls -l "$C" "$S" | awk '{print "   " $1, $5, $NF}' | sed "s|$W/||"

step "2. insert the 10,000 base vectors: hash, perturb (fresh coins per shard), encrypt, upload"
echo "\$ mess insert --client client.mess --server server $D/base.bvecs --threads 2"
$MESS insert --client "$C" --server "$S" "$D/base.bvecs" --threads 2 >"$W/out"
echo "   $(field items <"$W/out") items -> $(field entries <"$W/out") shard entries," \
     "$(field upload_bytes <"$W/out") bytes uploaded, $(field seconds <"$W/out") s" \
     "($(field entries_per_s <"$W/out") entries/s)"

step "3. what the server holds (all it can see: perturbed codes, opaque labels, links, equal-length ciphertexts)"
echo "\$ mess info --server server"
$MESS info --server "$S" >"$W/out"
echo "   $(field entries <"$W/out") entries, $(field bytes <"$W/out") bytes" \
     "($(field bytes_per_entry <"$W/out") per entry, $(field payload_bytes <"$W/out")-byte ciphertexts)," \
     "smallest/largest shard $(field min_shard <"$W/out")/$(field max_shard <"$W/out")"

step "4. private queries (200 SIFT descriptors from other images), recall@10 against the exact top 10"
for B in 400 1500; do
    echo "\$ mess query --client client.mess --server server $D/query.bvecs -k 10 --pool $B --gt $D/groundtruth.ivecs"
    $MESS query --client "$C" --server "$S" "$D/query.bvecs" -k 10 --pool $B \
        --gt "$D/groundtruth.ivecs" --out "$W/result.ivecs" >"$W/out"
    echo "   pool $B: recall@10 $(field recall <"$W/out"), $(field mean_unique_candidates <"$W/out")" \
         "distinct items among $(field mean_candidates <"$W/out") candidates," \
         "$(field mean_bytes_per_query <"$W/out") bytes/query," \
         "server $(field server_ms_per_query <"$W/out") ms, client $(field client_ms_per_query <"$W/out") ms," \
         "auth failures $(field auth_failures <"$W/out")"
done

step "5. delete an item: it is never returned again"
ID=1234
dd if="$D/base.bvecs" bs=132 skip=$ID count=1 of="$W/item.bvecs" 2>/dev/null
top() { od -An -v -t d4 "$W/self.ivecs" | awk '{print $2}'; }
$MESS query --client "$C" --server "$S" "$W/item.bvecs" -k 1 --pool 400 --out "$W/self.ivecs" >/dev/null
echo "   nearest neighbour of item $ID's own vector: id $(top)"
echo "\$ mess delete --client client.mess --server server --ids $ID"
$MESS delete --client "$C" --server "$S" --ids $ID >"$W/out"
echo "   $(field entries <"$W/out") shard entries marked deleted ($(field delete_bytes <"$W/out") bytes sent)"
$MESS query --client "$C" --server "$S" "$W/item.bvecs" -k 1 --pool 400 --out "$W/self.ivecs" >/dev/null
echo "   nearest neighbour now: id $(top)"

step "6. compaction removes the deleted entries from the graphs"
echo "\$ mess compact --server server"
$MESS compact --server "$S" >"$W/out"
echo "   $(field entries <"$W/out") entries, $(field deleted <"$W/out") deleted"
$MESS query --client "$C" --server "$S" "$W/item.bvecs" -k 1 --pool 400 --out "$W/self.ivecs" >/dev/null
echo "   nearest neighbour after compaction: id $(top)"

step "7. the server directory on its own: what it holds, a full check, one file to copy it"
echo "\$ mess info --server server"
$MESS info --server "$S"
echo "\$ mess verify --server server"
$MESS verify --server "$S" | sed "s|$W/||"
echo "\$ mess export --server server server.mess && mess import server.mess copy"
$MESS export --server "$S" "$W/server.mess" >/dev/null
$MESS import "$W/server.mess" "$W/copy" >/dev/null
echo "   $(ls "$S" | wc -l) files in server/, one file of $(wc -c <"$W/server.mess") bytes exported, imported again into copy/"
