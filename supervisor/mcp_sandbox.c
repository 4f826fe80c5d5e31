#include "mcp_sandbox.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "mcp_client.h"
#include "mcp_sandbox_check.h"
#include "monclient.h"
#include "statedir.h"
#include "tree.h"
#include "ulimits.h"

/* This program as `ipybox`, never looked up on PATH. ipyboxd is the same binary under another
 * name (it looks at its name, and `ipyboxd run` is not a command), so a worker of ipyboxd
 * runs the `ipybox` next to it, once it is sure that is the same file. */
static int self_exe(char *buf, size_t len, ipb_error **err) {
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n <= 0 || (size_t)n >= len - 1)
        return ipb_error_set(err, n < 0 ? errno : ENAMETOOLONG, "finding this program's binary");
    buf[n] = '\0';
    char *base = strrchr(buf, '/');
    if (!base || strcmp(base + 1, "ipyboxd"))
        return 0;
    struct stat self, other;
    if (stat("/proc/self/exe", &self) < 0)
        return ipb_error_set(err, errno, "finding this program's binary");
    if ((size_t)(base + 1 - buf) + sizeof("ipybox") > len)
        return ipb_error_set(err, ENAMETOOLONG, "finding ipybox next to %s", buf);
    strcpy(base + 1, "ipybox");
    if (stat(buf, &other) < 0 || other.st_dev != self.st_dev || other.st_ino != self.st_ino)
        return ipb_error_set(err, ENOENT,
                             "%s is not this program (ipyboxd and ipybox are one binary, installed as "
                             "two names): sandboxed MCP servers need it",
                             buf);
    return 0;
}

/* The server's private home, made when missing (0700). */
static char *private_home(const char *name, ipb_error **err) {
    cleanup_free char *state = NULL;
    char *home = NULL;
    if (ipb_state_dir(&state, err) < 0)
        return NULL;
    if (asprintf(&home, "%s/" IPB_MCP_HOMES "/%s", state, name) < 0) {
        ipb_error_set(err, ENOMEM, "the server's home");
        return NULL;
    }
    int r = ipb_mkdir_p(home, 0700);
    if (r < 0) {
        ipb_error_set(err, -r, "creating %s", home);
        free(home);
        return NULL;
    }
    return home;
}

static int push(json_t *a, const char *s) { return json_array_append_new(a, json_string(s)); }

static int push_list(json_t *args, const char *opt, json_t *list) {
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        if (push(args, opt) < 0 || json_array_append(args, v) < 0)
            return -1;
    }
    return 0;
}

/* Each variable of env as IPYBOX_MCP_ENV_<n> in out and a --container-env-from in args. A name
 * given again (in "sandbox"."env" after "env") takes the later value. */
static int pass_env(json_t *args, json_t *out, json_t *merged) {
    const char *k;
    json_t *v;
    size_t n = 0;
    json_object_foreach(merged, k, v) {
        char var[64], spec[512];
        snprintf(var, sizeof(var), IPB_MCP_SANDBOX_ENV_PREFIX "%zu", n++);
        if ((size_t)snprintf(spec, sizeof(spec), "%s=%s", k, var) >= sizeof(spec))
            return -1;
        if (json_object_set(out, var, v) < 0 || push(args, "--container-env-from") < 0 || push(args, spec) < 0)
            return -1;
    }
    return 0;
}

json_t *ipb_mcp_sandbox_wrap(const char *name, json_t *params, bool by_default, ipb_error **err) {
    json_t *command = json_object_get(params, "command");
    json_t *sandbox = json_object_get(params, "sandbox");
    if (!command)
        return json_incref(params); /* an HTTP server */
    if (by_default && json_is_false(sandbox)) {
        ipb_error_set(err, EINVAL,
                      "\"sandbox\": false is refused: this session runs every stdio MCP server in a "
                      "sandbox (--sandbox-mcp-servers)");
        return NULL;
    }
    if (!ipb_mcp_sandbox_on(sandbox, by_default)) {
        json_t *plain = json_deep_copy(params);
        if (plain)
            json_object_del(plain, "sandbox");
        return plain;
    }
    /* The default sandbox: the check of an explicit one ran with the params (env names, cwd). */
    if (!sandbox && ipb_mcp_sandbox_check(params, json_true(), err) < 0)
        return NULL;
    /* `ipybox run` refuses these too (on fds), but only its exit status would tell it here. */
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(json_is_object(sandbox) ? sandbox : NULL, "allowed_dirs"), i, a) {
        char what[64];
        snprintf(what, sizeof(what), "'sandbox'.'allowed_dirs'[%zu]", i);
        if (ipb_host_dir_check(what, json_string_value(a), err) < 0)
            return NULL;
    }
    char exe[PATH_MAX];
    if (self_exe(exe, sizeof(exe), err) < 0)
        return NULL;
    cleanup_free char *home = private_home(name, err);
    if (!home)
        return NULL;
    json_t *sb = json_is_object(sandbox) ? sandbox : NULL;
    json_t *merged = json_object();
    json_t *env = json_object();
    json_t *args = json_array();
    json_t *ret = json_object();
    if (!merged || !env || !args || !ret)
        goto oom;
    json_t *penv = json_object_get(params, "env"), *senv = json_object_get(sb, "env");
    if ((penv && json_object_update(merged, penv) < 0) || (senv && json_object_update(merged, senv) < 0))
        goto oom;
    /* `ipybox run` keeps its sessions where this process does. */
    const char *xdg = getenv("XDG_STATE_HOME");
    if (xdg && xdg[0] == '/' && json_object_set_new(env, "XDG_STATE_HOME", json_string(xdg)) < 0)
        goto oom;
    if (push(args, "run") < 0 || push(args, "--home") < 0 || push(args, home) < 0 ||
        push_list(args, "--allowed-domain", json_object_get(sb, "allowed_domains")) < 0 ||
        push_list(args, "--host-dir", json_object_get(sb, "allowed_dirs")) < 0)
        goto oom;
    json_t *cwd = json_object_get(params, "cwd");
    if (cwd && (push(args, "--cwd") < 0 || json_array_append(args, cwd) < 0))
        goto oom;
    if (pass_env(args, env, merged) < 0 || push(args, "--") < 0 || json_array_append(args, command) < 0)
        goto oom;
    json_array_foreach(json_object_get(params, "args"), i, a) {
        if (json_array_append(args, a) < 0)
            goto oom;
    }
    /* `ipybox run` said what its limits are at the session's start already. */
    if (json_object_set_new(env, IPB_ULIMITS_TOLD_ENV, json_string("1")) < 0 ||
        json_object_set_new(env, IPB_MCP_SANDBOX_RUN_ENV, json_string("1")) < 0 ||
        json_object_set_new(ret, "command", json_string(exe)) < 0 || json_object_set(ret, "args", args) < 0 ||
        json_object_set(ret, "env", env) < 0)
        goto oom;
    json_decref(merged);
    json_decref(env);
    json_decref(args);
    return ret;
oom:
    json_decref(merged);
    json_decref(env);
    json_decref(args);
    json_decref(ret);
    ipb_error_set(err, ENOMEM, "preparing the sandbox of MCP server '%s'", name);
    return NULL;
}

int ipb_mcp_sandbox_start_hook(const char *name, const char *path, char *const *argv, ipb_mcpc_stdio_extra *extra,
                               ipb_error **err) {
    char exe[PATH_MAX];
    if (!argv[0] || !argv[1] || strcmp(argv[1], "run") || self_exe(exe, sizeof(exe), NULL) < 0 || strcmp(path, exe))
        return 0; /* not `ipybox run` */
    if (ipb_monitor_fd() < 0)
        return 0; /* user mode */
    int fd = ipb_monitor_adopt(err);
    if (fd < 0)
        return ipb_error_wrap(err, "its sandbox is the monitor's to make, as the kernel's");
    snprintf(extra->env, sizeof(extra->env), "%s=3", IPB_MONITOR_FD_ENV);
    extra->fd = fd;
    return 0;
}
