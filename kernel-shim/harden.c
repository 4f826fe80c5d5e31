#include "harden.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdio.h"

static int write_proc(pid_t pid, const char *file, const char *text, ipb_error **err) {
    char path[64];
    if (pid)
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
    else
        snprintf(path, sizeof(path), "/proc/self/%s", file);
    cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return ipb_error_set(err, errno, "opening %s", path);
    int r = ipb_write_all(fd, text, strlen(text));
    if (r < 0)
        return ipb_error_set(err, -r, "writing '%s' to %s", text, path);
    return 0;
}

int shim_write_id_maps(pid_t pid, uid_t inside_uid, uid_t outside_uid, gid_t inside_gid, gid_t outside_gid,
                       ipb_error **err) {
    char map[64];
    /* An unprivileged writer may map only its own id, and only once setgroups is denied. */
    if (write_proc(pid, "setgroups", "deny", err) < 0)
        return -1;
    snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)inside_uid, (unsigned)outside_uid);
    if (write_proc(pid, "uid_map", map, err) < 0)
        return -1;
    snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)inside_gid, (unsigned)outside_gid);
    return write_proc(pid, "gid_map", map, err);
}

int shim_drop_bounding_caps(ipb_error **err) {
    int last = (int)cap_max_bits();
    for (int c = 0; c < last; c++)
        if (cap_drop_bound((cap_value_t)c) < 0 && errno != EINVAL)
            return ipb_error_set(err, errno, "dropping capability %d from the bounding set", c);
    if (cap_reset_ambient() < 0 && errno != EINVAL)
        return ipb_error_set(err, errno, "clearing the ambient capabilities");
    return 0;
}

int shim_clear_caps(ipb_error **err) {
    cap_t empty = cap_init();
    if (!empty)
        return ipb_error_set(err, errno, "clearing capabilities");
    int r = cap_set_proc(empty);
    int e = errno;
    cap_free(empty);
    if (r < 0)
        return ipb_error_set(err, e, "clearing capabilities");
    return 0;
}

int shim_apply_seccomp(const uint8_t *bpf, size_t len, ipb_error **err) {
    struct sock_fprog prog = {
        .len = (unsigned short)(len / sizeof(struct sock_filter)),
        .filter = (struct sock_filter *)(uintptr_t)bpf,
    };
    if (len == 0 || len % sizeof(struct sock_filter) || len / sizeof(struct sock_filter) > BPF_MAXINSNS)
        return ipb_error_set(err, EINVAL, "loading the seccomp filter: bad program size");
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
        return ipb_error_set(err, errno, "loading the seccomp filter");
    return 0;
}
