#!/usr/bin/env bash
# Posts every fixture to a running hook server with curl and compares the
# answer with its golden response.json. Start the server with `make run`
# first (it uses the configuration the fixtures were made with).
#
#   test/curl-fixtures.sh [http://127.0.0.1:8080]
set -euo pipefail
base=${1:-http://127.0.0.1:8080}
cd "$(dirname "$0")/.."
pass=0 fail=0
for req in fixtures/*/*/*/request.json; do
  dir=$(dirname "$req")
  path=/v1/${dir#fixtures/}
  path=${path%/*}
  got=$(curl -sS -H 'Content-Type: application/json' --data-binary @"$req" "$base$path" | python3 -m json.tool --indent 2)
  want=$(python3 -m json.tool --indent 2 < "$dir/response.json")
  if [ "$got" == "$want" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "MISMATCH $dir (POST $path)"
    diff <(echo "$want") <(echo "$got") | head -20 || true
  fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
