/* ipybox doctor's check of the kernel's interpreter: run on the host as the sandbox would run
 * it (-s: no user site-packages, which the sandbox does not see; -E: no PYTHON* variables),
 * it reports its version and whether ipykernel imports, and whether matplotlib and pip are
 * there. Bounded in time and output: the path may name any program. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "doctor.h"
#include "pyenv.h"
#include "pyhost.h"
#include "statedir.h"

#define PROBE_TIMEOUT_MS 30000
#define PROBE_MAX_OUTPUT 8192

static const char probe[] =
    "import sys, importlib.util\n"
    "print('ipybox-doctor python', sys.version.split()[0])\n"
    "print('ipybox-doctor env', 'venv' if sys.prefix != sys.base_prefix else 'system' "
    "if sys.prefix.startswith('/usr') else 'other')\n"
    "try:\n"
    "    import ipykernel\n"
    "    print('ipybox-doctor ipykernel ok', getattr(ipykernel, '__version__', '?'))\n"
    "except Exception as e:\n"
    "    print('ipybox-doctor ipykernel missing', type(e).__name__, str(e).replace('\\n', ' ')[:160])\n"
    "for m in ('matplotlib', 'pip'):\n"
    "    try:\n"
    "        print('ipybox-doctor', m, 'ok' if importlib.util.find_spec(m) else 'missing')\n"
    "    except Exception as e:\n"
    "        print('ipybox-doctor', m, 'missing', type(e).__name__)\n";

/* Runs python with the probe; its stdout and stderr in out (NUL-terminated). Returns the exit
 * status, -1 when it could not start (errno), -2 when it did not end in time (it is killed). */
static int run_probe(const char *python, char *out, size_t outlen) {
    int p[2];
    out[0] = '\0';
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_adddup2(&fa, p[1], 2);
    char *argv[] = {(char *)python, (char *)"-s", (char *)"-E", (char *)"-c", (char *)probe, NULL};
    char *envp[] = {(char *)"PATH=/usr/local/bin:/usr/bin:/bin", (char *)"LC_ALL=C.UTF-8", NULL};
    /* Its own process group, so that what it started goes with it (below). */
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    pid_t pid;
    int r = posix_spawn(&pid, python, &fa, &at, argv, envp);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (r != 0) {
        close(p[0]);
        errno = r;
        return -1;
    }
    size_t got = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool timed_out = false;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long left = PROBE_TIMEOUT_MS - ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd pf = {p[0], POLLIN, 0};
        int pr = left > 0 ? poll(&pf, 1, (int)left) : 0;
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            timed_out = true;
            break;
        }
        char sink[4096];
        size_t room = outlen - 1 - got;
        ssize_t n = read(p[0], room ? out + got : sink, room ? room : sizeof(sink));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (room)
            got += (size_t)n;
    }
    out[got] = '\0';
    close(p[0]);
    /* The interpreter's group, processes it forked included (the probe itself forks none). */
    kill(-pid, SIGKILL);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (timed_out)
        return -2;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The value after "ipybox-doctor KEY " on a line of out, up to the line's end, in val. */
static bool probe_value(const char *out, const char *key, char *val, size_t len) {
    char tag[64];
    snprintf(tag, sizeof(tag), "ipybox-doctor %s ", key);
    for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (!strncmp(l, tag, strlen(tag))) {
            l += strlen(tag);
            snprintf(val, len, "%.*s", (int)strcspn(l, "\n"), l);
            return true;
        }
    }
    return false;
}

/* Debian's interpreter (its prefix under /usr) gets its packages from apt; a venv from its
 * own pip or from Debian's packages through --system-site-packages; any other from its pip. */
static void install_hint(const char *python, const char *env, const char *module, char *out, size_t len) {
    if (!strcmp(env, "system"))
        snprintf(out, len, "apt-get install python3-%s", module);
    else if (!strcmp(module, "pip"))
        snprintf(out, len, "%s -m ensurepip", python);
    else if (!strcmp(env, "venv"))
        snprintf(out, len,
                 "%s -m pip install %s, or make the venv with --system-site-packages over Debian's "
                 "python3-%s (apt-get install python3-%s)",
                 python, module, module, module);
    else
        snprintf(out, len, "%s -m pip install %s", python, module);
}

/* The tree among those sandboxes could write (statedir.h) that holds p, or NULL. */
static const char *sandbox_tree_of(const ipb_strv *trees, const char *p) {
    for (size_t i = 0; p && i < trees->n; i++)
        if (ipb_path_within_tree(p, trees->v[i]))
            return trees->v[i];
    return NULL;
}

/* Whether the probe may run python on the host: 1 yes; 0 no, told (a WARN: the sandbox check
 * still runs it, inside a sandbox); -1 no, told (a FAIL: ipybox mcp refuses it too). The
 * interpreter runs its environment's code at start (site-packages' .pth files, sitecustomize),
 * and -s -E do not stop that: one whose executable or environment lies in a tree a sandbox
 * could write (a venv made in a workspace) would run kernel code on the host, outside any
 * sandbox, with the user's whole account (pyhost.h). So the probe runs only what the session
 * would resolve, and none of it inside such a tree. */
static int host_runnable(doctor *d, const char *python) {
    ipb_error *err = NULL, *trees_err = NULL;
    cleanup_free char *state = NULL;
    ipb_python_env env = {0};
    ipb_strv trees = {0};
    bool have_trees = false;
    if (ipb_state_dir(&state, &err) == 0) {
        have_trees = ipb_sandbox_trees(&trees, &trees_err) == 0;
        if (ipb_python_env_resolve(python, state, getenv("HOME"), have_trees ? &trees : NULL, &env, &err) < 0 &&
            have_trees)
            ipb_strv_free(&trees);
    }
    if (err) {
        doctor_say(d, DOCTOR_FAIL, "python", "%s; ipybox mcp refuses it too", ipb_error_msg(err));
        ipb_error_free(err);
        ipb_error_free(trees_err);
        return -1;
    }
    if (!have_trees) {
        doctor_say(d, DOCTOR_WARN, "python",
                   "%s: not run on the host, since whether a sandbox could have written "
                   "it cannot be told (%s); the sandbox check below runs it inside a sandbox",
                   python, ipb_error_msg(trees_err));
        ipb_error_free(trees_err);
        ipb_python_env_free(&env);
        return 0;
    }
    cleanup_free char *canon = realpath(python, NULL);
    const char *tree = sandbox_tree_of(&trees, canon), *what = canon;
    for (size_t i = 0; !tree && i < env.n; i++)
        if ((tree = sandbox_tree_of(&trees, env.prefix[i])))
            what = env.prefix[i];
    if (tree)
        doctor_say(d, DOCTOR_WARN, "python",
                   "%s: not run on the host: %s lies in %s, a tree that a sandbox could "
                   "write (a workspace or bind of this or an earlier session), and its code would run outside any "
                   "sandbox; the sandbox check below runs it inside a sandbox (to use it, ipybox mcp binds it "
                   "read-only into the sandbox)",
                   python, what, tree);
    ipb_strv_free(&trees);
    ipb_python_env_free(&env);
    return tree ? 0 : 1;
}

bool doctor_check_python(doctor *d, const char *python) {
    struct stat st;
    int e = stat(python, &st) < 0 ? errno : !S_ISREG(st.st_mode) ? EISDIR : access(python, X_OK) < 0 ? errno : 0;
    if (e) {
        doctor_say(d, DOCTOR_FAIL, "python",
                   "%s: %s; name an interpreter with --python PATH (Debian's: apt-get "
                   "install python3 python3-ipykernel)",
                   python, e == EISDIR ? "not a regular file" : strerror(e));
        return false;
    }
    int runnable = host_runnable(d, python);
    if (runnable <= 0)
        return runnable == 0;
    char out[PROBE_MAX_OUTPUT], version[64], state[256] = "", fix[PATH_MAX + 64];
    int r = run_probe(python, out, sizeof(out));
    if (r == -1 || r == -2 || !probe_value(out, "python", version, sizeof(version))) {
        char first[200];
        snprintf(first, sizeof(first), "%.*s", (int)strcspn(out, "\n"), out);
        doctor_say(d, DOCTOR_FAIL, "python",
                   "%s is not a Python interpreter ipybox can use: %s; name one with "
                   "--python PATH (Debian's: apt-get install python3 python3-ipykernel)",
                   python,
                   r == -1    ? strerror(errno)
                   : r == -2  ? "it did not answer within 30 s"
                   : first[0] ? first
                              : "it printed nothing");
        return false;
    }
    char env[16] = "other";
    probe_value(out, "env", env, sizeof(env));
    bool ok = true;
    if (probe_value(out, "ipykernel", state, sizeof(state)) && !strncmp(state, "ok", 2)) {
        doctor_say(d, DOCTOR_OK, "python", "%s (Python %s) imports ipykernel %s", python, version, state + 3);
    } else {
        install_hint(python, env, "ipykernel", fix, sizeof(fix));
        doctor_say(d, DOCTOR_FAIL, "python",
                   "%s (Python %s) cannot import ipykernel (%s), which runs the kernel: "
                   "%s",
                   python, version, state[0] && strncmp(state, "missing ", 8) == 0 ? state + 8 : "no answer", fix);
        ok = false;
    }
    static const char *const optional[][2] = {
        {"matplotlib", "plots in results"},
        {"pip", "!pip install in cells"},
    };
    for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++) {
        const char *m = optional[i][0];
        if (probe_value(out, m, state, sizeof(state)) && !strncmp(state, "ok", 2)) {
            doctor_say(d, DOCTOR_OK, m, "importable by %s (%s)", python, optional[i][1]);
        } else {
            install_hint(python, env, m, fix, sizeof(fix));
            doctor_say(d, DOCTOR_WARN, m, "not importable by %s, so no %s: %s", python, optional[i][1], fix);
        }
    }
    return ok;
}
