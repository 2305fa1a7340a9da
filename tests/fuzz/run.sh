#!/usr/bin/env bash
# Seeds a corpus for each fuzz target from tests/fixtures (copied at run time into the
# cargo target directory, never committed) and runs cargo-fuzz on it.
#
#   tests/fuzz/run.sh                 every target, 60 s each
#   tests/fuzz/run.sh json 600        one target, 10 minutes
#   tests/fuzz/run.sh seed            start the corpora over from the fixtures only
#
# Needs `cargo install cargo-fuzz`. cargo-fuzz wants nightly; on the stable toolchain
# RUSTC_BOOTSTRAP=1 unlocks the flags it passes. No sanitizer: the crate has no unsafe code,
# and debug assertions stay on so integer overflow is a crash too.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
fixtures="${RMQ_FIXTURES:-$repo/tests/fixtures}"
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
corpus_root="$target_dir/fuzz-corpus"
targets=(frame header_json header_binary json register_body models properties)

unhex() { perl -ne 'print pack "H*", join "", /[0-9a-fA-F]{2}/g' "$1"; }

seed() {
    for t in "${targets[@]}"; do mkdir -p "$corpus_root/$t"; done
    local c="$corpus_root"
    for hex in "$fixtures"/*.hex; do
        local name
        name="$(basename "$hex" .hex)"
        unhex "$hex" >"$c/frame/$name"
        # Without the length prefix and type word: the bare header, for its own decoder.
        local word htype hlen
        word="$(unhex "$hex" | od -An -tx1 -j4 -N4 | tr -d ' \n')"
        htype=$((16#${word:0:2}))
        hlen=$((16#${word:2:6}))
        if [ "$htype" = 0 ]; then
            unhex "$hex" | tail -c +9 | head -c "$hlen" >"$c/header_json/$name"
            unhex "$hex" | tail -c +9 | head -c "$hlen" >"$c/json/$name"
        else
            unhex "$hex" | tail -c +9 | head -c "$hlen" >"$c/header_binary/$name"
        fi
    done
    # Every fixture frame back to back, as one connection would send them.
    for hex in "$fixtures"/*.hex; do unhex "$hex"; done >"$c/frame/all-concatenated"
    for f in "$fixtures"/*.json "$fixtures"/third_party/*.json; do
        install -m644 "$f" "$c/json/$(basename "$f")"
        install -m644 "$f" "$c/models/$(basename "$f")"
    done
    for f in "$fixtures"/third_party/register_broker_103_extfields_v4.json; do
        install -m644 "$f" "$c/header_json/extfields"
    done
    # register_body: first byte is the mode (see oracles::check_register_body).
    local body="$fixtures/third_party/register_broker_103_body_v4.json"
    for mode in 0 2 3 5 7 16 23; do
        { printf "\\$(printf '%03o' "$mode")"; cat "$body"; } >"$c/register_body/body-mode-$mode"
    done
    # The inflated binary layout (PROTOCOL §4.2), deflated by the target (mode 16|7).
    perl -e '
        my $dv = q({"counter":3,"stateVersion":0,"timestamp":1700000000000});
        my @t = ("TopicA 8 8 6 SINGLE_TAG", "TopicB 4 4 7 MULTI_TAG {\"+a\":\"b\"}");
        my $m = q({"bname":"broker-a","currIdMap":{0:0},"epoch":1,"scope":"s","topic":"TopicA","totalQueues":8});
        print chr(16|7), pack("N/a*", $dv), pack("N", scalar @t), (map { pack("N/a*", $_) } @t),
              pack("N/a*", "[\"10.0.0.1:7000\"]"), pack("N", 1), pack("N/a*", $m);
    ' >"$c/register_body/inflated-layout"
    install -m644 "$c/json/kvconfig_file_java.json" "$c/models/kv"
    for f in "$repo/namesrv.conf" "$repo/deploy/namesrv.conf"; do
        [ -f "$f" ] && install -m644 "$f" "$c/properties/$(basename "$(dirname "$f")")-$(basename "$f")"
    done
    printf 'a\\\n  b=c\\u0041\\\\\n#x\n!y\nk:v\nk v\n\\u12' >"$c/properties/escapes"
    for t in "${targets[@]}"; do
        echo "seeded $t: $(ls "$c/$t" | wc -l) inputs"
    done
}

# Fixture seeds are (re)written on every run; what the fuzzer added is kept. `seed` starts over.
[ "${1:-}" = seed ] && rm -rf "$corpus_root"
seed
[ "${1:-}" = seed ] && exit 0

# Longest input per target: long enough for every seed's structure, short enough that the
# slower targets still reach millions of executions in minutes.
max_len() {
    case "$1" in
        properties) echo 2048 ;;
        frame | header_json | header_binary) echo 16384 ;;
        *) echo 8192 ;;
    esac
}

run_one() {
    local t="$1" secs="$2"
    echo "== fuzz $t for ${secs}s"
    RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir "$repo/tests/fuzz" --sanitizer none \
        --debug-assertions "$t" "$corpus_root/$t" -- \
        -max_total_time="$secs" -max_len="$(max_len "$t")" -rss_limit_mb=2048 -print_final_stats=1
}

secs="${2:-60}"
if [ -n "${1:-}" ]; then
    run_one "$1" "$secs"
else
    for t in "${targets[@]}"; do run_one "$t" "$secs"; done
fi
