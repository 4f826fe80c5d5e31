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

static void pidfd_kill(int pidfd) {
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
}

/* Whether /proc/<pid>/status shows a uid (real, effective, saved or fs) in the range. */
static bool uid_in(pid_t pid, uint32_t base, uint32_t n) {
    char p[64], *text = NULL;
    size_t len;
    snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
    if (ipb_read_file(p, 1 << 16, &text, &len) < 0)
        return false;
    bool in = false;
    char *u = strstr(text, "\nUid:");
    if (u) {
        u += 5;
        for (int i = 0; i < 4; i++) {
            char *end;
            unsigned long v = strtoul(u, &end, 10);
            if (end == u)
                break;
            in = in || (v >= base && v - base < n);
            u = end;
        }
    }
    free(text);
    return in;
}

int ipbm_range_procs(uint32_t base, uint32_t n, bool kill) {
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
        int pidfd = kill ? pidfd_of((pid_t)pid) : -1;
        if (kill && pidfd < 0)
            continue;
        if (uid_in((pid_t)pid, base, n)) {
            found++;
            if (kill)
                pidfd_kill(pidfd);
        }
        if (pidfd >= 0)
            close(pidfd);
    }
    closedir(d);
    return found;
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
