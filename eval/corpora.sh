#!/bin/sh
# Builds the folders the evaluation sets in this directory are labelled
# against, from text Debian installs: Python's standard library sources
# (libpython3.11-minimal/stdlib), Node.js's API docs (nodejs) and manual
# pages rendered to text (coreutils, util-linux, git-man and others), and
# system administration manual pages (systemd, iproute2, openssl, passwd,
# e2fsprogs, psmisc and others; none of the held-out set's pages, and no
# page that is only a symbolic link to another).
# The sysman pages need the Debian packages named below installed; openssl
# and psmisc are not in every base system:
#   apt-get install openssl psmisc iproute2 e2fsprogs net-tools
# Usage: eval/corpora.sh DIR   (then: lore eval retrieval, see README)
set -eu
dir=${1:?usage: corpora.sh DIR}
mkdir -p "$dir/pystdlib" "$dir/nodejs" "$dir/manpages" "$dir/sysman"
cp /usr/lib/python3.11/*.py "$dir/pystdlib/"
cp /usr/share/doc/nodejs/api/*.md "$dir/nodejs/"
for p in coreutils findutils grep sed tar gzip openssh-client curl procps util-linux dpkg apt git-man bzip2 xz-utils diffutils less make; do
	dpkg -L "$p" 2>/dev/null | grep -E '^/usr/share/man/man[18]/[^/]+\.gz$' || true
done | sort -u | while read -r f; do
	MANWIDTH=80 man -l "$f" 2>/dev/null | col -bx >"$dir/manpages/$(basename "$f" .gz).txt"
done
for p in systemd iproute2 openssl passwd login e2fsprogs psmisc adduser net-tools mount sysvinit-utils; do
	dpkg -L "$p" 2>/dev/null | grep -E '^/usr/share/man/man[158]/[^/]+\.gz$' || true
done | sort -u | while read -r f; do
	n=$(basename "$f" .gz)
	if [ -L "$f" ] || [ -e "$dir/manpages/$n.txt" ]; then continue; fi
	MANWIDTH=80 man -l "$f" 2>/dev/null | col -bx >"$dir/sysman/$n.txt"
done
echo "$dir: $(ls "$dir/pystdlib" | wc -l) Python modules, $(ls "$dir/nodejs" | wc -l) Node.js docs, $(ls "$dir/manpages" | wc -l) manual pages, $(ls "$dir/sysman" | wc -l) system administration pages"
