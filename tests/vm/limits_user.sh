#!/bin/bash
# Limits in user mode on a systemd host (Debian 12: systemd 252, unified cgroup v2), as an
# unprivileged user with a user manager: `ipybox mcp --memory 256M --max-processes 40` must put
# its sandbox in a transient scope of that manager with memory.max, memory.swap.max and
# pids.max set, report an out-of-memory kill and the process limit in the cell's result with a
# fresh kernel after, and leave no scope behind, also after a SIGKILL of the supervisor.
# Runs as root inside the VM (the last suite of tests/vm/system.sh, `make check-system`; alone:
# tests/vm/boot.sh tests/vm/limits_user.sh); builds the checkout, makes the user `ipbvm` with
# lingering (so user@UID.service runs) and drives ipybox as that user with
# tests/vm/limits_user.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "== $(systemctl --version | head -1); $(stat -fc %T /sys/fs/cgroup) at /sys/fs/cgroup"
# A stock Debian 12 has pam_systemd (without it user@.service cannot start: no XDG_RUNTIME_DIR);
# the minimal VM image may not. systemd-container gives `systemd-run -M user@ --user`.
need=""
[ -e /lib/security/pam_systemd.so ] || [ -e /usr/lib/x86_64-linux-gnu/security/pam_systemd.so ] || need="libpam-systemd"
command -v machinectl >/dev/null || need="$need systemd-container"
if [ -n "$need" ]; then
    echo "== installing ${need# } (a stock Debian 12 has libpam-systemd)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/tmp/apt.log 2>&1 ||
        { tail -20 /tmp/apt.log; exit 1; }
fi
echo "== build"
make -j"$(nproc)" >/tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
dest=/opt/ipybox-vm
rm -rf "$dest" && mkdir -p "$dest"
cp -a build/bin build/libexec "$dest"/
mkdir -p "$dest/tests" && cp -a tests/lib tests/vm "$dest/tests/"
chmod -R a+rX "$dest"
user=ipbvm
id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
uid=$(id -u "$user")
loginctl enable-linger "$user"
for _ in $(seq 100); do
    systemctl is-active --quiet "user@$uid.service" && [ -S "/run/user/$uid/systemd/private" ] && break
    sleep 0.2
done
echo "== user@$uid.service: $(systemctl is-active "user@$uid.service"); controllers it has / enables below it:" \
     "$(cat "/sys/fs/cgroup/user.slice/user-$uid.slice/user@$uid.service/cgroup.controllers") / $(cat "/sys/fs/cgroup/user.slice/user-$uid.slice/user@$uid.service/cgroup.subtree_control")"
# As the user, as a desktop agent would start ipybox: in a unit of the user's own manager
# (systemd-run -M user@ --user), else in a PAM login session (runuser -l: pam_systemd gives a
# session scope and XDG_RUNTIME_DIR).
drive="/usr/bin/python3 $dest/tests/vm/limits_user.py $dest/bin/ipybox"
rc=0
if out=$(systemd-run -q -M "$user@" --user --wait --pipe /bin/true 2>&1); then
    echo "== as $user via systemd-run -M $user@ --user (a service of the user's manager)"
    systemd-run -q -M "$user@" --user --wait --pipe -p WorkingDirectory="~" $drive || rc=$?
else
    echo "== as $user via runuser -l (a login session; systemd-run -M said: ${out//$'\n'/ })"
    runuser -l "$user" -c "$drive" || rc=$?
fi
echo "== scopes of ipybox left under user@$uid.service: $(find /sys/fs/cgroup/user.slice -name 'ipybox-*.scope' | wc -l)"
echo "== result: $([ $rc -eq 0 ] && echo PASS || echo "FAIL ($rc)")"
exit $rc
