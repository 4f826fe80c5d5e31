/* The users the service serves: a socket each under /run/ipybox/<name>/, and a frontend
 * process each, re-executed from our binary as that user, that speaks MCP on the socket. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fdio.h"
#include "fds.h"
#include "log.h"
#include "monitor_int.h"

#define RUN_DIR "/run/ipybox"

int ipbm_root_dir(const char *path, mode_t mode) {
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        return -errno;
    /* The mode is set here, never left to the umask (the unit's UMask=0077 would make a
     * user's directory 0700 root's, and the user's socket unreachable). Only root writes
     * the parent, so what is there is ours or root's; it must still be a directory of root. */
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int r = 0;
    if (fstat(fd, &st) < 0)
        r = -errno;
    else if (st.st_uid != 0)
        r = -EEXIST;
    else if ((st.st_mode & 07777) != mode && fchmod(fd, mode) < 0)
        r = -errno;
    close(fd);
    return r;
}

static bool permitted(const struct ipbm *M, const struct passwd *pw) {
    if (pw->pw_uid == 0 || ipbm_pool_slot_of(&M->pool, pw->pw_uid) >= 0)
        return false;
    if (!M->conf.group[0])
        return pw->pw_uid >= M->conf.uid_min && pw->pw_uid <= M->conf.uid_max;
    struct group *g = getgrnam(M->conf.group);
    if (!g)
        return false;
    if (pw->pw_gid == g->gr_gid)
        return true;
    for (char **m = g->gr_mem; m && *m; m++)
        if (!strcmp(*m, pw->pw_name))
            return true;
    return false;
}

/* /run/ipybox/<name>/ipybox.sock, bound by root in a directory only root writes, then given
 * to the user (0600). A stale socket is replaced. */
static int make_socket(struct ipbm_user *u) {
    int e = ipbm_root_dir(u->dir, 0755);
    if (e < 0)
        return e;
    unlink(u->sock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(u->sock) >= sizeof(sa.sun_path)) {
        close(fd);
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, u->sock, strlen(u->sock) + 1);
    mode_t old = umask(0177);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (r < 0 || lchown(u->sock, u->uid, u->gid) < 0 || chmod(u->sock, 0600) < 0 || listen(fd, 128) < 0) {
        e = errno;
        close(fd);
        unlink(u->sock);
        return -e;
    }
    return fd;
}

int ipbm_pool_check_host(const struct ipbm *M, ipb_error **err) {
    /* Never a real user's or group's id: the pool's uids double as its gids. */
    const char *clash = NULL;
    unsigned id = 0;
    setpwent();
    for (struct passwd *pw; !clash && (pw = getpwent());)
        if (ipbm_pool_slot_of(&M->pool, pw->pw_uid) >= 0 || ipbm_pool_slot_of(&M->pool, pw->pw_gid) >= 0)
            clash = "user", id = pw->pw_uid;
    endpwent();
    setgrent();
    for (struct group *g; !clash && (g = getgrent());)
        if (ipbm_pool_slot_of(&M->pool, g->gr_gid) >= 0)
            clash = "group", id = g->gr_gid;
    endgrent();
    if (clash)
        return ipb_error_set(err, EEXIST,
                             "the sandbox uid pool (uid_pool_start, uid_pool_size) holds the id %u of a "
                             "%s; move the pool",
                             id, clash);
    static const char *const subids[] = {"/etc/subuid", "/etc/subgid"};
    for (size_t i = 0; i < 2; i++) {
        char *text = NULL;
        size_t len;
        if (ipb_read_file(subids[i], 16 << 20, &text, &len) < 0)
            continue; /* none: nothing is delegated */
        unsigned line = ipbm_pool_subid_clash(&M->pool, text);
        free(text);
        if (line)
            return ipb_error_set(err, EEXIST,
                                 "the sandbox uid pool (uid_pool_start, uid_pool_size) meets the range "
                                 "on line %u of %s; move the pool",
                                 line, subids[i]);
    }
    return 0;
}

int ipbm_users_load(struct ipbm *M, ipb_error **err) {
    int e = ipbm_root_dir(RUN_DIR, 0755);
    if (e < 0 || (e = ipbm_root_dir(IPBM_ROOT_DIR, 0755)) < 0)
        return ipb_error_set(err, -e, "preparing " RUN_DIR " (it must be a directory of root's)");
    if (M->conf.group[0] && !getgrnam(M->conf.group))
        return ipb_error_set(err, ENOENT, "the group '%s' (users = group %s) does not exist", M->conf.group,
                             M->conf.group);
    unsigned n = 0;
    setpwent();
    struct passwd *pw;
    while ((pw = getpwent())) {
        if (!permitted(M, pw) || strlen(pw->pw_name) >= sizeof(((struct ipbm_user *)0)->name) ||
            strchr(pw->pw_name, '/') || pw->pw_name[0] == '.')
            continue;
        struct ipbm_user *u = calloc(1, sizeof(*u));
        if (!u)
            break;
        snprintf(u->name, sizeof(u->name), "%s", pw->pw_name);
        snprintf(u->home, sizeof(u->home), "%s", pw->pw_dir);
        u->uid = pw->pw_uid;
        u->gid = pw->pw_gid;
        /* The user's groups, read once here: the frontend's child is a bare clone that must
         * not use NSS, and the monitor must not wait on a directory service later. */
        int ng = 16;
        for (;;) {
            gid_t *g = realloc(u->groups, (size_t)ng * sizeof(gid_t));
            if (!g)
                break;
            u->groups = g;
            int want = ng;
            if (getgrouplist(u->name, u->gid, u->groups, &want) >= 0) {
                u->ngroups = want;
                break;
            }
            if (want <= ng || want > 65536)
                break;
            ng = want;
        }
        if (!u->ngroups) {
            /* At least the primary group. */
            u->ngroups = u->groups ? 1 : 0;
            if (u->groups)
                u->groups[0] = u->gid;
        }
        snprintf(u->dir, sizeof(u->dir), RUN_DIR "/%s", u->name);
        snprintf(u->sock, sizeof(u->sock), "%s/ipybox.sock", u->dir);
        u->listen_fd = make_socket(u);
        if (u->listen_fd < 0) {
            log_error("user %s: cannot make %s: %s", u->name, u->sock, strerror(-u->listen_fd));
            free(u->groups);
            free(u);
            continue;
        }
        u->next = M->users;
        M->users = u;
        n++;
    }
    endpwent();
    if (!n)
        return ipb_error_set(err, ENOENT, "no user to serve (%s%s)", M->conf.group[0] ? "group " : "users = all, uids ",
                             M->conf.group[0] ? M->conf.group : "from uid_min to uid_max");
    return 0;
}

/* The frontend: the user's own process from the exec on, with only its socket and its
 * channel to us. */
/* The user's cgroup (u-<uid>, bounded by user_memory_max and user_pids_max), for their
 * frontend and every worker it starts. *dirfd: v2's directory for the clone, else -1. Returns
 * 0, or -1 with the reason logged: then nothing is started for the user (nothing acts for a
 * user without a bound where the service has cgroups). */
static int user_cgroup(struct ipbm *M, struct ipbm_user *u, int *dirfd) {
    *dirfd = -1;
    if (M->cg.kind != IPBM_LIMITS_CGROUP2 && M->cg.kind != IPBM_LIMITS_CGROUP1)
        return 0;
    if (u->uid > INT_MAX) {
        log_error("user %s: uid %u is too large for a cgroup of the user's; not started", u->name, (unsigned)u->uid);
        return -1;
    }
    ipbm_cgroups uc;
    ipbm_cgroups_for_users(&M->cg, &uc);
    ipbm_limits_req l = {.memory_max = M->conf.user_memory_max, .pids_max = M->conf.user_pids_max, .cpu_weight = 100};
    int mem_ev, pids_ev;
    char why[1200];
    int r = ipbm_cgroup_create(&uc, (int)u->uid, &l, dirfd, &mem_ev, &pids_ev, why, sizeof(why));
    if (mem_ev >= 0)
        close(mem_ev);
    if (pids_ev >= 0)
        close(pids_ev);
    if (r < 0) {
        log_error("user %s: %s; the frontend is not started without its bound", u->name, why);
        return -1;
    }
    return 0;
}

static pid_t start_frontend(struct ipbm *M, struct ipbm_user *u) {
    int cgfd;
    if (user_cgroup(M, u, &cgfd) < 0) {
        errno = EIO;
        return -1;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        if (cgfd >= 0)
            close(cgfd);
        return -1;
    }
    pid_t monitor = getpid();
    int keep[2] = {u->listen_fd, sv[1]};
    pid_t pid = ipbm_fork_clean(cgfd, keep, 2);
    if (cgfd >= 0)
        close(cgfd);
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int s = 1; s < NSIG; s++)
            signal(s, SIG_DFL);
        ipbm_cgroups uc;
        ipbm_cgroups_for_users(&M->cg, &uc);
        int e = ipbm_cgroup_enter_v1(&uc, (int)u->uid); /* v2: born there */
        if (e < 0) {
            dprintf(2, "ipyboxd: user %s: cannot enter the user's cgroup: %s\n", u->name, strerror(-e));
            _exit(126);
        }
        if (setgroups((size_t)u->ngroups, u->groups) < 0 || setresgid(u->gid, u->gid, u->gid) < 0 ||
            setresuid(u->uid, u->uid, u->uid) < 0 || getuid() != u->uid || geteuid() != u->uid) {
            dprintf(2, "ipyboxd: user %s: cannot switch to the user: %s\n", u->name, strerror(errno));
            _exit(126);
        }
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != monitor)
            _exit(1);
        /* Its table holds 0 to 2, the socket at 3 and the channel at 4 (IPBM_LOW_FD on). */
        if (fcntl(IPBM_LOW_FD, F_SETFD, 0) < 0 || fcntl(IPBM_LOW_FD + 1, F_SETFD, 0) < 0)
            _exit(126);
        ipb_cloexec_from(5);
        char home[300], user[100], logname[100], idle[32], maxs[32], warm[32], tmp[40], shm[40];
        snprintf(home, sizeof(home), "HOME=%s", u->home);
        snprintf(user, sizeof(user), "USER=%s", u->name);
        snprintf(logname, sizeof(logname), "LOGNAME=%s", u->name);
        snprintf(idle, sizeof(idle), "%ld", M->conf.idle_timeout_s);
        snprintf(maxs, sizeof(maxs), "%u", M->conf.max_sessions_per_user);
        snprintf(warm, sizeof(warm), "%u", M->conf.warm_sessions);
        snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)M->conf.tmp_size);
        snprintf(shm, sizeof(shm), "%llu", (unsigned long long)M->conf.shm_size);
        size_t na = 0;
        for (char **a = M->session_args; a && *a; a++)
            na++;
        char **argv = calloc(na + 24, sizeof(char *));
        if (!argv)
            _exit(126);
        size_t k = 0;
        argv[k++] = (char *)"ipyboxd";
        argv[k++] = (char *)"--frontend";
        argv[k++] = (char *)"--socket";
        argv[k++] = u->sock;
        argv[k++] = (char *)"--idle-timeout";
        argv[k++] = idle;
        argv[k++] = (char *)"--max-sessions";
        argv[k++] = maxs;
        argv[k++] = (char *)"--warm";
        argv[k++] = warm;
        if (M->verbose)
            argv[k++] = (char *)"--verbose";
        argv[k++] = (char *)"--tmp-size";
        argv[k++] = tmp;
        argv[k++] = (char *)"--shm-size";
        argv[k++] = shm;
        if (!M->conf.zygote)
            argv[k++] = (char *)"--no-zygote";
        if (M->conf.standby)
            argv[k++] = (char *)"--standby";
        for (size_t i = 0; i < na; i++)
            argv[k++] = M->session_args[i];
        char *envp[] = {home, user, logname, (char *)"PATH=/usr/local/bin:/usr/bin:/bin", NULL};
        execve(M->self, argv, envp);
        dprintf(2, "ipyboxd: user %s: cannot start the frontend: %s\n", u->name, strerror(errno));
        _exit(127);
    }
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        errno = -pid;
        return -1;
    }
    u->fchan = ipbm_chan_add(M, sv[0], true, u, NULL);
    return pid;
}

void ipbm_frontends_start(struct ipbm *M) {
    if (M->private_mon)
        return; /* its one user is root, whose own process holds the channel */
    long now = ipbm_now_ms();
    for (struct ipbm_user *u = M->users; u; u = u->next) {
        if (u->frontend > 0 || now < u->restart_ms || M->stopping)
            continue;
        pid_t pid = start_frontend(M, u);
        if (pid < 0) {
            log_error("user %s: cannot start the frontend: %s", u->name, strerror(errno));
            u->restart_ms = now + 5000;
            continue;
        }
        u->frontend = pid;
        log_debug("user %s: frontend %d on %s", u->name, (int)pid, u->sock);
    }
}

void ipbm_users_cleanup(struct ipbm *M) {
    if (!M->private_mon)
        ipbm_cgroup_users_sweep(&M->cg);
    while (M->users) {
        struct ipbm_user *u = M->users;
        M->users = u->next;
        if (u->listen_fd >= 0)
            close(u->listen_fd);
        unlink(u->sock);
        rmdir(u->dir);
        free(u->groups);
        free(u);
    }
    rmdir(IPBM_ROOT_DIR);
    rmdir(RUN_DIR); /* only when empty */
}
