#!/bin/sh
# Installs what ipybox-native needs to build and test, with apt-get, and nothing more.
# Idempotent and quiet when everything is present. All output goes to stderr, because
# ./start's stdout belongs to the MCP client.
#   scripts/deps.sh build   compiler, libraries, the kernel (enough to run ipybox mcp)
#   scripts/deps.sh test    the above plus what the tests need (Check, Node.js + npm, the tools
#                           the tests run)
#   scripts/deps.sh fresh   what `make check-fresh` needs on the host (debootstrap)
#   scripts/deps.sh system  what `make check-system` needs on the host: qemu, qemu-img,
#                           debootstrap, mke2fs (what is built runs inside the VM)
#   scripts/deps.sh datascience  Debian's pandas, NumPy, SciPy and Matplotlib for the
#                           sandbox's /usr/bin/python3 (no network needed at run time)
# IPYBOX_DATASCIENCE=1 adds those packages to any of the above (`IPYBOX_DATASCIENCE=1 ./start`).
set -eu
exec 1>&2
want="build-essential pkg-config libseccomp-dev libcap-dev libjansson-dev libzmq3-dev libssl-dev
      libnftables-dev libnl-3-dev libnl-route-3-dev libcurl4-openssl-dev
      python3-ipykernel python3-matplotlib python3-pip python3-wheel"
case "${1:-build}" in
build) ;;
test)
    # What a minimal Debian 12 (debootstrap --variant=minbase: coreutils, util-linux, mount,
    # passwd, login, grep, sed, findutils...) lacks of the tools the tests run:
    # nftables, iproute2 (ip, ss) and openssl: the egress tests build test hosts and try the tools;
    # procps (pkill): the tests that add users kill what those users left; man-db (man): the
    # install test renders the man pages; python3-venv: the SDK test installs sdk/python with pip
    # into a virtual environment; ca-certificates: npm fetches the tests' packages over TLS.
    want="$want check nftables iproute2 openssl procps man-db python3-venv ca-certificates"
    # Any node >= 18 with npm will do (Debian 12's is 18); else Debian's.
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        want="$want nodejs npm"
    fi
    ;;
fresh) want="debootstrap" ;;
system) want="qemu-system-x86 qemu-utils debootstrap e2fsprogs" ;;
datascience) want="" ;;
*) echo "usage: scripts/deps.sh [build|test|fresh|system|datascience]" >&2; exit 2 ;;
esac
datascience="python3-pandas python3-numpy python3-scipy python3-matplotlib"
if [ "${1:-build}" = datascience ] || [ "${IPYBOX_DATASCIENCE:-0}" = 1 ]; then
    want="$want $datascience"
fi
missing=""
for p in $want; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$st" in *"ok installed"*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && exit 0
echo "ipybox: installing missing packages:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then sudo=""
elif command -v sudo >/dev/null 2>&1; then sudo="sudo"
else
    echo "ipybox: need root to install:$missing (run this as root, or install them yourself)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they are missing or older than a day.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
    $sudo apt-get update -qq
fi
# Package lists younger than a day can still name versions the archive no longer has: on a
# failed install, refresh them and try once more.
if ! $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null; then
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
