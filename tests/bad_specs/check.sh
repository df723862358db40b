#!/usr/bin/env bash
# Runs `BIN validate` on every bad spec in this directory and checks it against
# the file's leading comments:
#   # expect-line: N          the line the error must name
#   # expect-message: TEXT    a substring the message must contain
#   # expect-field: PATH      (optional) the field path must be reported as `PATH`
# Usage: tests/bad_specs/check.sh path/to/faultline
set -u
bin=${1:?usage: $0 path/to/faultline-binary}
dir=$(cd "$(dirname "$0")" && pwd)
pass=0 fail=0
for spec in "$dir"/[0-9]*.yaml; do
    name=$(basename "$spec")
    want_line=$(sed -n 's/^# expect-line: *//p' "$spec" | head -n1)
    want_msg=$(sed -n 's/^# expect-message: *//p' "$spec" | head -n1)
    want_field=$(sed -n 's/^# expect-field: *//p' "$spec" | head -n1)
    err=$(timeout 20 "$bin" validate "$spec" 2>&1 >/dev/null)
    rc=$?
    first=$(printf '%s\n' "$err" | head -n1)
    # error: FILE:LINE:COL: ...   (LINE/COL may be absent)
    rest=${first#"error: $spec"}
    got_line=$(printf '%s' "$rest" | sed -n 's/^:\([0-9][0-9]*\).*/\1/p')
    # What follows the location, so the file name cannot satisfy a check.
    msg=$(printf '%s' "$rest" | sed 's/^\(:[0-9]*\)\{0,2\}: //')
    problems=()
    [ -z "$want_line" ] || [ -z "$want_msg" ] && problems+=("missing expect-line/expect-message header")
    [ "$rc" -eq 3 ] || problems+=("exit $rc, want 3$(printf '%s' "$err" | grep -q panicked && echo ' (panic)')")
    [ "$got_line" = "$want_line" ] || problems+=("line ${got_line:-none}, want $want_line")
    printf '%s' "$msg" | grep -qF -- "$want_msg" || problems+=("message lacks \"$want_msg\"")
    if [ -n "$want_field" ]; then
        printf '%s' "$msg" | grep -qF -- "field \`$want_field\`" || problems+=("field is not \`$want_field\`")
    fi
    if [ ${#problems[@]} -eq 0 ]; then
        pass=$((pass + 1))
        echo "ok    $name"
    else
        fail=$((fail + 1))
        joined=$(printf '%s; ' "${problems[@]}")
        echo "FAIL  $name: ${joined%; }"
        echo "      got: ${first:-<no output>}"
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
