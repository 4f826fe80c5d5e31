#include "statedir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdio.h"
#include "tree.h"

int ipb_state_dir(char **ret, ipb_error **err) {
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    char *p = NULL;
    int r;
    if (xdg && xdg[0] == '/')
        r = asprintf(&p, "%s/ipybox", xdg);
    else if (home && home[0] == '/')
        r = asprintf(&p, "%s/.local/state/ipybox", home);
    else
        return ipb_error_set(err, 0, "neither XDG_STATE_HOME nor HOME is set to an absolute path; "
                                     "set one so that ipybox has a place for session state");
    if (r < 0)
        return ipb_error_set(err, ENOMEM, "state directory");
    if ((r = ipb_mkdir_p(p, 0700)) < 0) {
        ipb_error_set(err, -r, "creating the state directory %s", p);
        free(p);
        return -1;
    }
    *ret = p;
    return 0;
}

static int sub(char **ret, const char *base, const char *name, ipb_error **err) {
    if (asprintf(ret, "%s/%s", base, name) < 0)
        return ipb_error_set(err, ENOMEM, "session directories");
    if (mkdir(*ret, 0700) < 0 && errno != EEXIST)
        return ipb_error_set(err, errno, "creating %s", *ret);
    return 0;
}

int ipb_session_dirs_create(const ipb_options *o, bool kernel, ipb_session_dirs *ret, ipb_error **err) {
    ipb_session_dirs d;
    memset(&d, 0, sizeof(d));
    unsigned char rnd[8];
    cleanup_free char *state = NULL;
    if (ipb_random(rnd, sizeof(rnd)) < 0)
        return ipb_error_set(err, errno, "generating a session id");
    ipb_hex(rnd, sizeof(rnd), d.id);
    if (ipb_state_dir(&state, err) < 0)
        return -1;
    cleanup_free char *sessions = NULL;
    if (sub(&sessions, state, "sessions", err) < 0)
        goto fail;
    if (sub(&d.base, sessions, d.id, err) < 0 || sub(&d.root, d.base, "root", err) < 0 ||
        sub(&d.home, d.base, "home", err) < 0 || (kernel && (sub(&d.run, d.base, "run", err) < 0 || sub(&d.mcp, d.base, "mcp", err) < 0)))
        goto fail;
    char pidbuf[32];
    int n = snprintf(pidbuf, sizeof(pidbuf), "%d\n", (int)getpid());
    cleanup_free char *pidfile = NULL;
    if (asprintf(&pidfile, "%s/pid", d.base) < 0 || ipb_write_file(pidfile, pidbuf, (size_t)n, 0600) < 0) {
        ipb_error_set(err, errno, "writing the session's pid file");
        goto fail;
    }
    if (o->workspace) {
        int r = ipb_mkdir_p(o->workspace, 0755);
        if (r < 0) {
            ipb_error_set(err, -r, "--workspace: creating %s", o->workspace);
            goto fail;
        }
        d.workspace = realpath(o->workspace, NULL);
        if (!d.workspace) {
            ipb_error_set(err, errno, "--workspace: %s", o->workspace);
            goto fail;
        }
        struct stat st;
        if (stat(d.workspace, &st) < 0 || !S_ISDIR(st.st_mode)) {
            ipb_error_set(err, ENOTDIR, "--workspace: %s", o->workspace);
            goto fail;
        }
    } else {
        cleanup_free char *ws = NULL;
        cleanup_free char *wsroot = NULL;
        if (sub(&wsroot, state, "workspaces", err) < 0 || sub(&ws, wsroot, d.id, err) < 0)
            goto fail;
        chmod(ws, 0755);
        d.workspace = steal_ptr(ws);
        d.workspace_owned = true;
    }
    for (size_t i = 0; i < o->n_binds; i++) {
        int r = ipb_mkdir_p(o->binds[i].host, 0755);
        if (r < 0 && r != -EEXIST && r != -ENOTDIR) {
            ipb_error_set(err, -r, "--container-bind: creating %s", o->binds[i].host);
            goto fail;
        }
    }
    *ret = d;
    return 0;
fail:
    ipb_session_dirs_remove(&d);
    return -1;
}

void ipb_session_dirs_remove(ipb_session_dirs *d) {
    if (d->base)
        ipb_rm_rf(d->base);
    if (d->workspace && d->workspace_owned)
        rmdir(d->workspace); /* only when empty: the user's files stay */
    free(d->base);
    free(d->root);
    free(d->home);
    free(d->run);
    free(d->mcp);
    free(d->workspace);
    memset(d, 0, sizeof(*d));
}

int ipb_session_dirs_reap_stale(void) {
    cleanup_free char *state = NULL;
    ipb_error *err = NULL;
    if (ipb_state_dir(&state, &err) < 0) {
        ipb_error_free(err);
        return 0;
    }
    cleanup_free char *sessions = NULL;
    if (asprintf(&sessions, "%s/sessions", state) < 0)
        return 0;
    DIR *dir = opendir(sessions);
    if (!dir)
        return 0;
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.')
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s/pid", sessions, de->d_name);
        char *text = NULL;
        long pid = 0;
        if (ipb_read_file(path, 64, &text, NULL) == 0) {
            pid = strtol(text, NULL, 10);
            free(text);
        }
        if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM))
            continue;
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", sessions, de->d_name);
        /* No pid file yet may mean a session being created right now. */
        if (pid <= 0 && (stat(path, &st) < 0 || st.st_mtime > time(NULL) - 60))
            continue;
        snprintf(path, sizeof(path), "%s/%s", sessions, de->d_name);
        if (ipb_rm_rf(path) == 0)
            removed++;
    }
    closedir(dir);
    return removed;
}
