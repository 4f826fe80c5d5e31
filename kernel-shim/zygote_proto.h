/* The records between a sandbox's PID 1 (S1) and its zygote, and between S1 and the shim
 * above it (S0) that makes zygotes (architecture.md, "Zygote kernels"). Every record is 16
 * bytes, {u32 type, u32 gen, i32 a, i32 b}, in host byte order, on SOCK_SEQPACKET
 * socketpairs; a record of another size or an unknown or inconsistent one is malformed.
 *
 *   S1 -> zygote   ZY_BOOT                  boot: to S0's child before its exec, which holds
 *                                           the zygote's place until S1 lets it boot
 *                  ZY_FORK {gen}            fork the kernel of generation gen
 *   zygote -> S1   ZY_READY                 booted: its imports are done
 *                  ZY_STARTED {gen, a=pid}  the kernel runs as pid (in S1's namespace, > 1)
 *                  ZY_FAILED {gen, a=errno} the fork failed (errno > 0)
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
    ZY_MAKE = 16,
    ZY_KILL,
    ZY_NEW,
    ZY_ENDED,
    ZY_GO,
    ZY_NOTMADE,
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
 * closed), 0 on timeout, -EPIPE at EOF, -EBADMSG for a malformed record, or -errno. */
int zy_recv(int sock, zy_rec *ret, int *fd, int timeout_ms);
