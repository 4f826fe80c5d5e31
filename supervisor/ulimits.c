#include "ulimits.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "fdio.h"
#include "log.h"
#include "mon_proto.h"
#include "strbuf.h"

#define CG_ROOT "/sys/fs/cgroup"
#define CGROUP2_MAGIC 0x63677270

static struct {
    bool done;
    enum ipb_ulimits_kind kind;
    uint64_t memory_max;
    unsigned pids_max, cpu_weight;
    ipbm_cgroups cg; /* cgroup1 */
    int next_slot;
    char systemd_run[32];
    int systemd_version; /* of systemd-run, 0 when unknown */
    char runtime_env[PATH_MAX + 20];
    char no_scope[300]; /* why no scope, for the notice */
    bool cpu_told;
    char desc[600];
} U;

static void fmt_size(uint64_t b, char *out, size_t len) {
    if (b && !(b & ((1ull << 30) - 1)))
        snprintf(out, len, "%lluG", (unsigned long long)(b >> 30));
    else if (b && !(b & ((1ull << 20) - 1)))
        snprintf(out, len, "%lluM", (unsigned long long)(b >> 20));
    else
        snprintf(out, len, "%llu", (unsigned long long)b);
}

/* systemd-run's version ("systemd 252 (252.39-1~deb12u2)"), 0 when it does not say. */
static int systemd_version(const char *run) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return 0;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char *argv[] = {(char *)"systemd-run", (char *)"--version", NULL};
    char *envp[] = {NULL};
    pid_t pid;
    int r = posix_spawn(&pid, run, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    int v = 0;
    if (r == 0) {
        char buf[256];
        ssize_t n, got = 0;
        while (got < (ssize_t)sizeof(buf) - 1 && (n = read(p[0], buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
            got += n;
        buf[got > 0 ? got : 0] = '\0';
        if (sscanf(buf, "systemd %d", &v) != 1)
            v = 0;
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    close(p[0]);
    return v;
}

/* Whether the user's systemd manager can give each sandbox a scope with these limits: a
 * unified cgroup v2 hierarchy with the memory and pids controllers, the manager's private
 * socket in XDG_RUNTIME_DIR, and systemd-run. why says what is missing. */
static bool scope_possible(char *why, size_t whylen) {
    struct statfs sf;
    char *ctrls = NULL;
    size_t len;
    if (statfs(CG_ROOT, &sf) < 0 || (long)sf.f_type != CGROUP2_MAGIC) {
        snprintf(why, whylen, "no delegated cgroup v2 (%s is not a unified cgroup v2 hierarchy)", CG_ROOT);
        return false;
    }
    if (ipb_read_file(CG_ROOT "/cgroup.controllers", 4096, &ctrls, &len) < 0 || !ipbm_list_has_word(ctrls, "memory") ||
        !ipbm_list_has_word(ctrls, "pids")) {
        free(ctrls);
        snprintf(why, whylen, "no delegated cgroup v2 (it has no memory and pids controllers here)");
        return false;
    }
    free(ctrls);
    const char *rt = getenv("XDG_RUNTIME_DIR");
    if (!rt || rt[0] != '/') {
        snprintf(why, whylen, "no delegated cgroup v2 (XDG_RUNTIME_DIR is not set, so no systemd user manager to ask)");
        return false;
    }
    char sock[PATH_MAX];
    struct stat st;
    snprintf(sock, sizeof(sock), "%s/systemd/private", rt);
    if (stat(sock, &st) < 0 || !S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
        snprintf(why, whylen, "no delegated cgroup v2 (no systemd user manager: %.200s is missing)", sock);
        return false;
    }
    const char *runs[] = {"/usr/bin/systemd-run", "/bin/systemd-run"};
    U.systemd_run[0] = '\0';
    for (size_t i = 0; i < 2 && !U.systemd_run[0]; i++)
        if (access(runs[i], X_OK) == 0)
            snprintf(U.systemd_run, sizeof(U.systemd_run), "%s", runs[i]);
    if (!U.systemd_run[0]) {
        snprintf(why, whylen, "no delegated cgroup v2 (systemd-run is not installed)");
        return false;
    }
    snprintf(U.runtime_env, sizeof(U.runtime_env), "XDG_RUNTIME_DIR=%s", rt);
    U.systemd_version = systemd_version(U.systemd_run);
    return true;
}

/* Appends "; " and a formatted part to a notice. */
__attribute__((format(printf, 3, 4))) static void part(char *buf, size_t len, const char *fmt, ...) {
    size_t at = strlen(buf);
    if (at && at + 2 < len) {
        memcpy(buf + at, "; ", 3);
        at += 2;
    }
    if (at >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + at, len - at, fmt, ap);
    va_end(ap);
}

/* Chooses among cgroup1 and rlimit (the scope is out) and fills the notice. */
static void choose_fallback(char *notice, size_t nlen) {
    char mem[32];
    fmt_size(U.memory_max, mem, sizeof(mem));
    char d[1200] = "";
    if (ipbm_cgroups_init_user(&U.cg, d, sizeof(d))) {
        U.kind = IPB_ULIMITS_CGROUP1;
        snprintf(U.desc, sizeof(U.desc), "a cgroup of its own per sandbox (%s)", d);
        if (U.cpu_weight && !U.cg.cpu[0])
            part(notice, nlen,
                 "--cpu-weight %u cannot be enforced here: %s and no cgroup v1 cpu controller; the "
                 "kernel gets the default CPU share",
                 U.cpu_weight, U.no_scope);
        return;
    }
    U.kind = IPB_ULIMITS_RLIMIT;
    snprintf(U.desc, sizeof(U.desc),
             "rlimits: %s processes per sandbox (RLIMIT_NPROC in its user namespace), "
             "%s address space per process (RLIMIT_AS)",
             U.pids_max && geteuid() ? "a bound on the" : "no bound on",
             U.memory_max ? "a bound on the" : "no bound on");
    if (U.memory_max)
        part(notice, nlen,
             "--memory %s cannot be enforced for the sandbox here: %s and no writable cgroup v1 "
             "memory controller; each of its processes gets an address-space limit (RLIMIT_AS) of %s instead, "
             "which bounds no sum, and running out shows as MemoryError, not as an out-of-memory kill",
             mem, U.no_scope, mem);
    if (U.pids_max && geteuid() == 0)
        part(notice, nlen,
             "--max-processes %u cannot be enforced here: %s, no writable cgroup v1 pids "
             "controller, and RLIMIT_NPROC does not apply to uid 0",
             U.pids_max, U.no_scope);
    if (U.cpu_weight)
        part(notice, nlen,
             "--cpu-weight %u cannot be enforced here: no cgroup with a cpu controller; the kernel "
             "gets the default CPU share",
             U.cpu_weight);
}

static void tell(const char *notice) {
    if (notice[0])
        fprintf(stderr, "ipybox: %s\n", notice);
}

/* The choice for U's limits: U.kind and U.desc, and in notice what cannot be enforced. */
static void choose(char *notice, size_t nlen) {
    if (!U.memory_max && !U.pids_max && !U.cpu_weight) {
        U.kind = IPB_ULIMITS_NONE;
        snprintf(U.desc, sizeof(U.desc), "none asked for");
        return;
    }
    if (scope_possible(U.no_scope, sizeof(U.no_scope))) {
        U.kind = IPB_ULIMITS_SCOPE;
        snprintf(U.desc, sizeof(U.desc), "a transient scope of the user's systemd manager per sandbox (cgroup v2)");
        /* Whether the manager may hand the cpu controller down (it enables it in its subtree
         * only once a unit asks for it); where its cgroup is not at the usual place, the first
         * sandbox's scope tells. */
        char p[128], *ctrls = NULL;
        size_t len;
        snprintf(p, sizeof(p), CG_ROOT "/user.slice/user-%u.slice/user@%u.service/cgroup.controllers",
                 (unsigned)geteuid(), (unsigned)geteuid());
        if (U.cpu_weight && ipb_read_file(p, 4096, &ctrls, &len) == 0 && !ipbm_list_has_word(ctrls, "cpu")) {
            part(notice, nlen,
                 "--cpu-weight %u cannot be enforced here: the user's systemd manager "
                 "does not delegate the cpu controller (user@%u.service has %.*s); the kernel gets the default "
                 "CPU share",
                 U.cpu_weight, (unsigned)geteuid(), (int)strcspn(ctrls, "\n"), ctrls);
            U.cpu_told = true;
        }
        free(ctrls);
    } else {
        choose_fallback(notice, nlen);
    }
}

enum ipb_ulimits_kind ipb_ulimits_setup(const ipb_options *o) {
    if (U.done)
        return U.kind;
    U.done = true;
    U.memory_max = o->memory_max;
    U.pids_max = o->pids_max;
    U.cpu_weight = o->cpu_weight;
    char notice[1500] = "";
    choose(notice, sizeof(notice));
    if (U.kind == IPB_ULIMITS_NONE)
        return U.kind;
    log_info("limits in user mode: %s", U.desc);
    if (!getenv(IPB_ULIMITS_TOLD_ENV))
        tell(notice);
    return U.kind;
}

const char *ipb_ulimits_describe(void) { return U.desc; }

enum ipb_ulimits_kind ipb_ulimits_probe(uint64_t memory_max, unsigned pids_max, unsigned cpu_weight, char *desc,
                                        size_t desclen, char *notice, size_t nlen) {
    /* The same choice on a copy of the state, which is put back: a later ipb_ulimits_setup
     * chooses for its own options. */
    typeof(U) saved = U;
    U.memory_max = memory_max;
    U.pids_max = pids_max;
    U.cpu_weight = cpu_weight;
    U.cpu_told = false;
    notice[0] = '\0';
    choose(notice, nlen);
    enum ipb_ulimits_kind kind = U.kind;
    snprintf(desc, desclen, "%s", U.desc);
    U = saved;
    return kind;
}

void ipb_ulimits_rlimit_values(uint64_t *memory_max, unsigned *pids_max) {
    bool rl = U.kind == IPB_ULIMITS_RLIMIT;
    *memory_max = rl ? U.memory_max : 0;
    *pids_max = rl && geteuid() ? U.pids_max : 0;
}

int ipb_ulimits_prepare(ipb_ulimits_sb *u, shim_config *cfg, const char *shim, const char **ret_path, char **ret_argv,
                        char **envp, ipb_error **err) {
    *u = (ipb_ulimits_sb)IPB_ULIMITS_SB_INIT;
    u->kind = U.kind;
    /* S0, the zygote and the fork between it and a kernel are the sandbox's own processes: the
     * kernel keeps the limit the user asked for (architecture.md, "Zygote kernels"). */
    unsigned extra = cfg->zygote ? IPBM_ZYGOTE_PIDS : 0;
    switch (U.kind) {
    case IPB_ULIMITS_NONE:
        return 0;
    case IPB_ULIMITS_SCOPE: {
        /* The unit's name says whose it is; the random part keeps a name from coming back. */
        unsigned char rnd[3];
        char hex[8];
        if (ipb_random(rnd, sizeof(rnd)) < 0)
            return ipb_error_set(err, errno, "naming the sandbox's scope");
        ipb_hex(rnd, sizeof(rnd), hex);
        snprintf(u->unit, sizeof(u->unit), "ipybox-%d-%d-%s.scope", (int)getpid(), U.next_slot++, hex);
        static char a_unit[96], a_mem[48], a_tasks[48], a_cpu[48];
        snprintf(a_unit, sizeof(a_unit), "--unit=%s", u->unit);
        snprintf(a_mem, sizeof(a_mem), "MemoryMax=%llu", (unsigned long long)U.memory_max);
        snprintf(a_tasks, sizeof(a_tasks), "TasksMax=%u", U.pids_max + extra);
        snprintf(a_cpu, sizeof(a_cpu), "CPUWeight=%u", U.cpu_weight);
        int n = 0;
        ret_argv[n++] = (char *)"systemd-run";
        ret_argv[n++] = (char *)"--user";
        ret_argv[n++] = (char *)"--scope";
        ret_argv[n++] = (char *)"--quiet";
        ret_argv[n++] = (char *)"--collect";
        ret_argv[n++] = a_unit;
        ret_argv[n++] = (char *)"--description=ipybox sandbox";
        if (U.memory_max) {
            ret_argv[n++] = (char *)"-p";
            ret_argv[n++] = a_mem;
            ret_argv[n++] = (char *)"-p";
            ret_argv[n++] = (char *)"MemorySwapMax=0";
        }
        if (U.pids_max) {
            ret_argv[n++] = (char *)"-p";
            ret_argv[n++] = a_tasks;
        }
        if (U.cpu_weight) {
            ret_argv[n++] = (char *)"-p";
            ret_argv[n++] = a_cpu;
        }
        /* From systemd 252 a scope has an OOM policy, by default "stop": one OOM kill would
         * end the whole sandbox. Only the killed process goes (the kernel, replaced at once). */
        if (U.systemd_version >= 252) {
            ret_argv[n++] = (char *)"-p";
            ret_argv[n++] = (char *)"OOMPolicy=continue";
        }
        ret_argv[n++] = (char *)"--";
        ret_argv[n++] = (char *)shim;
        ret_argv[n] = NULL;
        *ret_path = U.systemd_run;
        /* systemd-run finds the manager through XDG_RUNTIME_DIR; the shim takes nothing from
         * its environment. */
        envp[0] = U.runtime_env;
        envp[1] = NULL;
        /* A backstop behind TasksMax, which acts first. */
        if (U.pids_max)
            cfg->nproc_max = U.pids_max + extra + 16;
        return 0;
    }
    case IPB_ULIMITS_CGROUP1: {
        ipbm_limits_req l = {
            .memory_max = U.memory_max, .pids_max = U.pids_max, .cpu_weight = U.cpu_weight, .pids_extra = extra};
        int dirfd = -1;
        char why[300];
        u->slot = U.next_slot++;
        if (ipbm_cgroup_create(&U.cg, u->slot, &l, &dirfd, &u->mem_ev, &u->pids_ev, why, sizeof(why)) < 0) {
            ipb_ulimits_release(u, NULL);
            return ipb_error_set(err, 0, "%s", why);
        }
        if (dirfd >= 0)
            close(dirfd);
        if (U.pids_max)
            cfg->nproc_max = U.pids_max + extra + 16;
        return 0;
    }
    case IPB_ULIMITS_RLIMIT:
        if (U.pids_max && geteuid() != 0)
            cfg->nproc_max = U.pids_max + extra;
        cfg->as_max = U.memory_max;
        return 0;
    }
    return 0;
}

int ipb_ulimits_enter(ipb_ulimits_sb *u, pid_t pid, ipb_error **err) {
    if (u->kind != IPB_ULIMITS_CGROUP1 || u->slot < 0)
        return 0;
    int r = ipbm_cgroup_enter_pid(&U.cg, u->slot, pid);
    if (r < 0)
        return ipb_error_set(err, -r, "moving the sandbox into its cgroup");
    if (U.cpu_weight)
        ipbm_cgroup_set_cpu(&U.cg, u->slot, U.cpu_weight);
    return 0;
}

/* The v2 cgroup of pid ("" when unknown), from /proc/<pid>/cgroup. */
static void cgroup_of(pid_t pid, char *out, size_t len) {
    char p[64], *text = NULL;
    size_t n;
    out[0] = '\0';
    snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
    if (ipb_read_file(p, 1 << 16, &text, &n) < 0)
        return;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (!strncmp(line, "0::", 3)) {
            snprintf(out, len, "%s", line + 3);
            break;
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
}

void ipb_ulimits_attach(ipb_ulimits_sb *u, pid_t pid, ipb_monitor_sandbox *mon) {
    mon->memory_max = U.memory_max;
    mon->pids_max = U.pids_max;
    if (u->kind == IPB_ULIMITS_CGROUP1) {
        mon->limits = IPBM_LIMITS_CGROUP1;
        mon->mem_ev = u->mem_ev;
        mon->pids_ev = u->pids_ev;
        u->mem_ev = u->pids_ev = -1;
        return;
    }
    if (u->kind == IPB_ULIMITS_RLIMIT)
        mon->limits = IPBM_LIMITS_RLIMIT;
    if (u->kind != IPB_ULIMITS_SCOPE)
        return;
    mon->limits = IPBM_LIMITS_CGROUP2;
    char path[1024], dir[1200], f[1300];
    cgroup_of(pid, path, sizeof(path));
    size_t pl = strlen(path), ul = strlen(u->unit);
    if (pl <= ul || strcmp(path + pl - ul, u->unit) || path[pl - ul - 1] != '/') {
        log_warn("the sandbox (pid %d) is in cgroup '%s', not in its scope %s; its limits are not known to apply",
                 (int)pid, path, u->unit);
        return;
    }
    snprintf(dir, sizeof(dir), CG_ROOT "%s", path);
    snprintf(f, sizeof(f), "%s/memory.events", dir);
    mon->mem_ev = open(f, O_RDONLY | O_CLOEXEC);
    snprintf(f, sizeof(f), "%s/pids.events", dir);
    mon->pids_ev = open(f, O_RDONLY | O_CLOEXEC);
    log_info("sandbox %d runs in %s", (int)pid, dir);
    if (U.cpu_weight && !U.cpu_told) {
        snprintf(f, sizeof(f), "%s/cpu.weight", dir);
        if (access(f, F_OK) < 0) {
            U.cpu_told = true;
            /* The manager may have had cpu to give yet not enabled it for this scope. */
            fprintf(stderr,
                    "ipybox: --cpu-weight %u is not in effect for this sandbox: the user's systemd manager "
                    "did not enable the cpu controller for its scope %s (no cpu.weight); the kernel gets the "
                    "default CPU share\n",
                    U.cpu_weight, u->unit);
        }
    }
}

bool ipb_ulimits_scope_failed(int kind, int wait_status) {
    if (kind != IPB_ULIMITS_SCOPE || U.kind != IPB_ULIMITS_SCOPE)
        return false;
    char how[64];
    if (WIFEXITED(wait_status))
        snprintf(how, sizeof(how), "exit status %d", WEXITSTATUS(wait_status));
    else
        snprintf(how, sizeof(how), "wait status 0x%x", wait_status);
    snprintf(U.no_scope, sizeof(U.no_scope), "no delegated cgroup v2 (systemd-run --user --scope failed: %s)", how);
    char notice[1500] = "";
    choose_fallback(notice, sizeof(notice));
    if (!notice[0])
        snprintf(notice, sizeof(notice), "%s; limits now come from %s", U.no_scope, U.desc);
    tell(notice);
    return true;
}

void ipb_ulimits_release(ipb_ulimits_sb *u, ipb_monitor_sandbox *mon) {
    if (mon) {
        if (mon->mem_ev >= 0)
            close(mon->mem_ev);
        if (mon->pids_ev >= 0)
            close(mon->pids_ev);
        mon->mem_ev = mon->pids_ev = -1;
    }
    if (u->mem_ev >= 0)
        close(u->mem_ev);
    if (u->pids_ev >= 0)
        close(u->pids_ev);
    u->mem_ev = u->pids_ev = -1;
    if (u->kind == IPB_ULIMITS_CGROUP1 && u->slot >= 0) {
        /* The sandbox's processes die with its PID 1; a straggler is killed, then the cgroup
         * goes (a few tries while the last exits finish). */
        ipbm_cgroup_kill(&U.cg, u->slot);
        bool gone = false;
        for (int i = 0; i < 50 && !(gone = ipbm_cgroup_remove(&U.cg, u->slot)); i++)
            usleep(20000);
        if (!gone)
            log_warn("the sandbox's cgroup %s%d is still busy; the next start removes it", U.cg.prefix, u->slot);
    }
    u->slot = -1;
    u->kind = IPB_ULIMITS_NONE;
}
