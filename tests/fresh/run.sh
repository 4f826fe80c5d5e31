#!/bin/sh
# make check-fresh: the README's quick start on a bare Debian 12. A minimal bookworm root
# (debootstrap --variant=minbase: no compiler, no make, no pkg-config, no Node.js) gets a copy of
# this checkout (the files git tracks, and new ones it does not ignore), and in it, as root with
# PATH=/usr/sbin:/usr/bin:/sbin:/bin (no /usr/local/bin):
#   1. ./start, fed an MCP initialize and a tools/call of `1+1` on stdin, then EOF: the answer
#      must be 2, and ./start must say nothing about Check on stderr;
#   2. ./test (scripts/deps.sh test, then make check): it must pass.
# IPYBOX_FRESH_ORDER=test,start runs them the other way round (each must work alone); "start" or
# "test" runs one of them only.
#
# No VM: the root runs in its own mount and PID namespaces (pivot_root, so that the tests can make
# user namespaces, which a chroot forbids), with its own /proc, /run and /dev/shm, the host's /dev
# and /sys (cgroups as on the host), and the host's network (the tests build their own network
# namespaces and test hosts, as on the host). Needs root.
#
# Cached outside the checkout, in $IPYBOX_FRESH_CACHE (default /var/cache/ipybox-fresh):
#   bookworm-minbase-<recipe hash>.tar  the debootstrapped root, made once (about 30 s); each run
#                                       unpacks a throwaway copy (run.*, removed afterwards unless
#                                       IPYBOX_FRESH_KEEP=1; one that a killed run left is removed
#                                       by the next run)
#   apt-archives/                       the .deb files apt fetched, kept across runs
# From the network: Debian's archive (debootstrap, apt) and the npm registry (the tests' packages).
#
# The whole script is one { } group, read before it runs: editing the checkout during a run does
# not change the running script.
{
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${IPYBOX_FRESH_CACHE:-/var/cache/ipybox-fresh}
MIRROR=${IPYBOX_FRESH_MIRROR:-http://deb.debian.org/debian}
SECURITY=${IPYBOX_FRESH_SECURITY:-http://deb.debian.org/debian-security}
ORDER=${IPYBOX_FRESH_ORDER:-start,test}
SUITE=bookworm
SRC=/srv/ipybox-native   # where the checkout lies in the root (not under /root, which is 0700)

say() { echo "check-fresh: $*" >&2; }
die() { say "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, mount and PID namespaces)"
case "$ORDER" in start,test|test,start|start|test) ;; *) die "IPYBOX_FRESH_ORDER: start,test, test,start, start or test" ;; esac
"$ROOT/scripts/deps.sh" fresh
for tool in debootstrap unshare pivot_root flock git tar sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is missing"
done
mkdir -p "$CACHE/apt-archives/partial"
t0=$(date +%s)

# ---- the base root, cached by its recipe
RECIPE="debootstrap --variant=minbase --arch=amd64 $SUITE ROOT $MIRROR"
key=$(printf '%s\n' "$RECIPE" | sha256sum | cut -c1-16)
BASE="$CACHE/$SUITE-minbase-$key.tar"
if [ ! -s "$BASE" ]; then
    say "making $BASE ($RECIPE)"
    tmp=$(mktemp -d "$CACHE/debootstrap.XXXXXX")
    if ! debootstrap --variant=minbase --arch=amd64 "$SUITE" "$tmp/root" "$MIRROR" >"$tmp/log" 2>&1; then
        tail -n 30 "$tmp/log" >&2
        rm -rf "$tmp"
        die "debootstrap failed"
    fi
    tar -C "$tmp/root" --numeric-owner -cf "$tmp/base.tar" .
    mv "$tmp/base.tar" "$BASE"
    rm -rf "$tmp"
fi

# ---- copies left by runs that were killed (their trap never ran: SIGKILL, a power cut). A run
# holds a lock on its .owner file for as long as any process of it lives (the namespace's
# processes inherit it); a copy whose lock is free and under which nothing is mounted is
# removed. A kept copy (IPYBOX_FRESH_KEEP=1) has no .owner and stays.
for old in "$CACHE"/run.*; do
    [ -f "$old/.owner" ] || continue
    grep -qF " $old/" /proc/self/mountinfo && continue
    if flock -n "$old/.owner" true; then
        say "removing $old, left by a run that was killed"
        rm -rf "$old"
    fi
done

# ---- a throwaway copy, with the checkout in it
RUN=$(mktemp -d "$CACHE/run.XXXXXX")
# Locked before it has its name: another run never sees an .owner that is not locked yet.
exec 9>"$RUN/.owner.new"
flock -n 9 || die "cannot lock $RUN/.owner.new"
mv "$RUN/.owner.new" "$RUN/.owner"
R="$RUN/root"
upid=""
# shellcheck disable=SC2317  # (called by the trap)
cleanup() {
    trap - EXIT INT TERM HUP
    if [ -n "$upid" ] && [ -d "/proc/$upid" ]; then
        # the namespace's init; its death ends every process in the root
        # shellcheck disable=SC2013  # (numbers)
        for c in $(cat "/proc/$upid/task/$upid/children" 2>/dev/null); do kill -KILL "$c" 2>/dev/null || true; done
        wait "$upid" 2>/dev/null || true
    fi
    if [ "${IPYBOX_FRESH_KEEP:-0}" = 1 ]; then
        rm -f "$RUN/.owner"
        say "kept $RUN"
    elif grep -qF " $RUN/" /proc/self/mountinfo; then
        say "something is still mounted under $RUN: not removing it"
    else
        rm -rf "$RUN"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
mkdir "$R"
tar -C "$R" --numeric-owner -xpf "$BASE"
# What an installed Debian 12 has and debootstrap leaves out: the updates and security suites,
# /etc/hosts (localhost), the host's resolver. And what an administrator gives every machine of a
# network that intercepts TLS: the host's local CA certificates (/usr/local/share/ca-certificates,
# taken in when ca-certificates is installed), without which npm cannot reach its registry there.
cat >"$R/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY $SUITE-security main
EOF
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n' \
    "$(hostname)" >"$R/etc/hosts"
cp -L /etc/resolv.conf "$R/etc/resolv.conf"
if [ -d /usr/local/share/ca-certificates ]; then
    mkdir -p "$R/usr/local/share/ca-certificates"
    cp -RL /usr/local/share/ca-certificates/. "$R/usr/local/share/ca-certificates/"
fi
mkdir -p "$R$SRC" "$R/.oldroot"
(cd "$ROOT" && git ls-files -co --exclude-standard -z | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) |
    tar -C "$R$SRC" -xf -
if [ ! -x "$R$SRC/start" ] || [ ! -x "$R$SRC/test" ]; then die "the copy of the checkout has no ./start or ./test"; fi

# ---- what runs in the root (as its PID 1)
cat >"$R/check-fresh.sh" <<'EOF'
#!/bin/sh
# Runs in the fresh root, as PID 1 of its PID namespace (a shell reaps orphans while it waits).
umount -l /.oldroot && rmdir /.oldroot
cd "$1"
order=$2
now() { date +%s; }
start_step() {
    echo "check-fresh: ./start (MCP initialize, then tools/call 1+1, then EOF)" >&2
    t=$(now)
    printf '%s\n' \
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"check-fresh","version":"1"}}}' \
        '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_ipython_cell","arguments":{"code":"1+1"}}}' \
        | ./start >/tmp/start.out 2>/tmp/start.err &
    wait $!
    rc=$?
    echo "check-fresh: ./start exited $rc after $(( $(now) - t )) s" >&2
    sed 's/^/  start stderr: /' /tmp/start.err >&2
    sed 's/^/  start stdout: /' /tmp/start.out >&2
    if [ $rc -ne 0 ]; then
        echo "check-fresh: FAIL: ./start exited $rc" >&2; return 1
    fi
    if grep -qiw 'check' /tmp/start.err; then
        echo "check-fresh: FAIL: ./start said something about Check on stderr" >&2; return 1
    fi
    python3 - /tmp/start.out <<'PY' &
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
byid = {m.get("id"): m for m in lines}
init, call = byid.get(1, {}), byid.get(2, {})
ok = "result" in init and "result" in call and not call["result"].get("isError") \
    and [c.get("text", "").strip() for c in call["result"].get("content", [])] == ["2"]
print("check-fresh: ./start answered 1+1 with %s" % (json.dumps(call.get("result") or call)[:300]), file=sys.stderr)
sys.exit(0 if ok else 1)
PY
    if ! wait $!; then
        echo "check-fresh: FAIL: ./start did not answer initialize and 1+1 = 2" >&2; return 1
    fi
    echo "check-fresh: ./start ok" >&2
}
test_step() {
    echo "check-fresh: ./test" >&2
    t=$(now)
    ./test </dev/null &
    wait $!
    rc=$?
    echo "check-fresh: ./test exited $rc after $(( $(now) - t )) s" >&2
    [ $rc -eq 0 ] || { echo "check-fresh: FAIL: ./test exited $rc" >&2; return 1; }
}
status=0
for step in $(echo "$order" | tr , ' '); do
    "${step}_step" || status=1
done
exit $status
EOF
chmod 0755 "$R/check-fresh.sh"

say "running in $R: $ORDER"
# shellcheck disable=SC2174  # (/run exists: only ipybox-slots is made)
mkdir -p -m 0700 /run/ipybox-slots
# The namespace's first process (the host's sh) mounts, pivots into the root and becomes its shell.
# shellcheck disable=SC2016
unshare --mount --pid --fork --propagation private /bin/sh -c '
    set -e
    R=$1 CACHE=$2 SRC=$3 ORDER=$4
    mount --bind "$R" "$R"
    mount -t proc -o nosuid,nodev,noexec proc "$R/proc"
    mount --rbind /sys "$R/sys"
    mount --rbind /dev "$R/dev"
    mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$R/dev/shm"
    mount -t tmpfs -o nosuid,nodev,mode=0755 tmpfs "$R/run"
    mkdir -m 1777 "$R/run/lock"
    # The uid pool and the cgroups of sandboxes (this /sys is the host one), so the slots, are shared with
    # the host: so are the slot locks, or a monitor in here would take (and reclaim) slots that
    # sandboxes of the host are using, and the reverse.
    mkdir -m 0700 "$R/run/ipybox-slots"
    mount --bind /run/ipybox-slots "$R/run/ipybox-slots"
    mount --bind "$CACHE/apt-archives" "$R/var/cache/apt/archives"
    cd "$R"
    pivot_root . .oldroot
    exec /usr/sbin/chroot . /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root USER=root \
        LOGNAME=root SHELL=/bin/sh /bin/sh /check-fresh.sh "$SRC" "$ORDER"
' sh "$R" "$CACHE" "$SRC" "$ORDER" &
upid=$!
rc=0
wait "$upid" || rc=$?
upid=""
t=$(( $(date +%s) - t0 ))
if [ $rc -eq 0 ]; then
    say "passed: $ORDER in a fresh Debian 12 ($(( t / 60 )) min $(( t % 60 )) s)"
else
    say "FAILED (exit $rc) after $(( t / 60 )) min $(( t % 60 )) s"
fi
exit $rc
}
