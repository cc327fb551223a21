#!/usr/bin/env bash
# A fake analysis command for the tests: its prompt is on stdin, and the task's
# title in it picks the behaviour. "mode:hang" writes its pid to the file
# named by "pidfile:<path>" and hangs, silent; "mode:busy" talks for ever;
# "mode:garbled" answers something that is not the JSON object;
# "mode:broken" fails; "mode:model" asks $MODEL_URL for its summary;
# "mode:repo want:<name>" names that repository, its summary the prompt's
# "Repositories:" line; anything else is ready to start.
# The prompt is on stdin (a Claude Code command's argument is not the prompt).
prompt="$*"
if [ ! -t 0 ]; then prompt="$prompt
$(cat)"; fi
case "$prompt" in
*mode:hang*)
    pidfile="$(printf '%s' "$prompt" | grep -o 'pidfile:[^ ]*' | head -n 1 | cut -d: -f2-)"
    echo "$$" >"$pidfile"
    sleep 3600
    ;;
*mode:busy*)
    # Never silent, never done: only the hard limit stops it.
    while :; do echo "still thinking"; sleep 0.2; done
    ;;
*mode:model*)
    # Asks its "model" ($MODEL_URL, through the proxy when confined), and
    # tries a host it was not allowed.
    answer="$(curl -s -f -m 10 "$MODEL_URL/answer")" || { echo "the model is unreachable" >&2; exit 1; }
    other="$(curl -s -m 5 -o /dev/null -w '%{http_code}' http://other.example.org/ 2>&1)"
    echo "{\"status\": \"awaiting_go\", \"summary\": \"$answer; other host: $other\", \"complexity\": \"low\", \"feasibility\": \"high\", \"priority\": 3}"
    ;;
*mode:claudekey*)
    # As a Claude Code analysis would call its model API (through the
    # proxy), and an upload path it must not reach; says which key it held.
    held="$ANTHROPIC_API_KEY"
    said="$(curl -s -m 10 -X POST -H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' --data '{}' "$ANTHROPIC_BASE_URL/v1/messages")"
    files="$(curl -s -m 10 -o /dev/null -w '%{http_code}' -X POST -H "x-api-key: $ANTHROPIC_API_KEY" --data x "$ANTHROPIC_BASE_URL/v1/files")"
    echo "{\"status\": \"awaiting_go\", \"summary\": \"held $held; the model said $said; files $files\"}"
    ;;
*mode:repo*)
    want="$(printf '%s' "$prompt" | grep -o 'want:[^ ]*' | head -n 1 | cut -d: -f2-)"
    listed="$(printf '%s\n' "$prompt" | grep '^Repositories:' | head -n 1)"
    echo "{\"status\": \"for_review\", \"summary\": \"$listed\", \"repo\": \"$want\"}"
    ;;
*mode:garbled*)
    echo "I think this one is fine, probably."
    ;;
*mode:broken*)
    echo "the model is unreachable" >&2
    exit 1
    ;;
*)
    echo '{"status": "awaiting_go", "summary": "a one-line fix in TabBar", "complexity": "low", "feasibility": "high", "priority": 2}'
    ;;
esac
