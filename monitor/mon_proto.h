/* The privileged monitor's channels (system service only). Every message, both ways, is one
 * SOCK_SEQPACKET record of exactly sizeof(struct ipbm_msg) bytes, with descriptors attached
 * where the type says so. The monitor checks the size, the magic, the type, every field it
 * uses and the number of descriptors; anything else closes the channel. It never reads text
 * from a channel: `text` is written only by the monitor, for the worker to show.
 *
 * Channels: the monitor gives each user's frontend one channel (a socketpair made before the
 * frontend drops to the user). For each worker the frontend asks for another with ADOPT: the
 * monitor makes a socketpair, keeps one end as a channel of the same user and sends the other
 * back (ADOPTED). A worker asks the same on its own channel for a sub-channel, which it hands
 * to a process it starts (`ipybox run` for a sandboxed MCP server): a worker channel of the
 * same user that adopts nothing and is closed with its parent. Every channel's monitor end is
 * made by the monitor and never leaves it, so no user can set an option on it or read from
 * it. Sandboxes belong to the channel that spawned them and are killed when it closes.
 *
 * Requests and why each is safe to grant:
 *   ADOPT  (frontend or worker channel, not a sub-channel; no fd; id: echoed)
 *          another channel for the same user, within the user's quota (sessions for a
 *          frontend's, twice max_sessions_per_user sub-channels for workers'): grants nothing
 *          the user's frontend does not have, and a sub-channel dies with its parent.
 *   SPAWN  (worker channel or sub-channel; fds: stdin, stdout, stderr, the shim's sync
 *          socket, then nbinds bind sources opened by the worker)
 *          starts ipybox-shim in a fresh uid range of the pool (never root, never a real
 *          user), in a new cgroup with limits no higher than the administrator's bounds, as
 *          uid 0 of a new user namespace, owned by root, mapping only that range. Bind
 *          sources become idmapped mounts that map the sandbox's user to the channel's user:
 *          the sandbox gets exactly the channel user's own access to trees that user already
 *          opened.
 *   KILL   (worker channel or sub-channel; id) SIGKILL to a sandbox this channel spawned,
 *          by its own id.
 * Events from the monitor: ADOPTED (id: the ADOPT's; 1 fd: the new channel's other end),
 * SPAWNED (id, pid; fds: the cgroup's memory and pids event files, read-only, where they
 * exist), ERROR (err, text; id: an ADOPT's), EXITED (id, wait status). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "shim_proto.h"

#define IPBM_MAGIC 0x69706d31u /* "ipm1" */
#define IPBM_MAX_BINDS 32
#define IPBM_TEXT 256

/* The fds of a SPAWN before the bind sources. */
enum { IPBM_FD_STDIN, IPBM_FD_STDOUT, IPBM_FD_STDERR, IPBM_FD_SYNC, IPBM_FD_BINDS };

/* Where every system-mode shim mounts its root tmpfs (the shim insists on it). */
#define IPBM_ROOT_DIR SHIM_SYSTEM_ROOT
/* The sandbox's user (IPB_SANDBOX_UID inside) is this far into its uid range. */
#define IPBM_RANGE 65536u

enum ipbm_type {
    IPBM_ADOPT = 1,
    IPBM_SPAWN,
    IPBM_KILL,
    IPBM_SPAWNED = 100,
    IPBM_ERROR,
    IPBM_EXITED,
    IPBM_ADOPTED,
};

/* Which limits the monitor could apply (SPAWNED.limits). */
enum ipbm_limits { IPBM_LIMITS_CGROUP2 = 1, IPBM_LIMITS_CGROUP1, IPBM_LIMITS_RLIMIT };

struct ipbm_msg {
    uint32_t magic;
    uint32_t type;
    uint32_t id;         /* sandbox id, per channel */
    int32_t err;         /* ERROR: errno */
    int32_t status;      /* SPAWNED: host pid of the shim; EXITED: wait status */
    uint32_t nbinds;     /* SPAWN: bind sources after IPBM_FD_BINDS */
    uint32_t ro_binds;   /* SPAWN: bit i: bind i read-only */
    uint32_t pids_max;   /* SPAWN: 0 = the configured default; SPAWNED: applied */
    uint32_t cpu_weight; /* SPAWN: 0 = default, else 1..10000; SPAWNED: applied */
    uint32_t limits;     /* SPAWNED: enum ipbm_limits; bit 8: memory events fd attached,
                           * bit 9: pids events fd attached */
    uint64_t memory_max; /* SPAWN: bytes, 0 = default; SPAWNED: applied */
    uint32_t uid_base;   /* SPAWNED: first host uid of the sandbox's range */
    uint32_t reserved;
    char text[IPBM_TEXT]; /* ERROR: a sentence from the monitor (NUL-terminated) */
};

/* SPAWN.limits: the sandbox keeps a zygote, so its pids limit is the asked one + 2 (S0 and the
 * zygote: architecture.md, "Zygote kernels"); SPAWNED.pids_max still says the asked one. The
 * fork between the zygote and a kernel needs no slot of its own: a kernel is forked only after
 * KILL_ALL emptied the kernels' namespace, so its tree has every slot free but K's (a third
 * slot was one more task for the kernel, tests/security/test_zygote_attacks.py). */
#define IPBM_SPAWN_ZYGOTE (1u << 16)
#define IPBM_ZYGOTE_PIDS 2
#define IPBM_HAS_MEM_EVENTS (1u << 8)
#define IPBM_HAS_PIDS_EVENTS (1u << 9)

/* Sends one record with up to 4 + IPBM_MAX_BINDS descriptors; 0 or -errno. flags go to
 * sendmsg: the monitor always passes MSG_DONTWAIT (it never waits for a channel). */
int ipbm_send(int fd, const struct ipbm_msg *m, const int *fds, unsigned nfds, int flags);
/* Receives one record: 1, 0 on EOF, -errno (-EBADMSG: wrong size, magic or too many
 * descriptors). The attached descriptors (close-on-exec) go to fds, up to max, whatever the
 * result; *nfds says how many, and the caller owns them. The monitor passes
 * IPB_RECORD_MAX_FDS, so that the kernel never drops one in it (see fds.h). flags go to
 * recvmsg (MSG_DONTWAIT: -EAGAIN when none waits). */
int ipbm_recv(int fd, struct ipbm_msg *m, int *fds, unsigned max, unsigned *nfds, int flags);
/* Whether fd is an AF_UNIX SOCK_SEQPACKET socket. */
bool ipbm_is_seqpacket(int fd);
