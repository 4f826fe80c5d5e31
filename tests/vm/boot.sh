#!/bin/bash
# Boots the VM tier's Debian 12 image (tests/vm/image.sh; built first when missing) on a
# throwaway copy-on-write overlay, sends this checkout in (git's tracked and untracked files
# that are not ignored, as they are on disk), runs CMD as root with bash in /root/checkout,
# streams its output, and exits with its status.
#
# Usage: tests/vm/boot.sh [-t SECONDS] CMD
#   -t SECONDS   time limit for CMD (default 1800); the VM is killed 120 s after it
# Exit status: CMD's; 124 when it ran out of time; 125 when the VM did not run it.
# Env: IPYBOX_VM_CACHE (image and runs/, default /var/cache/ipybox-vm), IPYBOX_VM_ACCEL
#   (kvm, tcg or auto: KVM when /dev/kvm is writable and the CPU shows vmx or svm, else TCG;
#   a PVM /dev/kvm, without vmx/svm, boots only PVM guest kernels), IPYBOX_VM_MEM (MiB,
#   default 4096), IPYBOX_VM_SMP (default: the host's CPUs, at most 4).
# Each run keeps console.log (kernel and systemd), job.out and out/ (files the job left in
# $IPYBOX_VM_OUT) in the cache's runs/<id>/; the last 20 runs are kept. One VM at a time
# per cache: a second run waits for the first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cache=${IPYBOX_VM_CACHE:-/var/cache/ipybox-vm}
limit=1800
if [ "${1:-}" = -t ]; then limit=$2; shift 2; fi
[ $# -eq 1 ] || { sed -n '7,8p' "$0" >&2; exit 2; }
log() { echo "[boot.sh] $*" >&2; }
command -v qemu-system-x86_64 >/dev/null && command -v qemu-img >/dev/null ||
    { log "no qemu here (scripts/deps.sh system installs it)"; exit 125; }

img=$("$here/image.sh") || { log "no image"; exit 125; }

accel=${IPYBOX_VM_ACCEL:-auto}
if [ "$accel" = auto ]; then
    if [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then accel=kvm; else accel=tcg; fi
fi
case $accel in
    # -arch-capabilities: some hosts refuse the MSR that plain `host` passes on.
    kvm) accelargs=(-accel kvm -cpu host,-arch-capabilities) ;;
    tcg) accelargs=(-accel tcg,thread=multi -cpu max)
         log "TCG (software emulation): $( [ -e /dev/kvm ] && echo "/dev/kvm is there but the CPU shows no vmx/svm (PVM?)" || echo "no /dev/kvm" )" ;;
    *) log "IPYBOX_VM_ACCEL must be kvm, tcg or auto"; exit 2 ;;
esac
smp=${IPYBOX_VM_SMP:-$(nproc)}
[ "$smp" -le 4 ] || smp=4

mkdir -p "$cache/runs"
exec 8>"$cache/.vm.lock"
flock -n 8 || { log "another VM of this cache runs; waiting for it"; flock 8; }
exec 9>>"$img/.use"
flock -s 9   # image.sh removes no image a VM runs on

run=$cache/runs/$(date +%Y%m%d-%H%M%S)-$$
mkdir -p "$run/share"
# The last 20 runs are kept.
ls -1d "$cache"/runs/*/ 2>/dev/null | head -n -20 | xargs -r rm -rf
qpid="" tpid=""
finish() {
    [ -n "$tpid" ] && kill "$tpid" 2>/dev/null
    if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then kill -9 "$qpid" 2>/dev/null; fi
    rm -f "$run/overlay.qcow2" "$run/share/checkout.tar"
    [ -d "$run/share/out" ] && mv "$run/share/out" "$run/out"
    return 0
}
trap finish EXIT
trap 'exit 130' INT TERM HUP

printf '%s\n' "$1" >"$run/share/cmd"
echo "$limit" >"$run/share/timeout"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$top" ls-files -z --cached --others --exclude-standard |
        tar -C "$top" --null -T - --ignore-failed-read -cf "$run/share/checkout.tar" 2>/dev/null
else
    tar -C "$top" --exclude='./build*' -cf "$run/share/checkout.tar" .
fi
qemu-img create -q -f qcow2 -F raw -b "$img/base.img" "$run/overlay.qcow2"
: >"$run/job.out"

t0=$SECONDS
qemu-system-x86_64 -name ipybox-vm -machine q35 "${accelargs[@]}" -smp "$smp" -m "${IPYBOX_VM_MEM:-4096}" \
    -nodefaults -display none -vga none -no-reboot \
    -kernel "$img/vmlinuz" -initrd "$img/initrd.img" -append "root=/dev/vda rw console=ttyS0,115200 panic=-1" \
    -drive file="$run/overlay.qcow2",if=virtio,format=qcow2,cache=unsafe \
    -virtfs local,path="$run/share",mount_tag=job,security_model=none,id=job \
    -device virtio-rng-pci -netdev user,id=n0 -device virtio-net-pci,netdev=n0 \
    -device virtio-serial-pci -chardev file,id=out,path="$run/job.out" \
    -device virtserialport,chardev=out,name=ipybox.out \
    -serial file:"$run/console.log" </dev/null >"$run/qemu.log" 2>&1 &
qpid=$!
log "qemu $qpid ($accel, $smp CPUs); logs in $run"
tail -n +1 -f --pid="$qpid" "$run/job.out" &
tpid=$!

# Until qemu ends: killed 120 s after the time limit, or 60 s after the job's status arrived
# (a poweroff that hangs holds no one).
done_at=""
while kill -0 "$qpid" 2>/dev/null; do
    if [ -z "$done_at" ] && [ -f "$run/share/rc" ]; then done_at=$SECONDS; fi
    if [ -n "$done_at" ] && [ $((SECONDS - done_at)) -gt 60 ]; then
        log "the VM did not power off within 60 s of the job's end; killing it"; kill "$qpid"; break
    fi
    if [ $((SECONDS - t0)) -gt $((limit + 120)) ]; then
        log "time limit ($limit s + 120 s) reached; killing the VM"; kill "$qpid"; break
    fi
    sleep 0.5
done
wait "$qpid" 2>/dev/null || true
wait "$tpid" 2>/dev/null || true   # tail ends by itself once qemu has, with all it read
tpid=""
if [ -f "$run/share/rc" ]; then
    rc=$(cat "$run/share/rc")
else
    rc=125
    log "the job reported no status; the console's last lines:"
    tail -n 30 "$run/console.log" >&2 || true
    cat "$run/qemu.log" >&2 || true
fi
log "exit status $rc; the VM ran $((SECONDS - t0)) s"
[ "$rc" -eq 0 ] || log "logs: $run (console.log, job.out, out/)"
exit "$rc"
