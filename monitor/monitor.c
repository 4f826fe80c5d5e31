/* The monitor: root's only process in the service. It reads its configuration, makes each
 * user's socket, starts each user's frontend, and then only answers the fixed-layout
 * requests of mon_proto.h on its channels; it never reads text from anyone but the
 * administrator (the configuration file, the user database). */
#include "monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdio.h"
#include "log.h"
#include "nofile.h"
#include "monitor_int.h"
#include "selfcheck.h"
#include "options.h"
#include "shim_proto.h"

static void usage(FILE *f) {
    fprintf(f,
            "Usage: ipyboxd [--config FILE] [-v] [SANDBOX OPTIONS]   (as root: the system service)\n"
            "       ipyboxd --user [OPTIONS]                          (one user's own daemon; see --user --help)\n\n"
            "As root, ipyboxd serves every permitted user (users = in the configuration) on a socket of\n"
            "their own, /run/ipybox/<user>/ipybox.sock (owned by the user, mode 0600; `ipybox mcp` finds\n"
            "it). Each user's sessions run in a frontend process of that user; each sandbox runs in a uid\n"
            "range of its own from a reserved pool, in a cgroup with memory (no swap), process and CPU\n"
            "limits. Root keeps one small process, the monitor, which takes only fixed-layout requests.\n\n"
            "Options:\n"
            "  --config FILE  the configuration (default " IPBM_DEFAULT_CONFIG "; a missing default file\n"
            "                 means the built-in defaults)\n"
            "  -v, --verbose  log more (-vv: the same)\n"
            "  -V, --version  print the version and exit\n"
            "  -h, --help     this text\n\n"
            "Sandbox options given here are defaults for every session; clients add their own. Per session\n"
            "a client may ask for --memory SIZE, --max-processes N and --cpu-weight N within the bounds of\n"
            "the configuration.\n\n%s",
            ipb_options_help());
}

static void block_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
}

/* `ipyboxd --private-monitor worker|frontend`, with a channel on fd 3: the monitor of root's
 * own ipybox (`ipybox mcp`, `ipybox run`, `ipyboxd --user` started by root), so that root's
 * sandboxes, too, run in a uid range of the pool and never as root (monclient.h). The channel
 * is root's (a worker's, or a frontend's that adopts one per worker); there are no sockets,
 * no frontends and no other users. It ends with its channels, or when its parent dies. A
 * failure at start is sent on the channel as an ERROR record. */
static int private_main(int argc, char **argv) {
    static struct ipbm M0;
    struct ipbm *M = &M0;
    ipb_error *err = NULL;
    bool frontend = argc == 3 && !strcmp(argv[2], "frontend");
    if (argc != 3 || (!frontend && strcmp(argv[2], "worker")) || geteuid() != 0 || !ipbm_is_seqpacket(3)) {
        log_error("--private-monitor is for ipybox's own use");
        return 2;
    }
    /* Descriptors 3 to 63 are held for children (fds.h) and a sandbox's are lifted above
     * 64 + IPBM_MAX_BINDS while they are put in place: below this limit a spawn cannot work. */
    long nofile = ipb_nofile_raise();
    if (nofile >= 0 && nofile < IPBM_MIN_NOFILE) {
        struct ipbm_msg low = {.magic = IPBM_MAGIC, .type = IPBM_ERROR, .err = EMFILE};
        snprintf(low.text, sizeof(low.text),
                 "too many open files (the limit is %ld): the monitor needs a descriptor limit (RLIMIT_NOFILE, "
                 "ulimit -n) of at least %d",
                 nofile, IPBM_MIN_NOFILE);
        log_error("%s", low.text);
        ipbm_send(3, &low, NULL, 0, MSG_DONTWAIT);
        return 1;
    }
    int chan = fcntl(3, F_DUPFD_CLOEXEC, 64);
    pid_t parent = getppid();
    if (chan < 0 || prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent || parent == 1)
        return 1;
    close(3);
    unsetenv("NOTIFY_SOCKET");
    M->private_mon = true;
    struct ipbm_msg fail = {.magic = IPBM_MAGIC, .type = IPBM_ERROR, .err = EIO};
    int fr = ipbm_fds_reserve();
    if (fr < 0) {
        ipb_error_set(&err, -fr, "cannot reserve descriptors for children");
        goto failed;
    }
    if (ipbm_load_config(&M->conf, IPBM_DEFAULT_CONFIG, false) < 0) {
        ipb_error_set(&err, EINVAL, "the configuration " IPBM_DEFAULT_CONFIG " (its uid pool) is not valid");
        goto failed;
    }
    /* Root sets its own limits: the configured defaults apply, the bounds do not. */
    M->conf.memory_max_bound = 1ull << 50;
    M->conf.pids_max_bound = 1u << 22;
    M->conf.cpu_weight_bound = 10000;
    M->conf.max_sessions_per_user = 10000;
    char *shim = NULL;
    if (ipb_find_shim(&shim, &err) < 0)
        goto failed;
    snprintf(M->shim, sizeof(M->shim), "%s", shim);
    free(shim);
    if (ipbm_pool_setup(M, false, &err) < 0)
        goto failed;
    /* Root's sandboxes keep the CPU share of the process that started them (a cpu cgroup of
     * ours would put all of them under one share), and without cgroups no address-space
     * limit unless --memory asks for one: as before they ran in the pool. */
    M->cg.cpu[0] = '\0';
    if (M->cg.kind == IPBM_LIMITS_RLIMIT)
        M->conf.memory_max = M->conf.memory_max_bound;
    /* What a private monitor that was killed left (its sandboxes may still be dying). */
    M->reclaim_left = ipbm_reclaim_orphans(M);
    M->reclaim_until = ipbm_now_ms() + 60000;
    M->ep = epoll_create1(EPOLL_CLOEXEC);
    int e = M->ep < 0 ? -errno : ipbm_root_dir("/run/ipybox", 0755);
    if (e < 0 || (e = ipbm_root_dir(IPBM_ROOT_DIR, 0755)) < 0) {
        ipb_error_set(&err, -e, "preparing /run/ipybox");
        goto failed;
    }
    struct ipbm_user *u = calloc(1, sizeof(*u));
    if (!u) {
        ipb_error_set(&err, ENOMEM, "out of memory");
        goto failed;
    }
    snprintf(u->name, sizeof(u->name), "root");
    u->uid = 0;
    u->gid = 0;
    u->listen_fd = -1;
    M->users = u;
    struct ipbm_chan *c = ipbm_chan_add(M, chan, frontend, u, NULL);
    if (!c) {
        log_error("cannot serve the private monitor's channel");
        return 1;
    }
    if (frontend)
        u->fchan = c;
    int r = ipbm_serve(M);
    ipbm_sandboxes_sweep(M);
    while (M->chans)
        ipbm_chan_close(M, M->chans);
    ipbm_held_final(&u->held);
    return r < 0 ? 1 : 0;
failed:
    snprintf(fail.text, sizeof(fail.text), "%s", ipb_error_msg(err));
    fail.err = err && err->errnum ? err->errnum : EIO;
    log_error("%s", fail.text);
    ipbm_send(chan, &fail, NULL, 0, MSG_DONTWAIT);
    return 1;
}

int ipbm_main(int argc, char **argv) {
    /* From the start: a SIGTERM during start-up is handled once the loop runs, not fatal. */
    block_signals();
    if (argc >= 2 && !strcmp(argv[1], "--private-monitor")) {
        ipb_log_init("ipybox-monitor", IPB_LOG_WARN);
        return private_main(argc, argv);
    }
    ipb_log_init("ipyboxd", IPB_LOG_INFO);
    const char *config = IPBM_DEFAULT_CONFIG;
    bool given = false;
    static struct ipbm M0;
    struct ipbm *M = &M0;
    char **sargs = calloc((size_t)argc + 1, sizeof(char *));
    int ns = 0;
    if (!sargs)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--config")) {
            if (i + 1 >= argc) {
                log_error("--config needs a file");
                return 2;
            }
            config = argv[++i];
            given = true;
        } else if (!strcmp(argv[i], "--verbose"))
            M->verbose++;
        else if (argv[i][0] == '-' && argv[i][1] == 'v' && !argv[i][strspn(argv[i] + 1, "v") + 1])
            M->verbose += (int)strlen(argv[i]) - 1; /* -v, -vv, ... */
        else
            sargs[ns++] = argv[i];
    }
    M->session_args = sargs;
    ipb_log_init("ipyboxd", M->verbose ? IPB_LOG_DEBUG : IPB_LOG_INFO);
    if (geteuid() != 0) {
        log_error("the system service runs as root; for your own sessions run `ipyboxd --user`");
        return 2;
    }
    int fr = ipbm_fds_reserve();
    if (fr < 0) {
        log_error("cannot reserve descriptors for children: %s", strerror(-fr));
        return 1;
    }
    if (ipbm_load_config(&M->conf, config, given) < 0 || ipbm_check_host(&M->conf, config) < 0)
        return 2;
    /* The sandbox options every session gets must be valid now. */
    ipb_options o;
    ipb_error *err = NULL;
    int next = 0;
    ipb_options_init(&o);
    if (ipb_options_parse(&o, ns, sargs, &next, &err) < 0 || next < ns) {
        log_error("%s", err ? ipb_error_msg(err) : "unexpected argument (see ipyboxd --help)");
        return 2;
    }
    ipb_options_free(&o);
    ssize_t sl = readlink("/proc/self/exe", M->self, sizeof(M->self) - 1);
    char *shim = NULL;
    if (sl <= 0 || ipb_find_shim(&shim, &err) < 0) {
        log_error("%s", err ? ipb_error_msg(err) : "cannot find this program's binary");
        return 1;
    }
    M->self[sl] = '\0';
    snprintf(M->shim, sizeof(M->shim), "%s", shim);
    free(shim);
    if (ipbm_check_users_can_run(M->self) < 0)
        return 2;
    if (ipbm_pool_setup(M, true, &err) < 0) {
        log_error("%s", ipb_error_msg(err));
        return 2;
    }
    ipbm_cgroup_users_sweep(&M->cg); /* users' cgroups an earlier run left */
    if (ipbm_selfcheck(&err) < 0) {
        log_error("%s", ipb_error_msg(err));
        return 2;
    }
    M->ep = epoll_create1(EPOLL_CLOEXEC);
    if (M->ep < 0 || ipbm_users_load(M, &err) < 0) {
        log_error("%s", err ? ipb_error_msg(err) : strerror(errno));
        ipbm_users_cleanup(M);
        return 1;
    }
    unsigned nu = 0;
    for (struct ipbm_user *u = M->users; u; u = u->next)
        nu++;
    char user_bound[96] = "no bound (no cgroups)";
    if (M->cg.kind == IPBM_LIMITS_CGROUP2 || M->cg.kind == IPBM_LIMITS_CGROUP1)
        snprintf(user_bound, sizeof(user_bound), "%llu MiB memory, %u tasks in u-<uid>",
                 (unsigned long long)(M->conf.user_memory_max >> 20), M->conf.user_pids_max);
    log_info("serving %u user%s at /run/ipybox/<user>/ipybox.sock; sandbox uids %u-%u (%u at once); "
             "per sandbox %llu MiB memory, %u processes, cpu weight %u by default; per user (frontend and "
             "workers) %s",
             nu, nu == 1 ? "" : "s", M->conf.pool_start, M->conf.pool_start + M->conf.pool_size * IPBM_RANGE - 1,
             M->conf.pool_size, (unsigned long long)(M->conf.memory_max >> 20), M->conf.pids_max, M->conf.cpu_weight,
             user_bound);
    int r = ipbm_serve(M);
    ipbm_sandboxes_sweep(M);
    /* What is left of the users' (channels, and listening sockets whose queued connections
     * may carry their descriptors) goes to a last closer: the monitor never holds the last
     * reference. */
    while (M->chans)
        ipbm_chan_close(M, M->chans);
    for (struct ipbm_user *u = M->users; u; u = u->next) {
        if (u->listen_fd >= 0)
            ipbm_release_user_fd(u, u->listen_fd);
        u->listen_fd = -1;
    }
    long closer_deadline = ipbm_now_ms() + 2000;
    for (struct ipbm_user *u = M->users; u; u = u->next) {
        /* A closer started while serving normally ends at once; only one still running after
         * a moment waits on something (not reaped yet is not waiting). */
        while (u->held.closer > 0 && waitpid(u->held.closer, NULL, WNOHANG) == 0 && ipbm_now_ms() < closer_deadline)
            usleep(10000);
        if (u->held.closer > 0 && kill(u->held.closer, 0) == 0 && waitpid(u->held.closer, NULL, WNOHANG) == 0)
            log_warn("user %s: a closer still waits on a descriptor the user sent (on their own filesystem, "
                     "say); it ends when that filesystem answers",
                     u->name);
        ipbm_held_final(&u->held);
    }
    ipbm_users_cleanup(M);
    log_info("stopped");
    return r < 0 ? 1 : 0;
}
