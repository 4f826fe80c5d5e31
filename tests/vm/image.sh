#!/bin/bash
# The VM tier's disk image: a stock Debian 12 (bookworm) made with debootstrap, booted
# directly (kernel and initramfs outside the image), with nothing of ipybox in it.
#
# Usage: tests/vm/image.sh          prints the image's directory (building it when missing)
#
# The image lives outside the checkout, in ${IPYBOX_VM_CACHE:-/var/cache/ipybox-vm}/image-<hash>/
# (base.img: raw ext4 without partition table, root=/dev/vda; vmlinuz; initrd.img; info),
# where <hash> is a hash of its recipe: this script, tests/vm/guest/ and scripts/deps.sh. A
# recipe that changes gets a new image; older ones are removed unless a VM still uses them.
# The build takes a lock, so two runs never build at once. Root only (debootstrap, chroot).
#
# What is in it: systemd as PID 1 (systemd-sysv, udev, dbus, bookworm's unified cgroup v2),
# libpam-systemd, sudo and procps as a stock system has them, systemd-networkd with DHCP (qemu's
# user network), the job runner (guest/), and the project's `scripts/deps.sh test` packages, so
# that runs need no download (the tier runs the same script in the VM, which then finds all of
# it present). systemd-container gives tests/vm/limits_user.sh `systemd-run -M user@ --user`.
# Env: IPYBOX_VM_CACHE, IPYBOX_VM_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cache=${IPYBOX_VM_CACHE:-/var/cache/ipybox-vm}
mirror=${IPYBOX_VM_MIRROR:-http://deb.debian.org/debian}
log() { echo "[image.sh] $*" >&2; }

recipe() { (cd "$top" && sha256sum tests/vm/image.sh tests/vm/guest/* scripts/deps.sh); }
hash=$(recipe | sha256sum | cut -c1-16)
img=$cache/image-$hash
if [ -f "$img/base.img" ]; then echo "$img"; exit 0; fi

[ "$(id -u)" -eq 0 ] || { log "building the image needs root"; exit 1; }
for t in debootstrap mke2fs flock; do
    command -v "$t" >/dev/null || { log "no $t here (scripts/deps.sh system installs it)"; exit 1; }
done
mkdir -p "$cache"
exec 8>"$cache/.build.lock"
flock -n 8 || { log "another run is building an image; waiting"; flock 8; }
if [ -f "$img/base.img" ]; then echo "$img"; exit 0; fi

root=$cache/build-$hash.rootfs
t0=$SECONDS
unmount_all() {
    for m in dev/pts dev sys proc; do
        if mountpoint -q "$root/$m" 2>/dev/null; then umount -l "$root/$m"; fi
    done
    return 0
}
trap 'unmount_all; rm -rf "$root" "$img.new"' EXIT
unmount_all
rm -rf "$root" "$img.new"
log "building $img from $mirror (a few minutes)"

debootstrap --variant=minbase \
    --include=linux-image-amd64,systemd-sysv,udev,dbus,libpam-systemd,sudo,procps,kmod,iproute2,ca-certificates \
    bookworm "$root" "$mirror" >"$cache/build-$hash.log" 2>&1 ||
    { tail -n 30 "$cache/build-$hash.log" >&2; exit 1; }

echo ipybox-vm >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 ipybox-vm\n::1 localhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$root/etc/fstab"
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
mkdir -p "$root/etc/systemd/network"
printf '[Match]\nName=en* eth*\n[Network]\nDHCP=yes\n' >"$root/etc/systemd/network/80-dhcp.network"
rm -f "$root/etc/resolv.conf"
echo 'nameserver 10.0.2.3' >"$root/etc/resolv.conf"   # qemu user networking's DNS
install -m 0755 "$here/guest/ipybox-vm-job" "$root/usr/local/sbin/ipybox-vm-job"
install -m 0644 "$here/guest/ipybox-vm-job.service" "$root/etc/systemd/system/ipybox-vm-job.service"
chroot "$root" passwd -d root >/dev/null
chroot "$root" systemctl enable systemd-networkd ipybox-vm-job.service >/dev/null 2>&1

log "packages: systemd-container and scripts/deps.sh test"
mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"   # start no service in the chroot
chmod 0755 "$root/usr/sbin/policy-rc.d"
install -m 0755 "$top/scripts/deps.sh" "$root/tmp/deps.sh"
cp /etc/resolv.conf "$root/etc/resolv.conf"
chroot "$root" /bin/sh -c 'export DEBIAN_FRONTEND=noninteractive; apt-get update -qq &&
    apt-get install -y -qq --no-install-recommends systemd-container >/dev/null && /tmp/deps.sh test' \
    >>"$cache/build-$hash.log" 2>&1 || { tail -n 30 "$cache/build-$hash.log" >&2; exit 1; }
chroot "$root" apt-get clean
echo 'nameserver 10.0.2.3' >"$root/etc/resolv.conf"
rm -f "$root/usr/sbin/policy-rc.d" "$root/tmp/deps.sh"
unmount_all

log "filesystem image"
mkdir -p "$img.new"
kver=$(ls "$root/lib/modules" | sort -V | tail -n 1)
cp "$root/boot/vmlinuz-$kver" "$img.new/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$img.new/initrd.img"
truncate -s 10G "$img.new/base.img"
mke2fs -q -t ext4 -L root -d "$root" "$img.new/base.img"
{
    echo "built $(date -u +%FT%TZ) in $((SECONDS - t0)) s from $mirror"
    echo "kernel $kver; systemd $(chroot "$root" dpkg-query -W -f='${Version}' systemd)"
    recipe
} >"$img.new/info"
mv "$img.new" "$img"
rm -rf "$root"
mv "$cache/build-$hash.log" "$img/build.log"
# Older images go, unless a VM still runs on one (boot.sh holds a shared lock on its .use).
for old in "$cache"/image-*; do
    [ "$old" = "$img" ] || [ ! -d "$old" ] && continue
    ( flock -n -x 9 && rm -rf "$old" && echo "[image.sh] removed $old" >&2 ) 9>>"$old/.use" || true
done
log "done in $((SECONDS - t0)) s: $img ($(du -sh "$img/base.img" | cut -f1) used), kernel $kver"
echo "$img"
