#include "sysconf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mon_proto.h"
#include "options.h"

void ipbm_sysconf_defaults(ipbm_sysconf *c) {
    memset(c, 0, sizeof(*c));
    c->uid_min = 1000;
    c->uid_max = 59999;
    c->pool_start = 0x70000000u;
    c->pool_size = 256;
    c->memory_max = 2ull << 30;
    c->memory_max_bound = 8ull << 30;
    c->pids_max = 512;
    c->pids_max_bound = 4096;
    c->cpu_weight = 100;
    c->cpu_weight_bound = 1000;
    c->tmp_size = IPB_DEFAULT_TMP_SIZE;
    c->shm_size = IPB_DEFAULT_SHM_SIZE;
    c->idle_timeout_s = 1800;
    c->max_sessions_per_user = 16;
    c->user_memory_max = 1ull << 30;
    c->user_pids_max = 1024;
    c->zygote = false; /* density first on a shared host; see dist/ipyboxd.conf */
}

static int num(const char *v, uint64_t lo, uint64_t hi, uint64_t *ret) {
    char *end;
    if (!*v || *v == '-')
        return -1;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end || n < lo || n > hi)
        return -1;
    *ret = n;
    return 0;
}

static int size(const char *v, uint64_t lo, uint64_t hi, uint64_t *ret) {
    uint64_t n;
    if (ipb_parse_size(v, &n) < 0 || n < lo || n > hi)
        return -1;
    *ret = n;
    return 0;
}

/* One `key = value`: 0, -1 for a bad value, -2 for an unknown key. */
static int apply(ipbm_sysconf *c, const char *k, const char *v) {
    uint64_t n = 0;
#define U32(key, field, lo, hi)                                                                                        \
    if (!strcmp(k, key)) {                                                                                             \
        if (num(v, lo, hi, &n) < 0)                                                                                    \
            return -1;                                                                                                 \
        c->field = (uint32_t)n;                                                                                        \
        return 0;                                                                                                      \
    }
#define SIZE(key, field, lo, hi)                                                                                       \
    if (!strcmp(k, key))                                                                                               \
        return size(v, lo, hi, &c->field);
    if (!strcmp(k, "users")) {
        if (!strcmp(v, "all")) {
            c->group[0] = '\0';
            return 0;
        }
        if (strncmp(v, "group ", 6))
            return -1;
        const char *g = v + 6;
        while (*g == ' ')
            g++;
        size_t gl = strlen(g);
        if (gl == 0 || gl > IPBM_GROUP_MAX || strpbrk(g, " \t:/"))
            return -1;
        memcpy(c->group, g, gl + 1);
        return 0;
    }
    U32("uid_min", uid_min, 1, 0xfffffffeu)
    U32("uid_max", uid_max, 1, 0xfffffffeu)
    U32("uid_pool_start", pool_start, 65536, 0xfffffffeu)
    U32("uid_pool_size", pool_size, 1, 65535)
    SIZE("memory_max", memory_max, 16ull << 20, 1ull << 50)
    SIZE("memory_max_bound", memory_max_bound, 16ull << 20, 1ull << 50)
    U32("pids_max", pids_max, 16, 1u << 22)
    U32("pids_max_bound", pids_max_bound, 16, 1u << 22)
    U32("cpu_weight", cpu_weight, 1, 10000)
    U32("cpu_weight_bound", cpu_weight_bound, 1, 10000)
    SIZE("tmp_size", tmp_size, 1ull << 20, 1ull << 50)
    SIZE("shm_size", shm_size, 1ull << 20, 1ull << 50)
    if (!strcmp(k, "idle_timeout")) {
        if (num(v, 1, 7ull * 24 * 3600, &n) < 0)
            return -1;
        c->idle_timeout_s = (long)n;
        return 0;
    }
    U32("max_sessions_per_user", max_sessions_per_user, 1, 10000)
    U32("warm_sessions", warm_sessions, 0, 10000)
    SIZE("user_memory_max", user_memory_max, 64ull << 20, 1ull << 50)
    U32("user_pids_max", user_pids_max, 64, 1u << 22)
    if (!strcmp(k, "zygote")) {
        if (strcmp(v, "true") && strcmp(v, "false"))
            return -1;
        c->zygote = !strcmp(v, "true");
        return 0;
    }
    if (!strcmp(k, "standby")) {
        if (strcmp(v, "true") && strcmp(v, "false"))
            return -1;
        c->standby = !strcmp(v, "true");
        return 0;
    }
#undef U32
#undef SIZE
    return -2;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

int ipbm_sysconf_parse(ipbm_sysconf *c, const char *text, size_t len, const char *name, ipb_error **err) {
    size_t off = 0;
    unsigned lineno = 0;
    while (off < len) {
        const char *nl = memchr(text + off, '\n', len - off);
        size_t ll = nl ? (size_t)(nl - (text + off)) : len - off;
        lineno++;
        char line[512];
        if (ll >= sizeof(line))
            return ipb_error_set(err, EINVAL, "%s:%u: line too long", name, lineno);
        memcpy(line, text + off, ll);
        line[ll] = '\0';
        off += ll + (nl ? 1 : 0);
        if (memchr(line, '\0', ll))
            return ipb_error_set(err, EINVAL, "%s:%u: a NUL byte", name, lineno);
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        if (!eq)
            return ipb_error_set(err, EINVAL, "%s:%u: expected `key = value`", name, lineno);
        *eq = '\0';
        char *k = trim(s), *v = trim(eq + 1);
        int r = apply(c, k, v);
        if (r == -2)
            return ipb_error_set(err, EINVAL, "%s:%u: unknown setting '%s'", name, lineno, k);
        if (r < 0)
            return ipb_error_set(err, EINVAL, "%s:%u: bad value for %s: '%s'", name, lineno, k, v);
    }
    if (c->uid_min > c->uid_max)
        return ipb_error_set(err, EINVAL, "%s: uid_min is above uid_max", name);
    if ((uint64_t)c->pool_start + (uint64_t)c->pool_size * IPBM_RANGE > 0xffffffffull)
        return ipb_error_set(err, EINVAL, "%s: the uid pool (uid_pool_start + uid_pool_size x %u) passes 2^32-1", name,
                             IPBM_RANGE);
    if ((uint64_t)c->pool_start < (uint64_t)c->uid_max + 1 &&
        (uint64_t)c->pool_start + (uint64_t)c->pool_size * IPBM_RANGE > c->uid_min)
        return ipb_error_set(err, EINVAL, "%s: the uid pool overlaps the users' uids (uid_min to uid_max)", name);
    if (c->memory_max > c->memory_max_bound)
        return ipb_error_set(err, EINVAL, "%s: memory_max is above memory_max_bound", name);
    if (c->pids_max > c->pids_max_bound)
        return ipb_error_set(err, EINVAL, "%s: pids_max is above pids_max_bound", name);
    if (c->cpu_weight > c->cpu_weight_bound)
        return ipb_error_set(err, EINVAL, "%s: cpu_weight is above cpu_weight_bound", name);
    if (c->standby && !c->zygote)
        return ipb_error_set(err, EINVAL,
                             "%s: standby = true needs zygote = true (the standby kernel is forked from "
                             "the zygote)",
                             name);
    if (c->warm_sessions > c->max_sessions_per_user)
        return ipb_error_set(err, EINVAL, "%s: warm_sessions is above max_sessions_per_user", name);
    return 0;
}

int ipbm_sysconf_check_host(const ipbm_sysconf *c, uint64_t mem_total, uint64_t pid_max, const char *name,
                            ipb_error **err) {
    static const char *const mem_keys[2] = {"memory_max", "user_memory_max"};
    const uint64_t mem[2] = {c->memory_max, c->user_memory_max};
    for (int i = 0; i < 2; i++)
        if (mem_total && mem[i] > mem_total)
            return ipb_error_set(err, EINVAL,
                                 "%s: %s = %llu MiB is more than this host's memory (%llu MiB); "
                                 "a limit the host cannot give is no limit: lower it",
                                 name, mem_keys[i], (unsigned long long)(mem[i] >> 20),
                                 (unsigned long long)(mem_total >> 20));
    static const char *const pid_keys[2] = {"pids_max", "user_pids_max"};
    const uint32_t pids[2] = {c->pids_max, c->user_pids_max};
    for (int i = 0; i < 2; i++)
        if (pid_max && pids[i] > pid_max)
            return ipb_error_set(err, EINVAL, "%s: %s = %u is more than this host's kernel.pid_max (%llu): lower it",
                                 name, pid_keys[i], pids[i], (unsigned long long)pid_max);
    return 0;
}
