/* The system service's configuration file (/etc/ipybox/ipyboxd.conf): `key = value` lines,
 * '#' comments, blank lines. Written by the administrator, read once by the monitor at
 * start. Pure: the caller reads the file. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define IPBM_GROUP_MAX 64

typedef struct ipbm_sysconf {
    char group[IPBM_GROUP_MAX + 1];        /* users = group NAME; empty: every user with a uid from
                                     * uid_min to uid_max */
    uint32_t uid_min, uid_max;             /* who counts as a user with `users = all` */
    uint32_t pool_start;                   /* first host uid of the sandbox pool */
    uint32_t pool_size;                    /* sandboxes at once; each takes IPBM_RANGE uids */
    uint64_t memory_max, memory_max_bound; /* bytes */
    uint32_t pids_max, pids_max_bound;
    uint32_t cpu_weight, cpu_weight_bound; /* 1..10000 */
    uint64_t tmp_size, shm_size;           /* defaults for every session's /tmp and /dev/shm */
    long idle_timeout_s;
    uint32_t max_sessions_per_user;
    uint32_t warm_sessions;   /* per user, started ahead (ipyboxd --warm) */
    uint64_t user_memory_max; /* each user's frontend and workers together (bytes) */
    uint32_t user_pids_max;   /* the same, tasks */
    bool zygote;              /* sessions' kernels forked from a zygote (`zygote = false`:
                                     * every session gets --no-zygote before the service's own
                                     * session options) */
    bool standby;             /* `standby = true` (needs zygote): every session gets --standby
                                     * before the service's own session options */
} ipbm_sysconf;

void ipbm_sysconf_defaults(ipbm_sysconf *c);
/* Applies the file's text on top of what c holds. name is used in messages ("FILE:LINE: ...").
 * Every value is checked, and the result as a whole (defaults within bounds, the pool inside
 * the uid space). On error c may be partly changed. */
int ipbm_sysconf_parse(ipbm_sysconf *c, const char *text, size_t len, const char *name, ipb_error **err);
/* The configuration against the host: a default limit the host cannot give (memory_max or
 * user_memory_max above its memory, pids_max or user_pids_max above kernel.pid_max) is an
 * error naming both; a bound above the host's is not (it only caps what sessions ask).
 * mem_total: bytes (0: unknown, not checked); pid_max: 0 when unknown. Pure. */
int ipbm_sysconf_check_host(const ipbm_sysconf *c, uint64_t mem_total, uint64_t pid_max, const char *name,
                            ipb_error **err);
