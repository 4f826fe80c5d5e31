#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "procs.h"
#include "fdio.h"
#include "log.h"

#define CG_ROOT "/sys/fs/cgroup"
#define CGROUP2_MAGIC 0x63677270
#define CGROUP1_MAGIC 0x27e0eb

static int put(const char *dir, const char *file, const char *val) {
    char p[1100];
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = ipb_write_all(fd, val, strlen(val));
    close(fd);
    return r;
}

bool ipbm_list_has_word(const char *list, const char *w) {
    size_t n = strlen(w);
    for (const char *p = list; (p = strstr(p, w)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

/* Whether a comma-separated controller list names ctrl ("" matches only an empty list). */
static bool lists(const char *ctrls, const char *ctrl) {
    if (!ctrl[0])
        return !ctrls[0];
    size_t n = strlen(ctrl);
    for (const char *p = ctrls; *p;) {
        const char *comma = strchr(p, ',');
        size_t l = comma ? (size_t)(comma - p) : strlen(p);
        if (l == n && !strncmp(p, ctrl, n))
            return true;
        p += l + (comma ? 1 : 0);
    }
    return false;
}

/* Our own cgroup path in the hierarchy of this controller ("" for v2's "0::" line), "" for
 * the root. */
static int own_path(const char *ctrl, char *out, size_t outlen) {
    char *text = NULL;
    size_t len;
    if (ipb_read_file("/proc/self/cgroup", 1 << 16, &text, &len) < 0)
        return -1;
    int r = -1;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *a = strchr(line, ':');
        char *b = a ? strchr(a + 1, ':') : NULL;
        if (!b)
            continue;
        *b = '\0';
        if (lists(a + 1, ctrl)) {
            snprintf(out, outlen, "%s", strcmp(b + 1, "/") ? b + 1 : "");
            r = 0;
            break;
        }
    }
    free(text);
    return r;
}

static bool is_fs(const char *path, long magic) {
    struct statfs s;
    return statfs(path, &s) == 0 && (long)s.f_type == magic;
}

static void slot_dir(const ipbm_cgroups *c, const char *base, int slot, char *out, size_t len) {
    snprintf(out, len, "%s/%s%d", base, c->prefix, slot);
}

/* Kills and removes sb-* cgroups under base that an earlier run left, of the slots in mine
 * only (the others may be another monitor's, in use). */
static int sweep(const ipbm_cgroups *c, const char *base, const uint8_t *mine, uint32_t nslots) {
    DIR *d = opendir(base);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int slot;
        char tail;
        if (sscanf(e->d_name, "sb-%d%c", &slot, &tail) != 1 || slot < 0 || (uint32_t)slot >= nslots || !mine[slot])
            continue;
        ipbm_cgroup_kill(c, slot);
        for (int i = 0; i < 50 && !ipbm_cgroup_remove(c, slot); i++)
            usleep(20000);
        n++;
    }
    closedir(d);
    return n;
}

/* User mode: removes u<pid>-<n> cgroups under base whose supervisor is gone (or had our pid:
 * then it is gone too). What still runs in one is killed first. */
static int sweep_user(const ipbm_cgroups *c, const char *base) {
    if (!base[0])
        return 0;
    DIR *d = opendir(base);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid, k;
        char tail;
        if (sscanf(e->d_name, "u%d-%d%c", &pid, &k, &tail) != 2 || pid <= 0 || k < 0)
            continue;
        if (pid != (int)getpid() && (kill(pid, 0) == 0 || errno == EPERM))
            continue;
        ipbm_cgroups old = *c;
        snprintf(old.prefix, sizeof(old.prefix), "u%d-", pid);
        ipbm_cgroup_kill(&old, k);
        for (int i = 0; i < 50 && !ipbm_cgroup_remove(&old, k); i++)
            usleep(20000);
        n++;
    }
    closedir(d);
    return n;
}

static bool init_v2(ipbm_cgroups *c, const uint8_t *mine, uint32_t nslots, char *desc, size_t desclen) {
    char own[400];
    if (!is_fs(CG_ROOT, CGROUP2_MAGIC) || own_path("", own, sizeof(own)) < 0)
        return false;
    char parent[512];
    snprintf(parent, sizeof(parent), CG_ROOT "%s", own);
    char *ctrls = NULL;
    size_t len;
    char p[1024];
    snprintf(p, sizeof(p), "%s/cgroup.controllers", parent);
    if (ipb_read_file(p, 4096, &ctrls, &len) < 0)
        return false;
    bool ok = ipbm_list_has_word(ctrls, "memory") && ipbm_list_has_word(ctrls, "pids");
    bool cpu = ipbm_list_has_word(ctrls, "cpu");
    free(ctrls);
    if (!ok) {
        snprintf(desc, desclen, "cgroup v2 is mounted but %s does not delegate the memory and pids controllers",
                 parent);
        return false;
    }
    /* No process may stay in a cgroup that hands controllers down: the monitor moves into a
     * leaf of its own, then sandboxes get siblings of it. */
    char leaf[1024];
    snprintf(leaf, sizeof(leaf), "%s/monitor", parent);
    if ((mkdir(leaf, 0755) < 0 && errno != EEXIST) || put(leaf, "cgroup.procs", "0") < 0 ||
        put(parent, "cgroup.subtree_control", cpu ? "+memory +pids +cpu" : "+memory +pids") < 0) {
        snprintf(desc, desclen, "cannot use cgroup v2 under %s (%s); is the service started with Delegate=yes?", parent,
                 strerror(errno));
        return false;
    }
    c->kind = IPBM_LIMITS_CGROUP2;
    snprintf(c->v2, sizeof(c->v2), "%s", parent);
    int left = sweep(c, parent, mine, nslots);
    snprintf(desc, desclen, "cgroup v2 under %s (memory, pids%s)%s", parent, cpu ? ", cpu" : "",
             left ? "; removed sandbox cgroups an earlier run left" : "");
    return true;
}

static bool v1_base(const char *ctrl, const char *name, char *out, size_t outlen) {
    char mnt[128], own[400];
    snprintf(mnt, sizeof(mnt), CG_ROOT "/%s", ctrl);
    if (!is_fs(mnt, CGROUP1_MAGIC) || own_path(ctrl, own, sizeof(own)) < 0)
        return false;
    if ((size_t)snprintf(out, outlen, "%.127s%.380s/%s", mnt, own, name) >= outlen)
        return false;
    return mkdir(out, 0755) == 0 || errno == EEXIST;
}

/* name: the directory under our own cgroup; mine and nslots: the monitor's slots (NULL: user
 * mode, whose cgroups are swept by their supervisors' pids). */
static bool init_v1(ipbm_cgroups *c, const char *name, const uint8_t *mine, uint32_t nslots, char *desc,
                    size_t desclen) {
    if (!v1_base("memory", name, c->mem, sizeof(c->mem)) || !v1_base("pids", name, c->pids, sizeof(c->pids))) {
        c->mem[0] = c->pids[0] = '\0';
        return false;
    }
    if (!v1_base("cpu", name, c->cpu, sizeof(c->cpu)))
        c->cpu[0] = '\0';
    /* Children count against their parent's memory (a no-op on kernels where it is always so). */
    put(c->mem, "memory.use_hierarchy", "1");
    c->kind = IPBM_LIMITS_CGROUP1;
    int left = !mine ? sweep_user(c, c->mem) + sweep_user(c, c->pids) + sweep_user(c, c->cpu)
                     : sweep(c, c->mem, mine, nslots) + sweep(c, c->pids, mine, nslots);
    snprintf(desc, desclen, "cgroup v1 controllers: memory at %s, pids at %s%s%s%s", c->mem, c->pids,
             c->cpu[0] ? ", cpu at " : " (no cpu controller: no CPU share)", c->cpu,
             left ? "; removed sandbox cgroups an earlier run left" : "");
    return true;
}

void ipbm_cgroups_init(ipbm_cgroups *c, bool v2, const uint8_t *mine, uint32_t nslots, char *desc, size_t desclen) {
    memset(c, 0, sizeof(*c));
    snprintf(c->prefix, sizeof(c->prefix), "sb-");
    char why[2048] = "";
    if (!v2)
        snprintf(why, sizeof(why), "cgroup v2 is not ours to divide");
    else if (init_v2(c, mine, nslots, why, sizeof(why)) && (snprintf(desc, desclen, "%s", why), true))
        return;
    if (init_v1(c, "ipyboxd", mine, nslots, desc, desclen))
        return;
    c->kind = IPBM_LIMITS_RLIMIT;
    snprintf(desc, desclen,
             "no usable cgroups%s%s: limits are rlimits only (address space per process for memory, "
             "processes per sandbox uid), no CPU share, and an out-of-memory kill is not told apart",
             why[0] ? ": " : "", why);
}

static int v1_limits(const ipbm_cgroups *c, int slot, const ipbm_limits_req *l, char *why, size_t whylen) {
    char d[1024], v[64];
    slot_dir(c, c->mem, slot, d, sizeof(d));
    if (mkdir(d, 0755) < 0 && errno != EEXIST)
        goto fail;
    /* 0: no limit (user mode, where each limit is optional). */
    if (l->memory_max)
        snprintf(v, sizeof(v), "%llu", (unsigned long long)l->memory_max);
    else
        snprintf(v, sizeof(v), "-1");
    if (put(d, "memory.limit_in_bytes", v) < 0)
        goto fail;
    /* No swap: memory plus swap capped at the same figure, where the kernel accounts swap. */
    if (put(d, "memory.memsw.limit_in_bytes", v) < 0)
        put(d, "memory.swappiness", "0");
    slot_dir(c, c->pids, slot, d, sizeof(d));
    if (mkdir(d, 0755) < 0 && errno != EEXIST)
        goto fail;
    if (l->pids_max)
        snprintf(v, sizeof(v), "%u", l->pids_max + l->pids_extra);
    else
        snprintf(v, sizeof(v), "max");
    if (put(d, "pids.max", v) < 0)
        goto fail;
    if (c->cpu[0]) {
        slot_dir(c, c->cpu, slot, d, sizeof(d));
        if (mkdir(d, 0755) < 0 && errno != EEXIST)
            goto fail;
        put(d, "cpu.shares", "1024"); /* the default until ipbm_cgroup_set_cpu */
    }
    return 0;
fail:
    snprintf(why, whylen, "cannot set up the sandbox's cgroup %s: %s", d, strerror(errno));
    return -1;
}

static int v2_limits(const ipbm_cgroups *c, int slot, const ipbm_limits_req *l, char *why, size_t whylen) {
    char d[1024], v[64];
    slot_dir(c, c->v2, slot, d, sizeof(d));
    if (mkdir(d, 0755) < 0 && errno != EEXIST)
        goto fail;
    if (l->memory_max)
        snprintf(v, sizeof(v), "%llu", (unsigned long long)l->memory_max);
    else
        snprintf(v, sizeof(v), "max");
    if (put(d, "memory.max", v) < 0 || (put(d, "memory.swap.max", "0") < 0 && errno != ENOENT))
        goto fail;
    if (l->pids_max)
        snprintf(v, sizeof(v), "%u", l->pids_max + l->pids_extra);
    else
        snprintf(v, sizeof(v), "max");
    if (put(d, "pids.max", v) < 0)
        goto fail;
    put(d, "cpu.weight", "100"); /* the default until ipbm_cgroup_set_cpu; absent without cpu */
    return 0;
fail:
    snprintf(why, whylen, "cannot set up the sandbox's cgroup %s: %s", d, strerror(errno));
    return -1;
}

static int open_in(const ipbm_cgroups *c, const char *base, int slot, const char *file) {
    char p[1100];
    snprintf(p, sizeof(p), "%s/%s%d/%s", base, c->prefix, slot, file);
    return open(p, O_RDONLY | O_CLOEXEC);
}

int ipbm_cgroup_create(const ipbm_cgroups *c, int slot, const ipbm_limits_req *l, int *dirfd, int *mem_ev, int *pids_ev,
                       char *why, size_t whylen) {
    *dirfd = *mem_ev = *pids_ev = -1;
    if (c->kind == IPBM_LIMITS_CGROUP2) {
        if (v2_limits(c, slot, l, why, whylen) < 0)
            return -1;
        char d[1024];
        slot_dir(c, c->v2, slot, d, sizeof(d));
        *dirfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        *mem_ev = open_in(c, c->v2, slot, "memory.events");
        *pids_ev = open_in(c, c->v2, slot, "pids.events");
        if (*dirfd < 0) {
            snprintf(why, whylen, "cannot open the sandbox's cgroup %s: %s", d, strerror(errno));
            return -1;
        }
    } else if (c->kind == IPBM_LIMITS_CGROUP1) {
        if (v1_limits(c, slot, l, why, whylen) < 0)
            return -1;
        *mem_ev = open_in(c, c->mem, slot, "memory.oom_control");
        *pids_ev = open_in(c, c->pids, slot, "pids.events");
    }
    return 0;
}

/* Moves the calling thread into the slot's v1 cgroup under base. The callers are children
 * between clone and exec, with one thread: moving it moves the process. It is written to
 * `tasks` (the thread, "0": the caller) and not to `cgroup.procs` (its thread group): the
 * kernel moves the current thread without taking the global lock on thread groups for
 * writing, which waits for an RCU grace period (7 to 15 ms a write on this 2-core VM: a
 * sandbox's start paid it once per controller). */
static int join(const ipbm_cgroups *c, const char *base, int slot) {
    if (!base[0])
        return 0;
    char p[1100];
    snprintf(p, sizeof(p), "%s/%s%d/tasks", base, c->prefix, slot);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, "0", 1);
    int e = errno;
    close(fd);
    return n == 1 ? 0 : -e;
}

void ipbm_cgroup_set_cpu(const ipbm_cgroups *c, int slot, uint32_t weight) {
    char d[1024], v[32];
    if (c->kind == IPBM_LIMITS_CGROUP2) {
        slot_dir(c, c->v2, slot, d, sizeof(d));
        snprintf(v, sizeof(v), "%u", weight);
        put(d, "cpu.weight", v);
    } else if (c->kind == IPBM_LIMITS_CGROUP1 && c->cpu[0]) {
        slot_dir(c, c->cpu, slot, d, sizeof(d));
        snprintf(v, sizeof(v), "%u", (unsigned)((uint64_t)weight * 1024 / 100));
        put(d, "cpu.shares", v);
    }
}

int ipbm_cgroup_enter_v1(const ipbm_cgroups *c, int slot) {
    if (c->kind != IPBM_LIMITS_CGROUP1)
        return 0;
    /* join() moves the calling thread: it must be the process's leader (and, as every caller
     * is a child between clone and exec, its one thread). */
    if (syscall(SYS_gettid) != getpid())
        return -EINVAL;
    int r;
    if ((r = join(c, c->mem, slot)) < 0 || (r = join(c, c->pids, slot)) < 0 || (r = join(c, c->cpu, slot)) < 0)
        return r;
    return 0;
}

/* Reads the pids in a cgroup.procs; calls f on each. Returns how many. */
static int each_pid(const ipbm_cgroups *c, const char *base, int slot, bool do_kill) {
    char p[1100];
    snprintf(p, sizeof(p), "%s/%s%d/cgroup.procs", base, c->prefix, slot);
    char *text = NULL;
    size_t len;
    if (ipb_read_file(p, 1 << 20, &text, &len) < 0)
        return 0;
    int n = 0;
    for (char *s = text; *s;) {
        char *end;
        long pid = strtol(s, &end, 10);
        if (end == s)
            break;
        if (pid > 1) {
            n++;
            if (do_kill) {
                char leaf[32];
                snprintf(leaf, sizeof(leaf), "%s%d", c->prefix, slot);
                ipbm_kill_in_cgroup((pid_t)pid, leaf);
            }
        }
        s = end;
        while (*s == '\n')
            s++;
    }
    free(text);
    return n;
}

void ipbm_cgroup_kill(const ipbm_cgroups *c, int slot) {
    if (c->kind == IPBM_LIMITS_CGROUP2) {
        char d[1024];
        slot_dir(c, c->v2, slot, d, sizeof(d));
        if (put(d, "cgroup.kill", "1") == 0)
            return;
        each_pid(c, c->v2, slot, true);
    } else if (c->kind == IPBM_LIMITS_CGROUP1) {
        /* No cgroup.kill in v1: kill what is listed until nothing is (a fork racing the kill
         * is caught on a later round; the pids limit bounds the rounds). */
        for (int round = 0; round < 100 && each_pid(c, c->pids, slot, true) > 0; round++)
            usleep(1000);
    }
}

bool ipbm_cgroup_busy(const ipbm_cgroups *c, int slot) {
    if (c->kind == IPBM_LIMITS_CGROUP2)
        return each_pid(c, c->v2, slot, false) > 0;
    if (c->kind == IPBM_LIMITS_CGROUP1)
        return each_pid(c, c->pids, slot, false) > 0 || each_pid(c, c->mem, slot, false) > 0;
    return false;
}

static bool rm(const ipbm_cgroups *c, const char *base, int slot) {
    if (!base[0])
        return true;
    char d[1024];
    slot_dir(c, base, slot, d, sizeof(d));
    return rmdir(d) == 0 || errno == ENOENT;
}

bool ipbm_cgroup_remove(const ipbm_cgroups *c, int slot) {
    if (c->kind == IPBM_LIMITS_CGROUP2)
        return rm(c, c->v2, slot);
    if (c->kind == IPBM_LIMITS_CGROUP1) {
        bool a = rm(c, c->mem, slot), b = rm(c, c->pids, slot), d = rm(c, c->cpu, slot);
        return a && b && d;
    }
    return true;
}

bool ipbm_cgroups_init_user(ipbm_cgroups *c, char *desc, size_t desclen) {
    memset(c, 0, sizeof(*c));
    snprintf(c->prefix, sizeof(c->prefix), "u%d-", (int)getpid());
    /* Ours to write only if we may make cgroups there (the base may be another user's). */
    if (init_v1(c, "ipybox", NULL, 0, desc, desclen) && access(c->mem, W_OK) == 0 && access(c->pids, W_OK) == 0) {
        if (c->cpu[0] && access(c->cpu, W_OK) < 0)
            c->cpu[0] = '\0';
        return true;
    }
    desc[0] = '\0';
    memset(c, 0, sizeof(*c));
    return false;
}

int ipbm_cgroup_enter_pid(const ipbm_cgroups *c, int slot, pid_t pid) {
    const char *bases[3] = {c->v2, "", ""};
    if (c->kind == IPBM_LIMITS_CGROUP1) {
        bases[0] = c->mem;
        bases[1] = c->pids;
        bases[2] = c->cpu;
    } else if (c->kind != IPBM_LIMITS_CGROUP2) {
        return 0;
    }
    char v[32];
    snprintf(v, sizeof(v), "%d", (int)pid);
    for (int i = 0; i < 3; i++) {
        if (!bases[i][0])
            continue;
        char d[1024];
        slot_dir(c, bases[i], slot, d, sizeof(d));
        int r = put(d, "cgroup.procs", v);
        if (r < 0)
            return r;
    }
    return 0;
}

void ipbm_cgroups_for_users(const ipbm_cgroups *c, ipbm_cgroups *out) {
    *out = *c;
    snprintf(out->prefix, sizeof(out->prefix), "u-");
}

static void sweep_users_in(const ipbm_cgroups *uc, const char *base) {
    if (!base[0])
        return;
    DIR *d = opendir(base);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int uid;
        char tail;
        if (sscanf(e->d_name, "u-%d%c", &uid, &tail) != 1 || uid < 0)
            continue;
        ipbm_cgroup_kill(uc, uid);
        for (int i = 0; i < 50 && !ipbm_cgroup_remove(uc, uid); i++)
            usleep(20000);
    }
    closedir(d);
}

void ipbm_cgroup_users_sweep(const ipbm_cgroups *c) {
    ipbm_cgroups uc;
    ipbm_cgroups_for_users(c, &uc);
    if (c->kind == IPBM_LIMITS_CGROUP2)
        sweep_users_in(&uc, c->v2);
    else if (c->kind == IPBM_LIMITS_CGROUP1)
        sweep_users_in(&uc, c->pids[0] ? c->pids : c->mem);
}

bool ipbm_cgroup_unified(void) { return is_fs(CG_ROOT, CGROUP2_MAGIC); }
