#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bindpoints.h"
#include "kernel_launch.h"
#include "log.h"
#include "shellgate.h"
#include "shimcfg.h"
#include "zygote_env.h"

int ipb_session_open(ipb_session *s, const ipb_options *o, ipb_proxy *proxy, ipb_error **err) {
    memset(s, 0, sizeof(*s));
    s->opts = o;
    s->proxy = proxy;
    s->ws_fd = -1;
    s->kernel.sb = (ipb_sandbox)IPB_SANDBOX_INIT;
    s->kernel.stderr_fd = s->kernel.rundir_fd = -1;
    s->mcp.dir_fd = -1;
    if (ipb_session_dirs_create(o, true, &s->dirs, err) < 0)
        return -1;
    s->open = true;
    if (ipb_mcp_servers_init(&s->mcp, s->dirs.mcp, err) < 0)
        goto fail;
    if (o->mcp_timeout)
        s->mcp.limits.call_ms = (int)o->mcp_timeout * 1000;
    s->mcp.sandbox_default = o->sandbox_mcp_servers;
    if (!(s->chan = ipb_toolchan_open(&s->mcp, err)))
        goto fail;
    if (o->approve_shell && ipb_shellgate_add(&s->mcp, err) < 0)
        goto fail;
    if (o->mcp_config && ipb_mcp_servers_load_config(&s->mcp, o->mcp_config, err) < 0)
        goto fail;
    /* The trees resolved at start (statedir.c), never their names again. */
    s->ws_fd = openat(s->dirs.workspace_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->ws_fd < 0) {
        ipb_error_set(err, errno, "opening the workspace %s", s->dirs.workspace);
        goto fail;
    }
    /* Host paths of upload_file and download_file are opened below these fds only; a
     * directory created later is not looked up by name. */
    char *missing = NULL;
    if (ipb_host_dirs_open(&s->host_dirs, &o->allowed_dirs, &missing, err) < 0)
        goto fail;
    if (missing) {
        log_warn("upload_file/download_file: %s", missing);
        free(missing);
    }
    s->bind_fds = calloc(o->n_binds + 1, sizeof(int));
    for (size_t i = 0; i < o->n_binds; i++) {
        s->bind_fds[i] = openat(s->dirs.bind_fds[i], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->bind_fds[i] < 0) {
            ipb_error_set(err, errno, "--container-bind: opening %s", o->binds[i].host);
            goto fail;
        }
    }
    /* The sandbox writes these: upload/download never follow a symlink inside them. */
    if (ipb_host_dirs_add_sandbox_root(&s->host_dirs, s->ws_fd, err) < 0)
        goto fail;
    for (size_t i = 0; i < o->n_binds; i++)
        if (ipb_host_dirs_add_sandbox_root(&s->host_dirs, s->bind_fds[i], err) < 0)
            goto fail;
    /* The launcher (kernel_launch.py) with the names it needs from us, fixed in its argv before
     * any code of the kernel runs: SHELL_GATE 1 puts shell commands to approval, 2 also
     * guards subprocess & co. */
    char *launch = ipb_strdupf("MCPDIR = '%s'\nSHELL_GATE = %d\n%s", IPB_SANDBOX_MCPDIR,
                               o->approve_shell ? (o->require_shell_escape ? 2 : 1) : 0, ipb_kernel_launch_py);
    /* --python as resolved on the host (pyhost.h): the same path inside. */
    char *python = s->dirs.python.exec ? s->dirs.python.exec : o->python;
    char *argv[] = {python, (char *)"-c", launch, (char *)"-f", (char *)IPB_SANDBOX_RUNDIR "/connection.json", NULL};
    int built = launch ? ipb_shim_config_build(o, &s->dirs, SHIM_MODE_KERNEL, argv, &s->cfg, err)
                       : ipb_error_set(err, ENOMEM, "building the kernel's launcher");
    free(launch);
    if (built < 0)
        goto fail;
    /* A zygote must read only read-only trees: none when the options point Python's imports or
     * its bytecode cache elsewhere (a sitecustomize on PYTHONPATH, a .pth of a user site the
     * sandbox writes, a stdlib or .pyc files it could plant: architecture.md, "Zygote kernels"),
     * or make the loader, glibc or OpenSSL load code or files from anywhere (zygote_env.c). */
    if (o->zygote)
        s->cfg.zygote = ipb_zygote_env_ok(s->cfg.env.v, s->cfg.env.n, s->no_zygote, sizeof(s->no_zygote));
    /* A standby kernel is forked from the zygote: none without one. */
    s->cfg.standby = o->standby && s->cfg.zygote;
    if (ipb_kernel_open(&s->kernel, &s->cfg, s->dirs.run, s->proxy, s->dirs.id, err) < 0) {
        char why[320];
        if (ipb_kernel_lacks_ipykernel(&s->kernel, why, sizeof(why))) {
            /* Not a kernel death: the interpreter lacks the kernel; say how to add it. */
            bool debian = !strcmp(python, "/usr/bin/python3") || !strncmp(python, "/usr/bin/python3.", 17);
            ipb_error_freep(err);
            ipb_error_set(err, 0,
                          "the interpreter %s cannot import ipykernel, the Jupyter kernel ipybox runs (%s). "
                          "Install it into that environment: `%s -m pip install ipykernel`%s; or name "
                          "another interpreter with --python",
                          python, why, o->python,
                          debian ? " (for Debian's own Python: `sudo apt-get install python3-ipykernel`)" : "");
        }
        goto fail;
    }
    return 0;
fail:
    ipb_session_close(s);
    return -1;
}

/* Keeps the first reason: later ones follow from it. */
static void set_lost(ipb_session *s, char *why) {
    if (!s->lost)
        s->lost = why;
    else
        free(why);
}

void ipb_session_sandbox_lost(ipb_session *s, const char *why) {
    char report[2600];
    ipb_kernel_pump(&s->kernel, NULL);
    ipb_kernel_death_report(&s->kernel, report, sizeof(report));
    set_lost(s, ipb_strdupf("The sandbox ended after the last call (%s; %s)", why,
                            s->kernel.died ? report : "the kernel was still running"));
    ipb_sandbox_destroy(&s->kernel.sb);
}

char *ipb_session_take_lost(ipb_session *s) {
    char *l = s->lost;
    s->lost = NULL;
    return l;
}

char *ipb_session_take_start_note(ipb_session *s) {
    char *zy = NULL;
    if (s->no_zygote[0]) {
        zy = ipb_strdupf("No zygote in this session: its options set %s, through which code the sandbox writes "
                         "could run in it; each kernel starts the slow way.",
                         s->no_zygote);
        s->no_zygote[0] = '\0';
    } else if (s->kernel.zygote_note[0]) {
        zy = ipb_strdupf("%s", s->kernel.zygote_note);
        s->kernel.zygote_note[0] = '\0';
    }
    if (s->kernel.rescue_note[0]) {
        char *with = ipb_strdupf("%s%s%s", zy ? zy : "", zy ? " " : "", s->kernel.rescue_note);
        s->kernel.rescue_note[0] = '\0';
        free(zy);
        zy = with;
    }
    if (!s->kernel.start_note[0])
        return zy;
    char *note = ipb_strdupf("%s%s%s", zy ? zy : "", zy ? " " : "", s->kernel.start_note);
    s->kernel.start_note[0] = '\0';
    free(zy);
    return note;
}

int ipb_session_ensure_kernel(ipb_session *s, ipb_error **err) {
    if (s->kernel.sb.fd < 0) {
        /* The sandbox itself is gone (its PID 1 was killed): build a new one. */
        if (!s->lost && !s->end_told)
            set_lost(s, ipb_strdupf("The sandbox ended after the last call"));
        s->end_told = false;
        ipb_kernel_close(&s->kernel);
        return ipb_kernel_open(&s->kernel, &s->cfg, s->dirs.run, s->proxy, s->dirs.id, err);
    }
    if (!s->kernel.running) {
        if (s->kernel.died) {
            /* It ended between calls (killed, out of memory, os._exit in a thread...). */
            char report[2600];
            ipb_kernel_death_report(&s->kernel, report, sizeof(report));
            set_lost(s, ipb_strdupf("After the last call: %s", report));
        }
        return ipb_kernel_restart(&s->kernel, err);
    }
    return 0;
}

int ipb_session_reset(ipb_session *s, ipb_error **err) {
    /* A fresh kernel is what was asked for: an earlier death no longer matters. */
    free(ipb_session_take_lost(s));
    ipb_mcp_servers_disconnect(&s->mcp);
    if (s->kernel.sb.fd < 0)
        return ipb_session_ensure_kernel(s, err);
    return ipb_kernel_restart(&s->kernel, err);
}

void ipb_session_close(ipb_session *s) {
    if (!s->open)
        return;
    ipb_kernel_close(&s->kernel);
    free(ipb_session_take_lost(s));
    ipb_toolchan_close(s->chan);
    s->chan = NULL;
    if (s->mcp.dir_fd >= 0 || s->mcp.pool)
        ipb_mcp_servers_free(&s->mcp);
    shim_config_free(&s->cfg);
    if (s->ws_fd >= 0)
        close(s->ws_fd);
    if (s->bind_fds) {
        for (size_t i = 0; i < s->opts->n_binds; i++)
            if (s->bind_fds[i] > 0)
                close(s->bind_fds[i]);
        free(s->bind_fds);
    }
    ipb_host_dirs_free(&s->host_dirs);
    ipb_bind_points_remove(&s->dirs, s->opts); /* the sandbox is gone (ipb_kernel_close) */
    ipb_session_dirs_remove(&s->dirs);
    s->open = false;
}

void ipb_session_locate(ipb_session *s, const char *relpath, int *ret_basefd, const char **ret_sub) {
    *ret_basefd = s->ws_fd;
    *ret_sub = relpath;
    size_t best = 0;
    for (size_t i = 0; i < s->opts->n_binds; i++) {
        const char *rel = s->opts->binds[i].rel;
        size_t l = strlen(rel);
        while (l > 1 && rel[l - 1] == '/')
            l--;
        if (l > best && !strncmp(relpath, rel, l) && relpath[l] == '/') {
            best = l;
            *ret_basefd = s->bind_fds[i];
            *ret_sub = relpath + l + 1;
        }
    }
}
