#include "shimcfg.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mon_proto.h"
#include "monclient.h"
#include "mountplan.h"
#include "seccomp_policy.h"
#include "ulimits.h"

/* --rootfs: every step that binds something below it is checked by identity in the shim
 * (IPB_MNT_SAME), against what is there now below the fd resolved at start, looked up without
 * following any symlink: a symlink at the end is mirrored by the shim (harmless: it resolves
 * in the sandbox), one on the way, or a swap since, is refused there. */
static int rootfs_ids(const char *rootfs, int rootfd, ipb_mount_plan *plan, ipb_error **err) {
    size_t rl = strlen(rootfs);
    for (size_t i = 0; i < plan->n; i++) {
        ipb_mount *m = &plan->m[i];
        if (m->kind != IPB_MNT_BIND_RO || !m->src || strncmp(m->src, rootfs, rl) || m->src[rl] != '/')
            continue;
        struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                               .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
        int fd = (int)syscall(SYS_openat2, rootfd, m->src + rl + 1, &how, sizeof(how));
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISLNK(st.st_mode) && (m->flags & IPB_MNT_MIRROR)) {
            close(fd);
            continue;
        }
        m->flags |= IPB_MNT_SAME;
        m->id = (ipb_file_id){0, 0}; /* not there (or not without a symlink on the way) */
        if (fd >= 0) {
            if (fstat(fd, &st) < 0) {
                int e = errno;
                close(fd);
                return ipb_error_set(err, e, "--rootfs: %s", m->src);
            }
            m->id = (ipb_file_id){(uint64_t)st.st_dev, (uint64_t)st.st_ino};
            close(fd);
        }
    }
    return 0;
}

int ipb_shim_config_build(const ipb_options *o, const ipb_session_dirs *d, uint32_t mode, char *const *argv,
                          shim_config *ret, ipb_error **err) {
    shim_config c;
    memset(&c, 0, sizeof(c));
    c.mode = mode;
    c.uid = getuid();
    c.gid = getgid();
    if (!(c.root = strdup(d->root)) || !(c.hostname = strdup(IPB_SANDBOX_HOSTNAME)) ||
        !(c.cwd = strdup(mode == SHIM_MODE_KERNEL ? "/"
                         : o->cwd                 ? o->cwd
                                                  : "/app")))
        goto oom;
    /* The workspace and the binds go by the canonical paths of the trees resolved (statedir.c),
     * each checked by identity where it is bound. */
    ipb_options po = *o;
    ipb_bind *binds = NULL;
    if (d->n_binds) {
        if (!(binds = calloc(d->n_binds, sizeof(*binds))))
            goto oom;
        for (size_t i = 0; i < d->n_binds; i++)
            binds[i] = (ipb_bind){d->bind_canon[i], o->binds[i].rel};
        po.binds = binds;
    }
    ipb_plan_input in = {.opts = &po,
                         .workspace = d->workspace,
                         .home = d->home,
                         .rundir = d->run,
                         .mcpdir = d->mcp,
                         .workspace_id = &d->workspace_id,
                         .bind_ids = d->n_binds ? d->bind_ids : NULL,
                         .home_id = d->home_fd >= 0 ? &d->home_id : NULL,
                         .n_python = d->python.n,
                         .python_prefixes = d->python.prefix,
                         .python_ids = d->python.id};
    int pr = ipb_mount_plan_build(&in, &c.plan, err);
    free(binds);
    if (pr < 0 || (o->rootfs && rootfs_ids(o->rootfs, d->rootfs_fd, &c.plan, err) < 0))
        goto fail;
    if (ipb_monitor_fd() >= 0) {
        /* System service: the monitor made the user namespace; the user's trees reach the
         * shim as idmapped mounts, and the root is assembled at a path the pool's uids may
         * enter (each shim in its own mount namespace). */
        c.system = 1;
        free(c.root);
        if (!(c.root = strdup(IPBM_ROOT_DIR)))
            goto oom;
        for (size_t i = 0; i < c.plan.n; i++)
            if (c.plan.m[i].flags & IPB_MNT_USER)
                c.plan.m[i].flags |= IPB_MNT_FD;
        ipb_monitor_set_limits(o);
    } else {
        /* User mode: the limits are ours to apply, where the host lets us (ulimits.h). */
        ipb_ulimits_setup(o);
    }
    /* The user's variables as the supervisor read them (env files through fds). */
    po = *o;
    po.env = d->env;
    if (ipb_sandbox_env(&po, mode == SHIM_MODE_KERNEL, &c.env, err) < 0)
        goto fail;
    for (size_t i = 0; argv[i]; i++)
        if (ipb_strv_push(&c.argv, argv[i]) < 0)
            goto oom;
    if (ipb_seccomp_compile(&c.bpf, &c.bpf_len, err) < 0)
        goto fail;
    *ret = c;
    return 0;
oom:
    ipb_error_set(err, ENOMEM, "building the sandbox configuration");
fail:
    shim_config_free(&c);
    return -1;
}
