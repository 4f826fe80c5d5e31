#include "mountplan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"

int ipb_mount_plan_add(ipb_mount_plan *p, uint32_t kind, uint32_t flags, const char *src, const char *dst,
                       const char *data) {
    ipb_mount *n = realloc(p->m, (p->n + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM;
    p->m = n;
    ipb_mount *m = &p->m[p->n];
    memset(m, 0, sizeof(*m));
    m->kind = kind;
    m->flags = flags;
    if ((src && !(m->src = strdup(src))) || !(m->dst = strdup(dst)) || (data && !(m->data = strdup(data)))) {
        free(m->src);
        free(m->dst);
        free(m->data);
        return -ENOMEM;
    }
    p->n++;
    return 0;
}

void ipb_mount_plan_free(ipb_mount_plan *p) {
    for (size_t i = 0; i < p->n; i++) {
        free(p->m[i].src);
        free(p->m[i].dst);
        free(p->m[i].data);
    }
    free(p->m);
    p->m = NULL;
    p->n = 0;
}

/* System directories, mirrored so that merged-/usr symlinks (/bin -> usr/bin) stay symlinks. */
static const char *const system_dirs[] = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"};

/* /etc entries Python, pip, matplotlib and TLS need; everything else in /etc stays out
 * (notably passwd/shadow/group from the host, ssl/private, machine-id, ssh, apt and pip
 * configuration). */
static const char *const etc_entries[] = {
    "ld.so.cache",  "ld.so.conf",      "ld.so.conf.d",    "alternatives",
    "ssl/certs",    "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf",
    "pki",          "python3",         "python3.9",       "python3.10",
    "python3.11",   "python3.12",      "python3.13",      "python3.14",
    "matplotlibrc", "fonts",           "mime.types",      "localtime",
    "timezone",     "os-release",      "debian_version",  "protocols",
    "services",     "host.conf",       "gai.conf",        "locale.alias",
    "bash.bashrc",  "inputrc",         "magic",           "magic.mime",
};

/* /proc entries that reveal or change host state: masked or made read-only. */
static const char *const proc_masked[] = {
    "kcore",         "keys",       "key-users",  "timer_list",    "sched_debug", "kallsyms",
    "latency_stats", "acpi",       "scsi",       "sysrq-trigger", "kmsg",        "vmallocinfo",
    "slabinfo",      "kpagecount", "kpageflags", "kpagecgroup",   "config.gz",   "mtrr",
};
/* pressure: writing a trigger there holds kernel resources and polls host-wide stalls. */
static const char *const proc_readonly[] = {"sys", "bus", "fs", "irq", "pressure"};

static const char etc_passwd[] = "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                                 "appuser:x:1000:1000:ipybox sandbox user:/home/appuser:/bin/sh\n"
                                 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char etc_group[] = "root:x:0:\nappuser:x:1000:\nnogroup:x:65534:\n";
static const char etc_hosts[] = "127.0.0.1\tlocalhost ipybox\n::1\tlocalhost ip6-localhost ipybox\n";
static const char etc_nsswitch[] = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
                                   "networks: files\nprotocols: files\nservices: files\n";

#define ADD(kind, flags, src, dst, data)                                                                               \
    do {                                                                                                               \
        if (ipb_mount_plan_add(&plan, (kind), (flags), (src), (dst), (data)) < 0)                                      \
            return ipb_error_set(err, ENOMEM, "building the mount plan");                                              \
    } while (0)

int ipb_mount_plan_build(const ipb_plan_input *in, ipb_mount_plan *ret, ipb_error **err) {
    __attribute__((cleanup(ipb_mount_plan_free))) ipb_mount_plan plan = {0};
    const ipb_options *o = in->opts;
    const char *sysroot = o->rootfs ? o->rootfs : "";
    char src[4096], dst[4096];

    for (size_t i = 0; i < sizeof(system_dirs) / sizeof(*system_dirs); i++) {
        snprintf(src, sizeof(src), "%s/%s", sysroot, system_dirs[i]);
        snprintf(dst, sizeof(dst), "/%s", system_dirs[i]);
        ADD(IPB_MNT_BIND_RO, IPB_MNT_OPTIONAL | IPB_MNT_MIRROR, src, dst, NULL);
    }
    ADD(IPB_MNT_DIR, 0, NULL, "/etc", NULL);
    ADD(IPB_MNT_FILE, 0, NULL, "/etc/passwd", etc_passwd);
    ADD(IPB_MNT_FILE, 0, NULL, "/etc/group", etc_group);
    ADD(IPB_MNT_FILE, 0, NULL, "/etc/hosts", etc_hosts);
    ADD(IPB_MNT_FILE, 0, NULL, "/etc/hostname", IPB_SANDBOX_HOSTNAME "\n");
    ADD(IPB_MNT_FILE, 0, NULL, "/etc/nsswitch.conf", etc_nsswitch);
    /* The redirect brings every DNS query to the stub anyway; name it so tools that read this
     * file agree. */
    ADD(IPB_MNT_FILE, 0, NULL, "/etc/resolv.conf",
        "# ipybox: DNS answered by the supervisor's stub\nnameserver 127.0.0.1\n");
    for (size_t i = 0; i < sizeof(etc_entries) / sizeof(*etc_entries); i++) {
        snprintf(src, sizeof(src), "%s/etc/%s", sysroot, etc_entries[i]);
        snprintf(dst, sizeof(dst), "/etc/%s", etc_entries[i]);
        ADD(IPB_MNT_BIND_RO, IPB_MNT_OPTIONAL | IPB_MNT_MIRROR, src, dst, NULL);
    }

    ADD(IPB_MNT_BIND_RW, IPB_MNT_USER | (in->workspace_id ? IPB_MNT_SAME : 0), in->workspace, IPB_SANDBOX_APP, NULL);
    if (in->workspace_id)
        plan.m[plan.n - 1].id = *in->workspace_id;
    for (size_t i = 0; i < o->n_binds; i++) {
        if (o->binds[i].rel[0] == '/')
            continue; /* --host-dir: below */
        snprintf(dst, sizeof(dst), IPB_SANDBOX_APP "/%s", o->binds[i].rel);
        ADD(IPB_MNT_BIND_RW, IPB_MNT_USER | (in->bind_ids ? IPB_MNT_SAME : 0), o->binds[i].host, dst, NULL);
        if (in->bind_ids)
            plan.m[plan.n - 1].id = in->bind_ids[i];
    }
    ADD(IPB_MNT_DIR, 0, NULL, "/home", NULL);
    ADD(IPB_MNT_BIND_RW, IPB_MNT_USER | (in->home_id ? IPB_MNT_SAME : 0), in->home, IPB_SANDBOX_HOME, NULL);
    if (in->home_id)
        plan.m[plan.n - 1].id = *in->home_id;
    ADD(IPB_MNT_TMPFS, 0, NULL, "/run", "size=1m,nr_inodes=256,mode=0755");
    if (in->rundir)
        ADD(IPB_MNT_BIND_RW, IPB_MNT_USER, in->rundir, IPB_SANDBOX_RUNDIR, NULL);
    if (in->mcpdir)
        ADD(IPB_MNT_BIND_RO, IPB_MNT_USER, in->mcpdir, IPB_SANDBOX_MCPDIR, NULL);

    char opt[128];
    snprintf(opt, sizeof(opt), "size=%llu,mode=1777", (unsigned long long)o->tmp_size);
    ADD(IPB_MNT_TMPFS, 0, NULL, "/tmp", opt);
    ADD(IPB_MNT_DIR, 0, NULL, "/var", NULL);
    ADD(IPB_MNT_SYMLINK, 0, "/tmp", "/var/tmp", NULL);
    /* `ipybox run --host-dir DIR`: DIR at its own path (options.c keeps these off the
     * sandbox's own places), its parents made in the root. */
    for (size_t i = 0; i < o->n_binds; i++) {
        if (o->binds[i].rel[0] != '/')
            continue;
        ADD(IPB_MNT_BIND_RW, IPB_MNT_USER | (in->bind_ids ? IPB_MNT_SAME : 0), o->binds[i].host, o->binds[i].rel, NULL);
        if (in->bind_ids)
            plan.m[plan.n - 1].id = in->bind_ids[i];
    }

    /* --python: the interpreter's environment, read-only, at its own path (pyhost.c keeps
     * these off the sandbox's own places); its parents are made empty in the root, so nothing
     * else of the home holding it is there. */
    for (size_t i = 0; i < in->n_python; i++) {
        ADD(IPB_MNT_BIND_RO, IPB_MNT_USER | (in->python_ids ? IPB_MNT_SAME : 0), in->python_prefixes[i],
            in->python_prefixes[i], NULL);
        if (in->python_ids)
            plan.m[plan.n - 1].id = in->python_ids[i];
    }

    /* A minimal /dev: no tty (TIOCSTI), no block or memory devices, no fuse, no kmsg. */
    ADD(IPB_MNT_TMPFS, 0, NULL, "/dev", "size=64k,nr_inodes=64,mode=0755");
    static const char *const devs[] = {"null", "zero", "full", "random", "urandom"};
    for (size_t i = 0; i < sizeof(devs) / sizeof(*devs); i++) {
        snprintf(src, sizeof(src), "/dev/%s", devs[i]);
        ADD(IPB_MNT_BIND_DEV, 0, src, src, NULL);
    }
    ADD(IPB_MNT_SYMLINK, 0, "/proc/self/fd", "/dev/fd", NULL);
    ADD(IPB_MNT_SYMLINK, 0, "/proc/self/fd/0", "/dev/stdin", NULL);
    ADD(IPB_MNT_SYMLINK, 0, "/proc/self/fd/1", "/dev/stdout", NULL);
    ADD(IPB_MNT_SYMLINK, 0, "/proc/self/fd/2", "/dev/stderr", NULL);
    snprintf(opt, sizeof(opt), "size=%llu,mode=1777", (unsigned long long)o->shm_size);
    ADD(IPB_MNT_TMPFS, 0, NULL, "/dev/shm", opt);
    ADD(IPB_MNT_DEVPTS, 0, NULL, "/dev/pts", NULL);
    ADD(IPB_MNT_SYMLINK, 0, "pts/ptmx", "/dev/ptmx", NULL);

    ADD(IPB_MNT_PROC, 0, NULL, "/proc", NULL);
    for (size_t i = 0; i < sizeof(proc_masked) / sizeof(*proc_masked); i++) {
        snprintf(dst, sizeof(dst), "/proc/%s", proc_masked[i]);
        ADD(IPB_MNT_MASK, IPB_MNT_OPTIONAL, NULL, dst, NULL);
    }
    for (size_t i = 0; i < sizeof(proc_readonly) / sizeof(*proc_readonly); i++) {
        snprintf(dst, sizeof(dst), "/proc/%s", proc_readonly[i]);
        ADD(IPB_MNT_READONLY, IPB_MNT_OPTIONAL, NULL, dst, NULL);
    }
    /* Once populated, /dev and /run are read-only too; their own submounts (/dev/shm,
     * /dev/pts, /run/ipybox) keep their flags. */
    ADD(IPB_MNT_READONLY, 0, NULL, "/dev", NULL);
    ADD(IPB_MNT_READONLY, 0, NULL, "/run", NULL);
    *ret = plan;
    memset(&plan, 0, sizeof(plan));
    return 0;
}
