#!/bin/bash
# Measurements for docs/api.md "Remote backends". First run the local figure, which writes the synthetic models and
# library to $M/bench (M defaults to /tmp/m14):
#   bin/lore bench ttft --dir /tmp/m14/bench --questions 8 --context-tokens 700 --only cold,followup
# bench ttft against Ollama v0.24.0 (bin/ollama, built by `make bin/ollama`) serving the same synthetic 0.5b GGUF.
set -eu
R=$(git -C "$(dirname "$0")" rev-parse --show-toplevel); B=$R/bin/lore; O=$R/bin/ollama; M=${M:-/tmp/m14}; CH=$M/bench/models/synth-0.5b.gguf
export OLLAMA_HOST=127.0.0.1:11534 OLLAMA_MODELS=$M/ollama/models OLLAMA_NUM_PARALLEL=1 OLLAMA_KEEP_ALIVE=30m
mkdir -p $M/ollama
HOME=$M/ollama setsid $O serve > $M/ollama/serve.log 2>&1 & echo $! > $M/ollama/pid
for i in $(seq 100); do curl -s http://$OLLAMA_HOST/ >/dev/null && break; sleep 0.2; done
echo "FROM $CH" > $M/ollama/Modelfile
HOME=$M/ollama $O create synth -f $M/ollama/Modelfile >/dev/null 2>&1
nice $B bench ttft --dir $M/bench --questions 8 --context-tokens 700 --only cold,followup \
  --chat-url http://$OLLAMA_HOST/v1 --chat-url-model synth
kill -- -$(cat $M/ollama/pid)
