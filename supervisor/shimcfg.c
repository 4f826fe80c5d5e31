#include "shimcfg.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "mountplan.h"
#include "seccomp_policy.h"

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
    ipb_plan_input in = {.opts = o, .workspace = d->workspace, .home = d->home, .rundir = d->run};
    if (ipb_mount_plan_build(&in, &c.plan, err) < 0)
        goto fail;
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
