#!/bin/bash
# Measurements for docs/api.md "Remote backends". First run the local figure, which writes the synthetic models and
# library to $M/bench (M defaults to /tmp/m14):
#   bin/lore bench ttft --dir /tmp/m14/bench --questions 8 --context-tokens 700 --only cold,followup
# Remote vs local rerank latency, interleaved question by question (the machine is shared: both see the same load).
# A: lore serve with the synthetic reranker (the remote); B: a client reranking through A; C: a client reranking
# locally with the same model file. rerank_ms comes from B's and C's traces. Budget 0 (no timeout cut).
set -eu
R=$(git -C "$(dirname "$0")" rev-parse --show-toplevel); B=$R/bin/lore; M=${M:-/tmp/m14}; EM=$M/bench/models/synth-embed.gguf; LIB=$M/bench/library; RR=$M/rerank.gguf
N=${N:-16}
[ -f $RR ] || $B synth-model --reranker --shape ${RSHAPE:-tiny} --seed 3 --out $RR >/dev/null
serve() { # data port flags... ; prints the full token
  local d=$1 p=$2; shift 2
  setsid $B serve --data $d --addr 127.0.0.1:$p "$@" > $d.out 2> $d.err & echo $! > $d.pid
  for i in $(seq 150); do grep -q '#token=' $d.out 2>/dev/null && break; sleep 0.2; done
  sed -n 's/.*#token=//p' $d.out | head -1
}
stop() { kill -- -$(cat $1.pid); sleep 1; }
put() { curl -s -X PUT -H "Authorization: Bearer $2" -H 'Content-Type: application/json' -d "$3" http://127.0.0.1:$1/api/settings >/dev/null; }
ask() { curl -s -N -H "Authorization: Bearer $2" -H 'Content-Type: application/json' \
  -d "$(python3 -c 'import json,sys; print(json.dumps({"question": sys.argv[1]}))' "$3")" http://127.0.0.1:$1/api/ask >/dev/null; }
stats() { curl -s -H "Authorization: Bearer $2" "http://127.0.0.1:$1/api/traces?limit=$N" | python3 -c '
import sys, json, statistics
ts = json.load(sys.stdin)
r = sorted(t["stages"].get("rerank_ms", float("nan")) for t in ts)
print("n=%d rerank_ms p50=%.1f min=%.1f max=%.1f routes=%s reasons=%s" % (len(r), statistics.median(r), r[0], r[-1],
  sorted(set(t.get("rerank_route","local") for t in ts)), sorted(set(t.get("fallback_reason","")[:70] for t in ts))))'; }
for d in rr-remote rr-client rr-local; do [ -d $M/$d ] || $B index --data $M/$d --embed-model $EM $LIB >/dev/null 2>&1; done
# One thread per runner (three Lores share two cores), rerank budget 0; both apply at the next start: restart.
S='{"rerank_budget_ms":0,"threads":1}'
TA=$(serve $M/rr-remote 18771 --embed-model $EM --rerank-model $RR); put 18771 $TA "$S"; stop $M/rr-remote
TA=$(serve $M/rr-remote 18771 --embed-model $EM --rerank-model $RR)
export LORE_API_KEY=$(cat $M/rr-remote/openai-token)
TB=$(serve $M/rr-client 18772 --embed-model $EM --rerank-url http://127.0.0.1:18771/v1 --rerank-url-model rerank)
put 18772 $TB "$S"; stop $M/rr-client
TB=$(serve $M/rr-client 18772 --embed-model $EM --rerank-url http://127.0.0.1:18771/v1 --rerank-url-model rerank)
TC=$(serve $M/rr-local 18773 --embed-model $EM --rerank-model $RR); put 18773 $TC "$S"; stop $M/rr-local
TC=$(serve $M/rr-local 18773 --embed-model $EM --rerank-model $RR)
sleep 3
head -$N $R/index/sample/queries.jsonl | python3 -c 'import sys,json; [print(json.loads(l)["query"]) for l in sys.stdin]' |
  while read -r q; do ask 18772 $TB "$q"; ask 18773 $TC "$q"; done
echo "remote rerank (client → lore serve on loopback):"; stats 18772 $TB
echo "local rerank (same library, same model file):"; stats 18773 $TC
stop $M/rr-client; stop $M/rr-local; stop $M/rr-remote
