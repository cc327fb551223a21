#!/usr/bin/env bash
# A worker for the repository tests. It notes, in notes.txt in its working
# directory (the test reads it after the run), where its checkout's origin
# points, what a package index answers it, and whether its push went
# through Eagle; it also copies what it can see of every process's
# environment and command line (procs.txt), for the test to search for
# Eagle's credential. Its prompt is on stdin; "mode:<name>" picks what it
# does, "index:<url>" is the package index.
set -u
if [ $# -ge 1 ]; then prompt="$1"; else prompt="$(cat)"; fi
run="${EAGLE_RUN_ID:-?}"
word() { printf '%s' "$prompt" | grep -o "$1:[^ ]*" | head -n 1 | cut -d: -f2-; }
out="$PWD/notes.txt"
note() { printf '%s\n' "$*" >> "$out"; }
export GIT_AUTHOR_NAME=Worker GIT_AUTHOR_EMAIL=worker@example.com
export GIT_COMMITTER_NAME=Worker GIT_COMMITTER_EMAIL=worker@example.com
branch="eagle/run-$run"
note "origin $(git config remote.origin.url)"
for p in /proc/[0-9]*; do
    tr '\0' ' ' < "$p/environ" 2>/dev/null; echo
    tr '\0' ' ' < "$p/cmdline" 2>/dev/null; echo
done > "$PWD/procs.txt"
case "$(word mode)" in
push)
    echo "$run" > "run-$run.txt"
    git add "run-$run.txt" && git commit -qm "run $run"
    if git push -q origin "HEAD:$branch" 2>>"$out.log"; then note "push ok"; else note "push refused"; fi
    ;;
setup)
    if [ -f deps/lib.txt ]; then note "dep $(cat deps/lib.txt)"; else note "dep missing"; fi
    index="$(word index)"
    if curl -fsS -o /dev/null "$index/pkg/demo.tar" 2>>"$out.log"; then note "fetch ok"; else note "fetch refused"; fi
    if curl -fsS -X POST --data x -o /dev/null "$index/upload" 2>>"$out.log"; then note "upload ok"; else note "upload refused"; fi
    ;;
esac
printf '[DONE: pr_ready] run:%s done\n' "$run"
