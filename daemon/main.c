/* `ipyboxd`: options, the control socket, then the loop. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"
#include "daemon.h"
#include "fdio.h"
#include "log.h"
#include "monclient.h"
#include "monitor.h"
#include "options.h"
#include "statedir.h"
#include "strbuf.h"
#include "ulimits.h"
#include "version.h"

#define DEFAULT_IDLE_TIMEOUT_S 1800L
#define DEFAULT_MAX_SESSIONS 64U
#define DEFAULT_MAX_CLIENTS 256U

static void usage(FILE *f) {
    fprintf(f,
            "Usage: ipyboxd --user [DAEMON OPTIONS] [SANDBOX OPTIONS]\n\n"
            "The ipybox supervisor as a daemon. Clients connect to its unix socket and speak MCP there\n"
            "(newline-delimited JSON-RPC, the same tools as `ipybox mcp`), plus session management:\n"
            "  ipybox/createSession {name?, args?, cwd?}  a new session (named, or private to this\n"
            "                                             connection), answered once its kernel is up\n"
            "  ipybox/attachSession {name}                use an existing named session\n"
            "  ipybox/listSessions                        this user's sessions\n"
            "  ipybox/closeSession {name?}                stop a session and its sandbox\n"
            "A connection's first tool call without a session starts one private to that connection,\n"
            "closed when it disconnects. Named sessions outlive their clients until closed, or until\n"
            "no client has used them for --idle-timeout. `ipybox mcp` uses a daemon it finds at the\n"
            "socket below and runs its own supervisor when there is none.\n\n"
            "Each session runs in its own worker process (`ipybox mcp --embedded`, re-executed from\n"
            "this binary) with its own sandbox, kernel and egress proxy.\n\n"
            "Daemon options:\n"
            "  --user                 run for the invoking user only (as root without it: the system\n"
            "                         service, see `ipyboxd --help` as root)\n"
            "  --config FILE          (the system service, as root) its configuration (default\n"
            "                         " IPBM_DEFAULT_CONFIG ")\n"
            "  --socket PATH          listen here (default: $XDG_RUNTIME_DIR/ipybox/ipybox.sock; without\n"
            "                         XDG_RUNTIME_DIR, /run/user/$UID/ipybox/ipybox.sock)\n"
            "  --idle-timeout SECONDS close named sessions no client has used for this long (default %ld)\n"
            "  --max-sessions N       sessions at once (default %u)\n"
            "  --warm N               keep N sessions started ahead with the options below alone, so\n"
            "                         that a createSession without args, or a connection's first call,\n"
            "                         gets a running kernel at once (default 0; each holds a sandbox and\n"
            "                         its kernel, about 45 MiB, and counts against --max-sessions)\n"
            "  --max-clients N        connections at once (default %u)\n"
            "  -v, --verbose          also log every client and debugging detail (-vv: the same)\n"
            "  -V, --version          print the version and exit\n"
            "  -h, --help             this text\n\n"
            "Sandbox options below are defaults for every session; a client's createSession args add to\n"
            "them.\n\n%s",
            DEFAULT_IDLE_TIMEOUT_S, DEFAULT_MAX_SESSIONS, DEFAULT_MAX_CLIENTS, ipb_options_help());
}

bool ipbd_valid_name(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > IPBD_NAME_MAX || name[0] == '.' || name[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
              ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

static int parse_count(const char *opt, const char *v, long lo, long hi, long *ret) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi) {
        log_error("%s '%s': expected a whole number from %ld to %ld", opt, v, lo, hi);
        return -1;
    }
    *ret = n;
    return 0;
}

/* The socket's directory is ours alone: made 0700 if missing, refused if someone else owns
 * it or others may write it. */
static int prepare_dir(const char *sock) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", sock);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        log_error("cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        log_error("%s is not a directory", dir);
        return -1;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 022)) {
        log_error("%s belongs to uid %d or others may write it; the socket's directory must be this user's alone", dir,
                  (int)st.st_uid);
        return -1;
    }
    return 0;
}

/* Binds the socket (mode 0600). A socket file left by a daemon that died is replaced; one a
 * live daemon answers on is not. */
static int bind_socket(const char *path) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        log_error("socket path too long: %s", path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        log_error("socket: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            log_error("%s exists and is not a socket", path);
            return -1;
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int live = probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        if (probe >= 0)
            close(probe);
        if (live) {
            log_error("another ipyboxd is listening at %s", path);
            return -1;
        }
        unlink(path);
    }
    mode_t old = umask(0177);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (r < 0 || listen(fd, 128) < 0) {
        log_error("cannot listen at %s: %s", path, strerror(errno));
        if (r == 0)
            unlink(path); /* bound but not listening: leave no dead socket file */
        return -1;
    }
    int ret = fd;
    fd = -1;
    return ret;
}

int ipbd_main(int argc, char **argv) {
    ipb_log_init("ipyboxd", IPB_LOG_WARN);
    bool user = false, frontend = false, help = false;
    int verbose = 0;
    const char *sock_opt = NULL;
    long idle = DEFAULT_IDLE_TIMEOUT_S, max_sessions = DEFAULT_MAX_SESSIONS, max_clients = DEFAULT_MAX_CLIENTS;
    long warm = 0;
    /* Daemon options are taken out; everything else is a sandbox option, checked here. */
    char **sargs = calloc((size_t)argc + 1, sizeof(char *));
    int ns = 0;
    if (!sargs)
        return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = !strcmp(a, "--socket") || !strcmp(a, "--idle-timeout") || !strcmp(a, "--max-sessions") ||
                     !strcmp(a, "--max-clients") || !strcmp(a, "--warm");
        if (takes && !v) {
            log_error("%s needs a value (see ipyboxd --help)", a);
            free(sargs);
            return 2;
        }
        int bad = 0;
        if (!strcmp(a, "--user"))
            user = true;
        else if (!strcmp(a, "--frontend"))
            frontend = user = true; /* started by the system service's monitor, as the user */
        else if (!strcmp(a, "--verbose") || (a[0] == '-' && a[1] == 'v' && !a[strspn(a + 1, "v") + 1]))
            verbose += !strcmp(a, "--verbose") ? 1 : (int)strlen(a) - 1; /* -v, -vv, ... */
        else if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
            printf("ipyboxd %s\n", IPYBOX_VERSION);
            free(sargs);
            return 0;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            help = true;
        else if (!strcmp(a, "--socket"))
            sock_opt = v;
        else if (!strcmp(a, "--idle-timeout"))
            bad = parse_count(a, v, 1, 7L * 24 * 3600, &idle);
        else if (!strcmp(a, "--max-sessions"))
            bad = parse_count(a, v, 1, 10000, &max_sessions);
        else if (!strcmp(a, "--max-clients"))
            bad = parse_count(a, v, 1, 100000, &max_clients);
        else if (!strcmp(a, "--warm"))
            bad = parse_count(a, v, 0, 10000, &warm);
        else
            sargs[ns++] = argv[i];
        if (bad) {
            free(sargs);
            return 2;
        }
        if (takes)
            i++;
    }
    if (help && (user || geteuid() != 0)) {
        usage(stdout);
        free(sargs);
        return 0;
    }
    if (!user) {
        free(sargs);
        return ipbm_main(argc, argv); /* as root, --help too: the system service's */
    }
    if (warm > max_sessions) {
        log_error("--warm %ld is more than --max-sessions %ld", warm, max_sessions);
        free(sargs);
        return 2;
    }
    ipb_log_init(frontend ? "ipyboxd-frontend" : "ipyboxd", verbose ? IPB_LOG_DEBUG : IPB_LOG_INFO);
    struct stat fst;
    if (frontend &&
        (!sock_opt || fstat(3, &fst) < 0 || !S_ISSOCK(fst.st_mode) || fstat(4, &fst) < 0 || !S_ISSOCK(fst.st_mode))) {
        log_error("--frontend is for the system service's own use");
        free(sargs);
        return 2;
    }
    /* The sandbox options every session gets must be valid now, not at the first session. */
    ipb_options o;
    ipb_error *err = NULL;
    int next = 0;
    ipb_options_init(&o);
    if (ipb_options_parse(&o, ns, sargs, &next, &err) < 0 || (next < ns && !err) ||
        ipb_options_finish(&o, getenv("HOME"), &err) < 0) {
        if (err)
            log_error("%s", ipb_error_msg(err));
        else
            log_error("unexpected argument '%s' (see ipyboxd --help)", sargs[next]);
        ipb_error_free(err);
        ipb_options_free(&o);
        free(sargs);
        return 2;
    }
    if (!frontend && geteuid() != 0) {
        /* Said once here, at start, rather than by each session's worker (root's sessions get
         * their limits from its private monitor). */
        ipb_ulimits_setup(&o);
        setenv(IPB_ULIMITS_TOLD_ENV, "1", 1);
    }
    ipb_options_free(&o);

    char *sock = sock_opt ? strdup(sock_opt) : ipbd_default_socket();
    if (!sock) {
        log_error("XDG_RUNTIME_DIR is not set and /run/user/%u is missing or not this user's alone: name the socket "
                  "with --socket PATH",
                  (unsigned)geteuid());
        free(sargs);
        return 2;
    }
    char self[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (sl <= 0) {
        log_error("cannot find this program's binary: %s", strerror(errno));
        free(sock);
        free(sargs);
        return 1;
    }
    self[sl] = '\0';
    /* Workers run as `ipybox` (the same file under its other name), so that their process
     * name says what they are and `pgrep ipyboxd` finds only the daemon. */
    static char sibling[PATH_MAX + 8];
    const char *worker_exe = self;
    struct stat a, b;
    char *slash = strrchr(self, '/');
    if (slash && snprintf(sibling, sizeof(sibling), "%.*s/ipybox", (int)(slash - self), self) < (int)sizeof(sibling) &&
        stat(sibling, &a) == 0 && stat(self, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev)
        worker_exe = sibling;
    int stale = ipb_session_dirs_reap_stale();
    if (stale)
        log_warn("removed %d session director%s left by an earlier run", stale, stale == 1 ? "y" : "ies");
    int lfd = frontend ? 3 : prepare_dir(sock) < 0 ? -1 : bind_socket(sock);
    if (frontend) {
        fcntl(3, F_SETFD, FD_CLOEXEC);
        fcntl(4, F_SETFD, FD_CLOEXEC);
        ipb_set_nonblock(3, 1);
    }
    if (lfd < 0) {
        free(sock);
        free(sargs);
        return 1;
    }
    struct stat mine = {0};
    stat(sock, &mine);
    ipbd_config cfg = {.listen_fd = lfd,
                       .socket_path = sock,
                       .uid = geteuid(),
                       .self_exe = worker_exe,
                       .session_args = sargs,
                       .idle_timeout_ms = idle * 1000,
                       .max_sessions = (unsigned)max_sessions,
                       .warm = (unsigned)warm,
                       .max_clients = (unsigned)max_clients,
                       .monitor_fd = frontend ? 4 : -1,
                       .frontend = frontend};
    /* Run by root: the sessions' sandboxes run in the system service's uid pool, through a
     * private monitor that adopts a channel for each worker, never as root. */
    if (!frontend && geteuid() == 0 && (cfg.monitor_fd = ipb_monitor_start_private(true)) < 0) {
        log_error("cannot start the private monitor for root's sandboxes: %s", strerror(errno));
        close(lfd);
        free(sock);
        free(sargs);
        return 1;
    }
    if (frontend)
        log_info("serving uid %d at %s", (int)cfg.uid, sock);
    else
        fprintf(stderr,
                "ipyboxd: listening at %s (user mode, uid %d): up to %ld sessions (%ld kept warm), idle "
                "named sessions closed after %ld s\n",
                sock, (int)cfg.uid, max_sessions, warm, idle);
    int r = ipbd_serve(&cfg, &err);
    if (r < 0) {
        log_error("%s", ipb_error_msg(err));
        ipb_error_free(err);
    }
    /* Remove the socket only if it is still ours (not one a newer daemon bound). */
    struct stat now;
    if (!frontend && stat(sock, &now) == 0 && now.st_ino == mine.st_ino && now.st_dev == mine.st_dev)
        unlink(sock);
    free(sock);
    free(sargs);
    return r < 0 ? 1 : 0;
}
