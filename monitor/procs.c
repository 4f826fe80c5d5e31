#include "procs.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fdio.h"

static int pidfd_of(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

static void pidfd_kill(int pidfd) { syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0); }

/* The first uid (real, effective, saved, fs) of pid in [base, base + n), or -1. */
static long uid_in(pid_t pid, uint32_t base, uint64_t n) {
    char p[64], *text = NULL;
    size_t len;
    snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
    if (ipb_read_file(p, 1 << 16, &text, &len) < 0)
        return -1;
    long in = -1;
    char *u = strstr(text, "\nUid:");
    if (u) {
        u += 5;
        for (int i = 0; i < 4 && in < 0; i++) {
            char *end;
            unsigned long v = strtoul(u, &end, 10);
            if (end == u)
                break;
            if (v >= base && v - base < n)
                in = (long)v;
            u = end;
        }
    }
    free(text);
    return in;
}

/* Checked, opened as a pidfd, checked again, killed through the pidfd: between the pidfd and
 * the second check the pid cannot be another process's, since the one it names is alive. */
static void kill_checked(pid_t pid, uint32_t base, uint64_t n) {
    int pidfd = pidfd_of(pid);
    if (pidfd < 0)
        return;
    if (uid_in(pid, base, n) >= 0)
        pidfd_kill(pidfd);
    close(pidfd);
}

int ipbm_pool_scan(uint32_t start, uint32_t nslots, uint32_t range, const uint8_t *kill, uint8_t *busy) {
    memset(busy, 0, nslots);
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 1)
            continue;
        long uid = uid_in((pid_t)pid, start, (uint64_t)nslots * range);
        if (uid < 0)
            continue;
        uint32_t slot = (uint32_t)((uint64_t)(uid - start) / range);
        busy[slot] = 1;
        found++;
        if (kill && kill[slot])
            kill_checked((pid_t)pid, start + slot * range, range);
    }
    closedir(d);
    return found;
}

int ipbm_range_procs(uint32_t base, uint32_t n, bool kill) {
    uint8_t k = kill, busy;
    return ipbm_pool_scan(base, 1, n, &k, &busy);
}

void ipbm_kill_in_cgroup(pid_t pid, const char *leaf) {
    int pidfd = pidfd_of(pid);
    if (pidfd < 0)
        return;
    char p[64], *text = NULL, want[128];
    size_t len;
    snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
    snprintf(want, sizeof(want), "/%s\n", leaf);
    if (ipb_read_file(p, 1 << 16, &text, &len) == 0) {
        if (strstr(text, want))
            pidfd_kill(pidfd);
        free(text);
    }
    close(pidfd);
}
