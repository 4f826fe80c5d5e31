/* The monitor's start: its configuration read and checked against the host, the check that
 * users can run our binary (their frontends do), and the uid pool set up (slots an earlier run
 * left cleaned up) with the cgroups. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"
#include "log.h"
#include "monitor_int.h"
#include "procs.h"

int ipbm_load_config(ipbm_sysconf *conf, const char *path, bool given) {
    ipbm_sysconf_defaults(conf);
    char *text = NULL;
    size_t len = 0;
    int r = ipb_read_file(path, 1 << 20, &text, &len);
    if (r == -ENOENT && !given)
        return 0;
    if (r < 0) {
        log_error("cannot read %s: %s", path, strerror(-r));
        return -1;
    }
    ipb_error *err = NULL;
    r = ipbm_sysconf_parse(conf, text, len, path, &err);
    free(text);
    if (r < 0) {
        log_error("%s", ipb_error_msg(err));
        ipb_error_free(err);
    }
    return r;
}

/* Users' frontends run our own binary as the user: every directory on its way must let
 * others through, and the binary let them run it (a build under /root, 0700, does not). */
int ipbm_check_users_can_run(const char *self) {
    char path[PATH_MAX];
    size_t n = strnlen(self, sizeof(path) - 1);
    memcpy(path, self, n);
    path[n] = '\0';
    bool dir = false;
    for (;;) {
        const char *p = path[0] ? path : "/";
        struct stat st;
        if (stat(p, &st) < 0) {
            log_error("cannot look at %s (on the way to this program, %s): %s", p, self, strerror(errno));
            return -1;
        }
        if (!(st.st_mode & S_IXOTH)) {
            log_error("users cannot run %s, which their frontends run as them: %s is mode %04o (others may not "
                      "%s); install it (make install) or build where every user can reach it",
                      self, p, (unsigned)(st.st_mode & 07777), dir ? "pass" : "run it");
            return -1;
        }
        char *slash = strrchr(path, '/');
        if (!path[0] || !slash)
            return 0;
        *slash = '\0';
        dir = true;
    }
}

/* The configured defaults against what this host has (ipbm_sysconf_check_host). */
int ipbm_check_host(const ipbm_sysconf *conf, const char *path) {
    uint64_t mem_total = 0, pid_max = 0;
    char *text = NULL;
    size_t len;
    if (ipb_read_file("/proc/meminfo", 1 << 16, &text, &len) == 0) {
        const char *m = strstr(text, "MemTotal:");
        unsigned long long kb;
        if (m && sscanf(m, "MemTotal: %llu kB", &kb) == 1)
            mem_total = (uint64_t)kb << 10;
        free(text);
    }
    if (ipb_read_file("/proc/sys/kernel/pid_max", 64, &text, &len) == 0) {
        pid_max = strtoull(text, NULL, 10);
        free(text);
    }
    ipb_error *err = NULL;
    if (ipbm_sysconf_check_host(conf, mem_total, pid_max, path, &err) < 0) {
        log_error("%s", ipb_error_msg(err));
        ipb_error_free(err);
        return -1;
    }
    return 0;
}

/* The pool, its check against the host's users and delegated ranges, and (when clean: the
 * system service) what an earlier run left in it (processes with its uids, sandbox cgroups),
 * for every slot whose lock we get: the others are another monitor's, in use (slotlock.h).
 * Then the cgroups. A private monitor cleans nothing up: it only skips a slot where something
 * runs. */
int ipbm_pool_setup(struct ipbm *M, bool clean, ipb_error **err) {
    uint32_t n = M->conf.pool_size;
    if (ipbm_pool_init(&M->pool, M->conf.pool_start, n) < 0 || !(M->slot_lock = malloc((n ? n : 1) * sizeof(int))))
        return ipb_error_set(err, ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++)
        M->slot_lock[i] = -1;
    if (ipbm_pool_check_host(M, err) < 0)
        return -1;
    uint8_t *mine = calloc(n ? n : 1, 1), *busy = calloc(n ? n : 1, 1);
    if (!mine || !busy) {
        free(mine);
        free(busy);
        return ipb_error_set(err, ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; clean && i < n; i++) {
        int fd = ipbm_slot_lock(&M->pool, (int)i);
        if (fd >= 0) {
            M->slot_lock[i] = fd;
            mine[i] = 1;
        }
    }
    if (clean)
        ipbm_pool_scan(M->conf.pool_start, n, IPBM_RANGE, mine, busy);
    int left = 0;
    for (uint32_t i = 0; i < n; i++)
        left += mine[i] && busy[i];
    if (left)
        log_warn("killed what %d sandbox uid range%s held from an earlier run", left, left == 1 ? "" : "s");
    char desc[4096];
    ipbm_cgroups_init(&M->cg, !M->private_mon, mine, n, desc, sizeof(desc));
    if (!M->private_mon && M->cg.kind == IPBM_LIMITS_RLIMIT && ipbm_cgroup_unified()) {
        /* A systemd host: the unit delegates a cgroup (Delegate=yes); without it a sandbox's
         * memory would be bounded per process only and its sum not at all. */
        free(mine);
        free(busy);
        return ipb_error_set(err, 0,
                             "%s. Sandboxes would run without a memory limit: start the service as its "
                             "unit (systemctl start ipyboxd; the unit has Delegate=yes), or by hand in a delegated "
                             "scope: systemd-run --scope -p Delegate=yes ipyboxd ...",
                             desc);
    }
    log_info("limits: %s", desc);
    for (uint32_t i = 0; i < n; i++)
        if (M->slot_lock[i] >= 0) {
            close(M->slot_lock[i]);
            M->slot_lock[i] = -1;
        }
    free(mine);
    free(busy);
    return 0;
}
