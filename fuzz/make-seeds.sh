#!/usr/bin/env bash
# Regenerates the checked-in seed corpora, fuzz/corpus/<target>:
# - control_request and config_file: hand-written valid inputs (every
#   command, every port-name form, a saved configuration); openflow_codec:
#   every OpenFlow message, written by crates/openflow's codec test;
# - every target: inputs found by a short run from those seeds (or from
#   nothing, for the structure-aware targets whose inputs are operation
#   sequences decoded with `arbitrary`), merged down with libFuzzer's
#   -merge=1 to the smallest set that keeps the coverage.
#
#   fuzz/make-seeds.sh [--seconds N]   (default 30 per target)
#
# Run scripts/fuzz.sh once first (it installs the tools and builds).
set -euo pipefail
cd "$(dirname "$0")"
seconds=30
[ "${1:-}" != "--seconds" ] || seconds=$2
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bindir=target/$triple/release

hand() { # hand TARGET NAME TEXT
    mkdir -p "hand/$1"
    printf '%s' "$3" >"hand/$1/$2"
}
rm -rf hand
i=0
for r in '{"cmd":"hello","version":1}' '{"cmd":"switch-add","name":"vale0"}' \
    '{"cmd":"switch-del","name":"vale0"}' '{"cmd":"switch-list"}' \
    '{"cmd":"port-add","name":"vale0:a"}' \
    '{"cmd":"port-add","name":"vale0:vm","vhost_user":{"path":"/tmp/vm.sock","client":false}}' \
    '{"cmd":"port-add","name":"vale0:pt","passthrough":"/tmp/pt.sock"}' \
    '{"cmd":"port-add","name":"vale0:a","vlan":"access:10"}' \
    '{"cmd":"attach","switch":"vale0","host":{"name":"tap0"},"vlan":"trunk:0,10,20-29"}' \
    '{"cmd":"port-del","name":"vale0:a"}' '{"cmd":"port-list","switch":"vale0"}' \
    '{"cmd":"stats"}' '{"cmd":"macs","switch":"vale0"}' '{"cmd":"open","name":"x{1"}' \
    '{"cmd":"close","handle":3}' '{"cmd":"attach","switch":"vale0","nic":{"ifname":"eth0"}}' \
    '{"cmd":"detach","name":"vale0:eth0"}' \
    'vale0:a' 'vale1:b@conf:rings=2,slots=256,buf-size=2048' 'x{1' 'x}1@conf:tx-slots=64' \
    'netmap:eth0' 'netmap:eth0^' 'vale0:eth0^' 'pipe{a@conf:rx-rings=3,tx-rings=1'; do
    hand control_request "seed$i" "$r"
    i=$((i + 1))
done
hand config_file valid '{"version":1,"requests":[{"cmd":"switch-add","name":"vale0"},{"cmd":"port-add","name":"vale0:a@conf:slots=256"},{"cmd":"attach","switch":"vale0","nic":{"ifname":"eth0","mode":"copy"}}]}'
hand config_file vlans '{"version":1,"requests":[{"cmd":"port-add","name":"vale0:a","vlan":"access:10"},{"cmd":"port-add","name":"vale0:vm","vhost_user":{"path":"/tmp/vm.sock"},"vlan":"access:20"},{"cmd":"attach","switch":"vale0","host":{"name":"tap0","queues":1},"vlan":"trunk:10,20"}]}'
hand config_file empty '{"version":1,"requests":[]}'
hand config_file future '{"version":2,"requests":[]}'
# openflow_codec: one of every OpenFlow message, and all of them as a
# stream after a HELLO, written by the codec's own test.
(cd .. && RS_OPENFLOW_SEEDS="$PWD/fuzz/hand/openflow_codec" cargo test -q -p ringswitch-openflow \
    --test codec -- --ignored --exact write_fuzz_seeds >/dev/null)

# Keeps the seeds few: the hand-written ones and the $keep largest merged
# inputs (for operation sequences, the longest scenarios).
keep=48
cap() {
    ls -S "corpus/$1" | tail -n +$((keep + 1)) | sed "s|^|corpus/$1/|" | xargs -r rm -f
    [ ! -d "hand/$1" ] || cp "hand/$1/." "corpus/$1/" -r
}

for t in $(cargo +nightly fuzz list); do
    run=$(mktemp -d)
    [ ! -d "hand/$t" ] || cp "hand/$t/." "$run/" -r
    [ ! -d "corpus/$t" ] || cp "corpus/$t/." "$run/" -r
    opts=(-max_len=4096 -timeout=60)
    case "$t" in netmap_request|daemon_requests) opts+=(-detect_leaks=0) ;; esac
    "$bindir/$t" "${opts[@]}" -max_total_time="$seconds" "$run" >/dev/null 2>&1 || true
    rm -rf "corpus/$t" && mkdir -p "corpus/$t"
    "$bindir/$t" "${opts[@]}" -merge=1 "corpus/$t" "$run" >/dev/null 2>&1
    rm -rf "$run"
    cap "$t"
    echo "$t: $(ls "corpus/$t" | wc -l) seeds, $(du -sk "corpus/$t" | cut -f1) KiB"
done
rm -rf hand
