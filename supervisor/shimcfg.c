#include "shimcfg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mon_proto.h"
#include "monclient.h"
#include "mountplan.h"
#include "seccomp_policy.h"
#include "ulimits.h"

int ipb_shim_config_build(const ipb_options *o, const ipb_session_dirs *d, uint32_t mode, char *const *argv,
                          shim_config *ret, ipb_error **err) {
    shim_config c;
    memset(&c, 0, sizeof(c));
    c.mode = mode;
    c.uid = getuid();
    c.gid = getgid();
    if (!(c.root = strdup(d->root)) || !(c.hostname = strdup(IPB_SANDBOX_HOSTNAME)) ||
        !(c.cwd = strdup(mode == SHIM_MODE_KERNEL ? "/" : "/app")))
        goto oom;
    ipb_plan_input in = {.opts = o, .workspace = d->workspace, .home = d->home, .rundir = d->run, .mcpdir = d->mcp};
    if (ipb_mount_plan_build(&in, &c.plan, err) < 0)
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
    if (ipb_sandbox_env(o, mode == SHIM_MODE_KERNEL, &c.env, err) < 0)
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
