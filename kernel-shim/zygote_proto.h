/* The records between a sandbox's PID 1 (S1) and its zygote, and between S1 and the shim
 * above it (S0) that makes zygotes (architecture.md, "Zygote kernels"). Every record is 16
 * bytes, {u32 type, u32 gen, i32 a, i32 b}, in host byte order, on SOCK_SEQPACKET
 * socketpairs; a record of another size or an unknown or inconsistent one is malformed.
 *
 *   S1 -> zygote   ZY_BOOT                  boot: to S0's child before its exec, which holds
 *                                           the zygote's place until S1 lets it boot
 *                  ZY_FORK {gen}            fork the kernel of generation gen
 *                  ZY_STANDBY {gen}         fork a standby kernel (gen: S1's standby serial)
 *   zygote -> S1   ZY_READY                 booted: its imports are done
 *                  ZY_STARTED {gen, a=pid}  the kernel runs as pid (in S1's namespace, > 1);
 *                                           for a ZY_STANDBY with the standby's channel
 *                                           attached (SCM_RIGHTS, one fd)
 *                  ZY_FAILED {gen, a=errno} the fork failed (errno > 0)
 *   standby -> S1  ZY_PREPARED {gen}        prepared (gen: its serial), waiting
 *                  ZY_ACTIVE {gen}          accepted ZY_ACTIVATE: the kernel of generation gen
 *                  ZY_DECLINED {gen, a}     refused it (a > 0: why, enum zy_decline); it exits
 *   S1 -> standby  ZY_ACTIVATE {gen}        become the kernel of generation gen
 *   S1 -> S0       ZY_MAKE                  make a new zygote (the old one is gone)
 *                  ZY_KILL                  SIGKILL the zygote (it missed a bound)
 *   S0 -> S1       ZY_NEW                   the new zygote's channel (SCM_RIGHTS, one fd)
 *                  ZY_ENDED {a=status}      the zygote ended with this wait status
 *                  ZY_GO                    S0 holds the namespace fds: S1 may go on
 *                  ZY_NOTMADE {a=errno}     the ZY_MAKE failed (its fork: errno > 0); no
 *                                           zygote was made, so none ended */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define ZY_REC_SIZE 16

enum zy_type {
    ZY_FORK = 1,
    ZY_READY,
    ZY_STARTED,
    ZY_FAILED,
    ZY_BOOT,
    ZY_STANDBY,
    ZY_PREPARED,
    ZY_ACTIVATE,
    ZY_ACTIVE,
    ZY_DECLINED,
    ZY_MAKE = 16,
    ZY_KILL,
    ZY_NEW,
    ZY_ENDED,
    ZY_GO,
    ZY_NOTMADE,
};

/* ZY_DECLINED's a: which of the standby's checks failed at activation. */
enum zy_decline {
    ZY_DECLINE_LIMITS = 1, /* its scheduling, limits, affinity, I/O priority or cgroup changed */
    ZY_DECLINE_CONFIG,     /* config files changed */
    ZY_DECLINE_USER_SITE,  /* the user site holds startup code */
    ZY_DECLINE_PID,        /* its pid view */
    ZY_DECLINE_OTHER,
};

typedef struct zy_rec {
    uint32_t type;
    uint32_t gen;
    int32_t a;
    int32_t b;
} zy_rec;

/* Fills out[ZY_REC_SIZE]. */
void zy_build(uint8_t out[ZY_REC_SIZE], uint32_t type, uint32_t gen, int32_t a);
/* Parses one received record of len bytes: 0, or -EBADMSG when it is not exactly one
 * well-formed record (size, known type, b == 0, gen and a as its type allows). */
int zy_parse(const void *buf, size_t len, zy_rec *ret);

/* Sends one record (with fd attached when fd >= 0); 0 or -errno. */
int zy_send(int sock, uint32_t type, uint32_t gen, int32_t a, int fd);
/* Receives one record, waiting at most timeout_ms (-1: no bound). Returns 1 with *ret filled
 * (and *fd the descriptor that came with it, close-on-exec, or -1; fd may be NULL, then any is
 * closed; only ZY_NEW, which needs one, and ZY_STARTED, a standby's, may carry one), 0 on timeout, -EPIPE at EOF, -EBADMSG for a malformed record, or -errno. */
int zy_recv(int sock, zy_rec *ret, int *fd, int timeout_ms);
