#!/bin/sh
# Builds the folders the evaluation sets in this directory are labelled
# against, from text Debian installs: Python's standard library sources
# (libpython3.11-minimal/stdlib), Node.js's API docs (nodejs) and manual
# pages rendered to text (coreutils, util-linux, git-man and others).
# Usage: eval/corpora.sh DIR   (then: lore eval retrieval, see README)
set -eu
dir=${1:?usage: corpora.sh DIR}
mkdir -p "$dir/pystdlib" "$dir/nodejs" "$dir/manpages"
cp /usr/lib/python3.11/*.py "$dir/pystdlib/"
cp /usr/share/doc/nodejs/api/*.md "$dir/nodejs/"
for p in coreutils findutils grep sed tar gzip openssh-client curl procps util-linux dpkg apt git-man bzip2 xz-utils diffutils less make; do
	dpkg -L "$p" 2>/dev/null | grep -E '^/usr/share/man/man[18]/[^/]+\.gz$' || true
done | sort -u | while read -r f; do
	MANWIDTH=80 man -l "$f" 2>/dev/null | col -bx >"$dir/manpages/$(basename "$f" .gz).txt"
done
echo "$dir: $(ls "$dir/pystdlib" | wc -l) Python modules, $(ls "$dir/nodejs" | wc -l) Node.js docs, $(ls "$dir/manpages" | wc -l) manual pages"
