/* Sandbox cgroups for the monitor: cgroup v2 where the host delegates it to us, else the v1
 * memory, pids (and cpu) controllers, else none (rlimits only). Each sandbox gets a cgroup
 * of its own, named after its pool slot, made before it starts and removed after it ends. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mon_proto.h"

typedef struct ipbm_limits_req {
    uint64_t memory_max; /* bytes */
    uint32_t pids_max;
    uint32_t cpu_weight; /* 1..10000, 100 is the default share */
    uint32_t pids_extra; /* added to a pids_max: the sandbox's own processes beyond the user's
                          * (with a zygote: S0, the zygote, and a fork between them) */
} ipbm_limits_req;

typedef struct ipbm_cgroups {
    enum ipbm_limits kind;
    char v2[512];                       /* the parent of sandbox cgroups (v2) */
    char mem[512], pids[512], cpu[512]; /* the same per v1 controller; "" when missing */
    char prefix[24];                    /* a sandbox cgroup is <prefix><slot>: "sb-" for the monitor */
} ipbm_cgroups;

/* User mode (no monitor, no root needed where the host lets us): per-sandbox cgroups in the v1
 * memory and pids hierarchies (and cpu) when we may write there, named u<pid>-<n> under
 * <hierarchy><own cgroup>/ipybox; those of supervisors that are gone are removed. False when
 * the host offers none of this (desc then empty). The slot is our own counter. */
/* Whether a space-separated list (cgroup.controllers) holds the word w. */
bool ipbm_list_has_word(const char *list, const char *w);
bool ipbm_cgroups_init_user(ipbm_cgroups *c, char *desc, size_t desclen);
/* Moves pid (a child that has not forked yet) into the slot's cgroups. 0 or -errno. */
int ipbm_cgroup_enter_pid(const ipbm_cgroups *c, int slot, pid_t pid);
/* The monitor: finds what the host offers, makes our parent cgroups and removes any sandbox
 * cgroups an earlier run left (killing what still runs in them) of the slots set in mine
 * (nslots entries: those whose lock this monitor holds). v2: whether cgroup v2 may be used
 * (only by the service, whose own cgroup is delegated to it). desc gets a sentence for the log. */
void ipbm_cgroups_init(ipbm_cgroups *c, bool v2, const uint8_t *mine, uint32_t nslots, char *desc, size_t desclen);
/* Makes the slot's cgroup with these limits. *dirfd gets the v2 directory (for
 * CLONE_INTO_CGROUP), else -1; *mem_ev and *pids_ev the event files (read-only), else -1. */
int ipbm_cgroup_create(const ipbm_cgroups *c, int slot, const ipbm_limits_req *l, int *dirfd, int *mem_ev, int *pids_ev,
                       char *why, size_t whylen);
/* The slot's CPU share (created with the default one, so that the monitor never waits on a
 * child a user's low weight starves). */
void ipbm_cgroup_set_cpu(const ipbm_cgroups *c, int slot, uint32_t weight);
/* In the child before exec, while it has one thread: joins the slot's v1 cgroups (v2 was
 * joined by clone3). Returns 0 or -errno. Async-signal-safe. */
int ipbm_cgroup_enter_v1(const ipbm_cgroups *c, int slot);
/* SIGKILLs everything in the slot's cgroup. */
void ipbm_cgroup_kill(const ipbm_cgroups *c, int slot);
/* Removes the slot's cgroup; false while processes remain (try again later). */
bool ipbm_cgroup_remove(const ipbm_cgroups *c, int slot);
/* Whether the slot's cgroup still has processes (false without cgroups). */
bool ipbm_cgroup_busy(const ipbm_cgroups *c, int slot);
/* Users' cgroups (system service): each user's frontend and the workers it starts run in
 * u-<uid>, a sibling of the sandboxes' cgroups, with a memory and pids bound of its own; never
 * in the monitor's leaf. *out is c with the users' prefix: its "slot" is the uid. */
void ipbm_cgroups_for_users(const ipbm_cgroups *c, ipbm_cgroups *out);
/* Kills and removes every user's cgroup (u-*): at start, what an earlier run left; at stop,
 * what is left. */
void ipbm_cgroup_users_sweep(const ipbm_cgroups *c);
/* Whether /sys/fs/cgroup is cgroup v2 alone (a systemd host's unified hierarchy). */
bool ipbm_cgroup_unified(void);
