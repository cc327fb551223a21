#!/usr/bin/env bash
# A worker for the effects tests: it pushes with git and opens, comments on
# and merges its PR with gh, holding no token (Eagle carries each out). Its
# prompt is on stdin ($1 when run by hand); "mode:<name>" picks what it does, "out:<file>" is where it
# notes what happened, one line each.
set -u
if [ $# -ge 1 ]; then prompt="$1"; else prompt="$(cat)"; fi
run="${EAGLE_RUN_ID:-?}"
word() { printf '%s' "$prompt" | grep -o "$1:[^ ]*" | head -n 1 | cut -d: -f2-; }
out="$(word out)"
note() { printf '%s\n' "$*" >> "$out"; }
say() { printf '%s\n' "$*"; }
# The remote is a path owned by the test (root), not the worker's user.
printf '[safe]\n\tdirectory = *\n' > "${TMPDIR:-/tmp}/worker.gitconfig"
export GIT_CONFIG_GLOBAL="${TMPDIR:-/tmp}/worker.gitconfig"
export GIT_AUTHOR_NAME=Worker GIT_AUTHOR_EMAIL=worker@example.com
export GIT_COMMITTER_NAME=Worker GIT_COMMITTER_EMAIL=worker@example.com
branch="eagle/run-$run"
commit() { echo "$1" > "$1.txt" && git add "$1.txt" && git commit -qm "$1" && git rev-parse HEAD; }
try() { # try <name> <command…>: notes "<name> ok" or "<name> refused"
    local name="$1"; shift
    if "$@" >>"$out.log" 2>&1; then note "$name ok"; else note "$name refused"; fi
}
case "$(word mode)" in escaped)
    # Asks a human to push a commit whose id it writes with a JSON escape
    # (its fourth digit as \u00XX): the raw text then holds another run of
    # 40 hex digits. Resumed, it asks again with the same bytes.
    case "$prompt" in
    *"Eagle's answers to your earlier requests"*) when=resumed ;;
    *) when=fresh; note "sha $(commit escaped)" ;;
    esac
    sha="$(git rev-parse HEAD)"
    printf -v digit '\\u%04x' "'${sha:3:1}"
    eagle request --escalate push_branch \
        "{\"effect\":\"push_branch\",\"sha\":\"${sha:0:3}${digit}${sha:4}\"}" >>"$out.log" 2>&1
    rc=$?
    note "ask-$when $rc"
    if [ "$rc" -eq 0 ]; then say "[DONE: pr_ready] run:$run pushed"; else say "[STATUS: waiting] run:$run a human decides"; fi
    exit 0 ;;
esac
case "$prompt" in *"Eagle's answers to your earlier requests"*)
    note "resumed"
    say "[DONE: pr_ready] run:$run resumed and done"
    exit 0 ;;
esac

case "$(word mode)" in
push)
    note "pushurl $(git config remote.origin.pushurl)"
    note "a $(commit one)"
    try push-a git push -q origin "HEAD:$branch"
    try push-main git push -q origin HEAD:main
    try push-tag git push -q origin "HEAD:refs/tags/v1"
    try delete git push -q origin ":$branch"
    # A rewrite of Eagle's own push: allowed.
    git reset -q --hard HEAD~1
    note "c $(commit two)"
    try force-own git push -q --force origin "HEAD:$branch"
    # Someone else pushes on top of it, straight to the remote.
    url="$(git config remote.origin.url)"
    note "h $(commit three)"
    git push -q "$url" "HEAD:refs/heads/$branch" >>"$out.log" 2>&1
    # A force over their commit: refused.
    git reset -q --hard HEAD~1
    note "d $(commit four)"
    try force-other git push -q --force origin "HEAD:$branch"
    eagle request push_branch >>"$out.log" 2>&1
    note "request $?"
    say "[DONE: pr_ready] run:$run pushed"
    ;;
pr|comment|merge|mergeline)
    case "$(word mode):$prompt" in merge:*"You are the reviewer"*)
        # Eagle has seen the PR's head now: the reviewer asks to merge it.
        gh pr merge --squash --match-head-commit "$(git rev-parse HEAD)" >>"$out.log" 2>&1
        note "merge $?"
        say "[STATUS: waiting] run:$run a human decides on merge_pr"
        exit 0 ;;
    esac
    git fetch -q origin refs/prepared/fix && git checkout -q FETCH_HEAD
    try push git push -q origin "HEAD:refs/heads/$branch"
    printf 'Fixes the tab preview.\n\nIt no longer sticks after a drag.\n' > "$HOME/body.md"
    url="$(gh pr create --draft --title "Fix the tab preview" --body-file "$HOME/body.md" 2>>"$out.log")"
    note "pr $? $url"
    case "$(word mode)" in
    comment)
        gh pr comment --body "Ready for a look: the preview is fixed." >>"$out.log" 2>&1
        note "comment $?"
        ;;
    merge)
        # Before Eagle saw the PR's head: refused, nothing asked.
        gh pr merge --squash --match-head-commit "$(git rev-parse HEAD)" >>"$out.log" 2>&1
        note "early-merge $?"
        ;;
    mergeline)
        # The same merge as a protocol line: recorded, bound to no head.
        say "[REQUEST: merge_pr] run:$run {\"effect\":\"merge_pr\",\"sha\":\"$(git rev-parse HEAD)\"}"
        ;;
    esac
    try gh-other gh repo delete acme/app --yes
    case "$(word mode)" in
    merge) say "[DONE: pr_ready] run:$run PR opened" ;;
    *) say "[STATUS: waiting] run:$run waiting for Eagle" ;;
    esac
    ;;
other)
    # Names a PR that is not its own, and asks to merge it.
    say "[REQUEST: merge_pr] run:$run PR #$(word pr)"
    ;;
esac
