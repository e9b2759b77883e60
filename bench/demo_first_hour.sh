#!/bin/bash
# The first hour of a new user (issue 20): seconds from `make demo` in a fresh clone to the login page answering,
# and to the demo's warm model being ready. Run from a repository root with ../shared beside it:
#   d=$(mktemp -d) && git clone . "$d/main" && ln -s "$PWD/../shared" "$d/shared" && (cd "$d/main" && bench/demo_first_hour.sh)
# Prints "login N" and "warm N" (seconds); leaves the demo running (stop it with SIGTERM to manage.py demo).
set -u
ADDR="${DEMO_ADDR:-127.0.0.1:8123}"
export SEARCHLAB_MODEL_CACHE="${SEARCHLAB_MODEL_CACHE:-$(mktemp -d)}"  # empty: nothing reused
start=$(date +%s.%N)
setsid make demo DEMO_ADDR="$ADDR" > demo-first-hour.log 2>&1 &
until curl -sf -o /dev/null "http://$ADDR/accounts/login/"; do sleep 1; done
echo "login $(echo "$(date +%s.%N) - $start" | bc)"
warm=var/models/SmolLM2-135M-Instruct-warm
until [ -f "$warm/warm_start.json" ] && [ -f "$warm/config.json" ]; do sleep 5; done
echo "warm $(echo "$(date +%s.%N) - $start" | bc)"
