#!/usr/bin/env bash
# Real HTTP clients against fibra's http_hello and https_hello examples:
# ab -k, ab (HTTP/1.0, a connection per request), curl -I, curl with a POST
# body, h2load --h1 and wrk. Prints, for each tool, what it completed and
# its error counts; exits non-zero if any client saw an error or a non-2xx.
#
#   bash benches/clients.sh            # release build of both examples first
#   N=100000 C=100 bash benches/clients.sh
#
# Needs: apt-get install apache2-utils curl nghttp2-client wrk
set -uo pipefail
cd "$(dirname "$0")/.."

N=${N:-20000}   # requests per ab / h2load run
C=${C:-50}      # concurrent connections
D=${D:-3s}      # wrk duration

cargo build --release --quiet --example http_hello --example https_hello || exit 1

failed=0
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done' EXIT

# Starts an example on a free port; sets $url.
start() {
    local example=$1 scheme=$2 log
    log=$(mktemp)
    target/release/examples/"$example" 127.0.0.1:0 2>"$log" &
    pids+=($!)
    for _ in $(seq 100); do
        url=$(grep -o "$scheme://[0-9.:]*/" "$log" | head -1)
        [ -n "$url" ] && break
        sleep 0.05
    done
    [ -n "$url" ] || { echo "$example did not start"; cat "$log"; exit 1; }
}

have() { command -v "$1" >/dev/null || { echo "  $1: not installed, skipped"; return 1; }; }

# verdict NAME OK? SUMMARY
verdict() {
    if [ "$2" = ok ]; then echo "  $1: ok    $3"; else echo "  $1: FAIL  $3"; failed=1; fi
}

run_ab() { # name, requests, extra args...
    local name=$1 n=$2 out complete errors non2xx
    shift 2
    out=$(timeout 300 ab -q "$@" -n "$n" -c "$C" "$url" 2>&1)
    complete=$(awk '/^Complete requests:/ {print $3}' <<<"$out")
    errors=$(awk '/^Failed requests:/ {print $3}' <<<"$out")
    non2xx=$(awk '/^Non-2xx responses:/ {print $3}' <<<"$out")
    local rps
    rps=$(awk '/^Requests per second:/ {print $4}' <<<"$out")
    [ "$complete" = "$n" ] && [ "$errors" = 0 ] && [ -z "$non2xx" ] && v=ok || v=bad
    verdict "$name" $v "complete $complete/$n, failed ${errors:-?}, non-2xx ${non2xx:-0}, ${rps:-?} req/s"
    [ $v = ok ] || echo "$out" | tail -20
}

run_curl() { # name, args...
    local name=$1 out code
    shift
    out=$(timeout 60 curl -sS -k --max-time 30 -o /dev/null -w '%{http_code}' "$@" "$url" 2>&1)
    code=$?
    [ $code = 0 ] && [ "$out" = 200 ] && v=ok || v=bad
    verdict "$name" $v "exit $code, status $out"
}

run_h2load() {
    local out line codes
    out=$(timeout 300 h2load --h1 -n "$N" -c "$C" -m 10 "$url" 2>&1)
    line=$(grep '^requests:' <<<"$out")
    codes=$(grep '^status codes:' <<<"$out")
    grep -q " $N succeeded, 0 failed, 0 errored, 0 timeout" <<<"$line" &&
        grep -q "codes: $N 2xx" <<<"$codes" && v=ok || v=bad
    verdict "h2load --h1" $v "${line#requests: }; ${codes#status codes: }"
    [ $v = ok ] || echo "$out" | tail -20
}

run_wrk() {
    local out reqs errs non2xx
    out=$(timeout 120 wrk -t1 -c"$C" -d"$D" "$url" 2>&1)
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    errs=$(grep 'Socket errors' <<<"$out")
    non2xx=$(grep 'Non-2xx' <<<"$out")
    [ -n "$reqs" ] && [ "$reqs" -gt 0 ] && [ -z "$errs" ] && [ -z "$non2xx" ] && v=ok || v=bad
    verdict "wrk" $v "$reqs requests, ${errs:-socket errors 0}, ${non2xx:-non-2xx 0}, $(awk '/Requests\/sec/ {print $2}' <<<"$out") req/s"
}

body=$(mktemp)
head -c 300000 /dev/zero | tr '\0' x >"$body"

for server in "http_hello http" "https_hello https"; do
    set -- $server
    start "$1" "$2"
    echo "$1 at $url"
    # A TLS handshake per request: ab's own TLS client makes ~400 a second
    # here (as against openssl s_server too), so it gets fewer.
    n_close=$N
    [ "$2" = https ] && n_close=$((N / 10))
    ! have ab || run_ab "ab -k" "$N" -k
    ! have ab || run_ab "ab (HTTP/1.0, no keep-alive)" "$n_close"
    if have curl; then
        run_curl "curl -I" -I
        run_curl "curl POST (300 kB, Expect: 100-continue)" -H 'Expect: 100-continue' --data-binary @"$body"
    fi
    ! have h2load || run_h2load
    ! have wrk || run_wrk
done
rm -f "$body"
[ $failed = 0 ] && echo "all clients: no errors" || echo "SOME CLIENTS FAILED"
exit $failed
