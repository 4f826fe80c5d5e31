/* Sandbox cgroups that a private monitor left when it was killed. Its sandboxes die with it
 * (each shim's parent-death signal is SIGKILL, and PID 1 dies with its shim, taking its pid
 * namespace along), and its slot locks go with its descriptors; only the empty sb-<slot>
 * cgroups stay. The next private monitor with the same cgroup parents removes them: only
 * those of slots whose lock it gets (so no live monitor uses them) and that are empty (so no
 * process of the old sandbox still runs). It kills nothing: a slot where something still
 * runs is skipped by take_slot and left to the service's cleanup at its next start. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "monitor_int.h"

/* Marks the slots (below nslots) that have an sb-<slot> directory under base. */
static void slots_under(const ipbm_cgroups *c, const char *base, uint32_t nslots, uint8_t *seen) {
    if (!base[0])
        return;
    DIR *d = opendir(base);
    if (!d)
        return;
    struct dirent *e;
    size_t pl = strlen(c->prefix);
    while ((e = readdir(d))) {
        int slot;
        char tail;
        if (strncmp(e->d_name, c->prefix, pl) || sscanf(e->d_name + pl, "%d%c", &slot, &tail) != 1 || slot < 0 ||
            (uint32_t)slot >= nslots)
            continue;
        seen[slot] = 1;
    }
    closedir(d);
}

unsigned ipbm_reclaim_orphans(struct ipbm *M) {
    if (M->cg.kind != IPBM_LIMITS_CGROUP2 && M->cg.kind != IPBM_LIMITS_CGROUP1)
        return 0;
    uint32_t n = M->pool.size;
    uint8_t *seen = calloc(n ? n : 1, 1);
    if (!seen)
        return 0;
    if (M->cg.kind == IPBM_LIMITS_CGROUP2)
        slots_under(&M->cg, M->cg.v2, n, seen);
    else {
        slots_under(&M->cg, M->cg.mem, n, seen);
        slots_under(&M->cg, M->cg.pids, n, seen);
        slots_under(&M->cg, M->cg.cpu, n, seen);
    }
    unsigned left = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!seen[i] || M->pool.used[i])
            continue; /* none there, or ours */
        int lock = ipbm_slot_lock(&M->pool, (int)i);
        if (lock < 0)
            continue; /* another monitor's, in use: its own to remove */
        if (ipbm_cgroup_busy(&M->cg, (int)i) || !ipbm_cgroup_remove(&M->cg, (int)i))
            left++;
        close(lock);
    }
    free(seen);
    return left;
}
