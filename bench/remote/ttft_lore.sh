#!/bin/bash
# Measurements for docs/api.md "Remote backends". First run the local figure, which writes the synthetic models and
# library to $M/bench (M defaults to /tmp/m14):
#   bin/lore bench ttft --dir /tmp/m14/bench --questions 8 --context-tokens 700 --only cold,followup
# bench ttft against a second lore serve on loopback (the same synthetic 0.5b model and library).
set -eu
R=$(git -C "$(dirname "$0")" rev-parse --show-toplevel); B=$R/bin/lore; M=${M:-/tmp/m14}; CH=$M/bench/models/synth-0.5b.gguf; EM=$M/bench/models/synth-embed.gguf; LIB=$M/bench/library
[ -d $M/lore-remote ] || $B index --data $M/lore-remote --embed-model $EM $LIB >/dev/null 2>&1
setsid $B serve --data $M/lore-remote --addr 127.0.0.1:18765 --model $CH --embed-model $EM > $M/lore-remote.out 2> $M/lore-remote.err & echo $! > $M/lore-remote.pid
for i in $(seq 300); do grep -q '#token=' $M/lore-remote.out 2>/dev/null && break; sleep 0.2; done
T=$(sed -n 's/.*#token=//p' $M/lore-remote.out | head -1)
curl -s -X PUT -H "Authorization: Bearer $T" -H 'Content-Type: application/json' -d '{"context_tokens":700,"max_tokens":8}' http://127.0.0.1:18765/api/settings >/dev/null
sleep 5 # its warm-up (system prefix)
LORE_API_KEY=$(cat $M/lore-remote/openai-token) nice $B bench ttft --dir $M/bench --questions 8 --context-tokens 700 --only cold,followup \
  --chat-url http://127.0.0.1:18765/v1 --chat-url-model lore
kill -- -$(cat $M/lore-remote.pid)
