/* The supervisor <-> shim channel: a SOCK_SEQPACKET socketpair on fd SHIM_SYNC_FD of the shim.
 * First the supervisor sends one configuration message (shim_config, encoded); after that
 * both sides exchange fixed-size shim_msg records, each checked for its exact size. */
#pragma once
#include <stdint.h>

#include "error.h"
#include "mountplan.h"
#include "options.h"
#include "strbuf.h"

#define SHIM_SYNC_FD 3
#define SHIM_CONFIG_MAX (1u << 20)
#define SHIM_MAX_FDS 8
#define SHIM_MOUNT_FD0 4
/* Where every system-mode shim mounts its root tmpfs, each in its own mount namespace. */
#define SHIM_SYSTEM_ROOT "/run/ipybox/.root"

enum shim_mode { SHIM_MODE_KERNEL = 1, SHIM_MODE_RUN = 2 };

/* SHIM_EV_STARTED's err: how the kernel started. RESCUE is also SHIM_CMD_START's arg in kernel
 * mode: the start after one that failed, the slow way with `python -s` (no user site), and no
 * standby or zygote (architecture.md, "A start that fails is tried once more"). */
enum { SHIM_START_EXEC = 0, SHIM_START_ZYGOTE = 1, SHIM_START_STANDBY = 2, SHIM_START_RESCUE = 3 };
/* SHIM_EV_ZYGOTE's err: bits. GIVEN_UP: none is made again. LATE: S1 killed it for missing a
 * bound (READY, or the answer to FORK); BAD: for a record it had no business sending. */
enum { SHIM_ZYGOTE_GIVEN_UP = 1, SHIM_ZYGOTE_LATE = 2, SHIM_ZYGOTE_BAD = 4 };

enum shim_msg_type {
    /* shim -> supervisor */
    SHIM_EV_READY = 1, /* sandbox built; carries the egress listeners (SCM_RIGHTS), arg = bit i set
                         * when listener i (enum ipb_egress_fd) is among them, in that order */
    SHIM_EV_ERROR,     /* a step failed: step, err (errno), text */
    SHIM_EV_STARTED,   /* the program of generation gen runs; arg = its pid inside the sandbox */
    SHIM_EV_EXITED,    /* the program of generation gen ended; arg = wait status */
    SHIM_EV_KILLED,    /* every sandbox process but PID 1 is gone */
    SHIM_EV_ZYGOTE,    /* sent once, before the STARTED of a kernel started the slow way: the
                         * zygote ended (arg = its wait status), err = 0 or bits: GIVEN_UP,
                         * two zygotes ended before READY, none is made again (arg = the last
                         * one's status); LATE or BAD, S1 had it killed (why) */
    /* supervisor -> shim */
    SHIM_CMD_START = 100, /* start the program as generation gen; arg 0 or SHIM_START_RESCUE */
    SHIM_CMD_SIGNAL,      /* send signal arg to the program's process group */
    SHIM_CMD_KILL_ALL,    /* SIGKILL every sandbox process but PID 1, clean the run directory */
    SHIM_CMD_ANSWERED,    /* kernel mode: the kernel of generation gen answered its first
                           * kernel_info_request (a zygote deferred until then may boot now) */
};

struct shim_msg {
    uint32_t type;
    int32_t arg;
    int32_t err;
    uint32_t gen;
    char step[32];
    char text[480];
};

typedef struct shim_config {
    uint32_t mode;
    uint32_t uid, gid; /* the invoking user's ids (outside) */
    uint32_t system;   /* 1: started by the system service's monitor, which made the
                              * user namespace (uid 0 inside is the sandbox's pool range) and
                              * hands the user's binds over as idmapped mounts, fds from
                              * SHIM_MOUNT_FD0 on in plan order (IPB_MNT_FD entries) */
    char *root;        /* empty host directory where the new root is assembled */
    char *hostname;
    char *cwd; /* working directory of the program */
    ipb_mount_plan plan;
    ipb_strv argv, env;
    uint8_t *bpf; /* seccomp program, struct sock_filter[] */
    size_t bpf_len;
    uint64_t nproc_max; /* user mode: RLIMIT_NPROC set inside user namespace 1, where the
                              * count is the sandbox's own (0: unchanged) */
    uint64_t as_max;    /* user mode: RLIMIT_AS of every sandbox process (0: unchanged) */
    uint32_t zygote;    /* kernel mode: kernels are forked from a zygote (architecture.md,
                              * "Zygote kernels"); the supervisor leaves it 0 when the options
                              * set PYTHONPATH or PYTHONUSERBASE */
    uint32_t standby;   /* with zygote: a standby kernel is kept prepared beside the running
                              * one (--standby; architecture.md, "Zygote kernels") */
    unsigned mount_fds; /* not encoded: how many mounts the monitor passed (its argv) */
} shim_config;

int shim_config_encode(const shim_config *c, ipb_buf *out);
int shim_config_decode(const void *data, size_t len, shim_config *ret, ipb_error **err);
void shim_config_free(shim_config *c);

/* Sends one record; returns 0 or -errno. */
int shim_send(int fd, uint32_t type, int32_t arg, int32_t err, uint32_t gen, const char *step, const char *text);
/* Sends one record with descriptors attached (at most SHIM_MAX_FDS). */
int shim_send_fds(int fd, uint32_t type, int32_t arg, const int *fds, size_t nfds);
/* Receives one record; returns 1 on a record, 0 on EOF, -errno on error (-EBADMSG for a
 * record of the wrong size). Descriptors that come with it are closed. */
int shim_recv(int fd, struct shim_msg *m);
/* The same, keeping up to max attached descriptors (close-on-exec) in fds; *nfds says how
 * many. Any beyond max are closed. */
int shim_recv_fds(int fd, struct shim_msg *m, int *fds, size_t max, size_t *nfds);

/* Locates ipybox's program name (ipybox-shim): in ../libexec/ipybox from the running binary's
 * folder (in that folder when the running binary is there too, as ipybox-monitor is), else in
 * the installed libexec folder. Returns 0 with a malloc'd *ret_path, or -1 with err. */
int ipb_find_libexec(const char *name, char **ret_path, ipb_error **err);
/* ipb_find_libexec("ipybox-shim"). */
int ipb_find_shim(char **ret_path, ipb_error **err);
