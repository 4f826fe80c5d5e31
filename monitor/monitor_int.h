/* The monitor's insides: spawn.c (sandboxes), users.c (sockets and frontends), channels.c
 * (channels and their requests), loop.c (the event loop), setup.c (configuration, host checks
 * and the pool at start), monitor.c (the service's and a private monitor's main). One thread,
 * root. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include "cgroup.h"
#include "fds.h"
#include "mon_proto.h"
#include "pool.h"
#include "slotlock.h"
#include "sysconf.h"

struct ipbm_user {
    char name[64];
    uid_t uid;
    gid_t gid;
    gid_t *groups; /* every group of the user's, read at start */
    int ngroups;
    char home[256];
    char dir[128];  /* /run/ipybox/<name> */
    char sock[160]; /* dir/ipybox.sock */
    int listen_fd;
    pid_t frontend;  /* 0 while none runs */
    long restart_ms; /* when to start it again after it ended */
    unsigned restarts;
    unsigned nchans;         /* worker channels (ADOPTed by the frontend) open now */
    unsigned nsubs;          /* sub-channels (ADOPTed by a worker) open now */
    struct ipbm_chan *fchan; /* the running frontend's channel */
    long warn_since;         /* warnings logged for the user since then (at most 10 a minute) */
    unsigned warnings;
    unsigned nsandboxes; /* sandboxes holding a slot now */
    ipbm_held held;      /* descriptors from the user, waiting for a closer (fds.h) */
    bool paused;         /* too many held: the user's channels are not read */
    struct ipbm_user *next;
};

struct ipbm_chan {
    int fd;
    bool frontend;            /* a frontend's channel (ADOPT), else a worker's (SPAWN, KILL, ADOPT) */
    struct ipbm_chan *parent; /* a sub-channel's worker channel (closed with it), else NULL */
    struct ipbm_user *user;   /* whose */
    uint32_t next_id;
    bool broken; /* hung up, misbehaved or not reading: closed after this batch */
    struct ipbm_chan *next;
};

struct ipbm_sandbox {
    uint32_t id;
    int slot;
    pid_t pid;              /* the outer shim; 0 once reaped */
    struct ipbm_chan *chan; /* NULL once its channel closed */
    struct ipbm_user *user; /* whose (counted in user->nsandboxes) */
    long gone_ms;           /* reaped at; its cgroup is removed before the slot is free */
    struct ipbm_sandbox *next;
};

struct ipbm {
    ipbm_sysconf conf;
    ipbm_pool pool;
    int *slot_lock; /* pool.size entries: the lock held for each taken slot, or -1 */
    ipbm_cgroups cg;
    char shim[4096];
    char self[4096];
    char **session_args;
    int ep, sig, timer;
    struct ipbm_user *users;
    struct ipbm_chan *chans;
    struct ipbm_sandbox *sandboxes;
    unsigned nsandboxes;
    bool stopping;
    bool sweep_due;   /* a sandbox ended: sweep after this batch of events */
    bool private_mon; /* a private monitor of root's own ipybox (one channel, no users'
                             * sockets or frontends): it ends when its channels are gone */
    int verbose;
    unsigned reclaim_left; /* sandbox cgroups a killed private monitor left, still busy */
    long reclaim_until;    /* tried again each second until then */
};

/* A slot whose sandbox is gone and cleaned up: free here, and its lock released for other
 * monitors. */
static inline void ipbm_slot_free(struct ipbm *M, int slot) {
    if (slot >= 0 && (uint32_t)slot < M->pool.size && M->slot_lock[slot] >= 0) {
        close(M->slot_lock[slot]);
        M->slot_lock[slot] = -1;
    }
    ipbm_pool_put(&M->pool, slot);
}

/* The most worker channels and sandboxes one user may hold: the frontend is the user's own
 * process, so the monitor enforces max_sessions_per_user itself (with room for a session's
 * old sandbox to be torn down while its new one starts after a reset). */
#define IPBM_USER_CHANS(c) ((c)->max_sessions_per_user + 4)
#define IPBM_USER_SANDBOXES(c) ((c)->max_sessions_per_user * 2)
/* The most sub-channels one user may hold: each serves one sandbox (a sandboxed MCP server's),
 * so more than the user may run would serve nothing. */
#define IPBM_USER_SUBS(c) IPBM_USER_SANDBOXES(c)

/* spawn.c: carries out a SPAWN from chan (fds: as mon_proto.h says, owned by the caller).
 * Fills rep (SPAWNED or ERROR) and the fds to send back with it. */
void ipbm_spawn(struct ipbm *M, struct ipbm_chan *chan, const struct ipbm_msg *req, int *fds, unsigned nfds,
                struct ipbm_msg *rep, int *rfds, unsigned *nrfds);
/* A sandbox's shim ended (reaped): its cgroup is emptied and removed, its slot freed once
 * that is done; its channel is told. */
void ipbm_sandbox_gone(struct ipbm *M, struct ipbm_sandbox *s, int status);
/* Kills a sandbox (the shim, and everything in its cgroup). */
void ipbm_sandbox_kill(struct ipbm *M, struct ipbm_sandbox *s);
/* Frees the slots of sandboxes whose cgroups are now empty. */
void ipbm_sandboxes_sweep(struct ipbm *M);

/* reclaim.c: removes the empty sandbox cgroups under our cgroup parents of slots that no
 * monitor holds (a private monitor that was killed left them). Returns how many are still
 * busy (tried again later). */
unsigned ipbm_reclaim_orphans(struct ipbm *M);

/* users.c */
/* Refuses a pool that holds a user's or group's id or meets an /etc/subuid or /etc/subgid
 * range. */
int ipbm_pool_check_host(const struct ipbm *M, ipb_error **err);
int ipbm_users_load(struct ipbm *M, ipb_error **err);
/* mkdir path (a directory of root's, in a directory only root writes) with exactly mode,
 * whatever the umask. 0 or -errno (-EEXIST: there, but not root's). */
int ipbm_root_dir(const char *path, mode_t mode);
/* Starts (or restarts when due) each user's frontend. */
void ipbm_frontends_start(struct ipbm *M);
void ipbm_users_cleanup(struct ipbm *M);

/* fd came from a channel (or is one): the monitor is done with it. */
static inline void ipbm_release_user_fd(struct ipbm_user *u, int fd) { ipbm_release(&u->held, fd); }

/* channels.c */
/* A channel of u's: a frontend's, a worker's, or (parent set) a sub-channel of that worker
 * channel. */
struct ipbm_chan *ipbm_chan_add(struct ipbm *M, int fd, bool frontend, struct ipbm_user *u, struct ipbm_chan *parent);
/* Sends without waiting; a channel that cannot take the record is marked broken. */
void ipbm_chan_send(struct ipbm_chan *c, const struct ipbm_msg *m, const int *fds, unsigned nfds);
/* A channel closed or misbehaved: its sandboxes are killed, its sub-channels closed with it,
 * and it is freed. */
void ipbm_chan_close(struct ipbm *M, struct ipbm_chan *c);
/* Reads and carries out the next request on c. Returns -1 when the channel must be closed. */
int ipbm_chan_request(struct ipbm *M, struct ipbm_chan *c);
/* Stops (or resumes) reading u's channels: too many descriptors u sent wait for their closer. */
void ipbm_user_pause(struct ipbm *M, struct ipbm_user *u, bool paused);

/* loop.c */
/* Serves until stopped (a signal; a private monitor: its channels gone) and nothing is left
 * running. Returns -1 when the loop could not be set up or failed. */
int ipbm_serve(struct ipbm *M);
long ipbm_now_ms(void);

/* setup.c */
/* Reads the configuration at path into conf (the built-in defaults, when a file not given
 * explicitly is missing). Logs why not and returns -1. */
int ipbm_load_config(ipbm_sysconf *conf, const char *path, bool given);
/* The configured defaults against what this host has (memory, pid_max). Logs and returns -1. */
int ipbm_check_host(const ipbm_sysconf *conf, const char *path);
/* Whether every user may reach and run self (their frontends run it). Logs and returns -1. */
int ipbm_check_users_can_run(const char *self);
/* The pool and the cgroups; clean: the system service, which takes over what an earlier run
 * left in the slots it can lock. */
int ipbm_pool_setup(struct ipbm *M, bool clean, ipb_error **err);
