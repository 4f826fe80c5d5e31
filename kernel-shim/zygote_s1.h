/* S1's side of the zygote (architecture.md, "Zygote kernels"): its boot, the fork of each
 * kernel, and what happens when it ends. Only S1 (the sandbox's PID 1 in kernel mode) uses it. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* OFF: no zygote in this sandbox (none made, or given up: then a held Zpre that never boots
 * keeps its place in the pids limit). NONE: the last one ended; the next
 * kernel starts the slow way. MAKING: asked S0 for one, its channel is due. BOOTING: S0's child
 * is there, held before its exec until S1 lets it boot (go), then booting. READY: forks. */
enum shim_zy_state { SHIM_ZY_OFF, SHIM_ZY_NONE, SHIM_ZY_MAKING, SHIM_ZY_BOOTING, SHIM_ZY_READY };

typedef struct shim_zygote {
    int ctl; /* to S0; -1: no zygote in this sandbox */
    int fd;  /* to the current zygote, or -1 */
    enum shim_zy_state state;
    long deadline;    /* MAKING or BOOTING once go is set: READY is due by then */
    bool go;          /* the current one may boot (its kernel answered, or a START) */
    bool go_sent;     /* ZY_BOOT sent to it */
    bool booted;      /* the current one sent READY */
    bool started;     /* a kernel was started in this sandbox */
    int failed_boots; /* zygotes in a row that ended before READY */
    bool untold;      /* an end not yet told to the supervisor */
    int status;       /* its wait status */
    int why;          /* SHIM_ZYGOTE_LATE or _BAD: why S1 had it killed (the end untold) */
    int killing_why;  /* the same, for the kill asked and not yet ended */
    unsigned answers; /* records from S0 so far (ZY_NEW, ZY_ENDED, ZY_NOTMADE) */
    bool gave_up_told;
    bool ending;     /* S0 was asked to kill it; its ZY_ENDED is due */
    bool after_loss; /* held at once when a zygote S0 had made ended between starts (for
                              its slot): the next START still takes the slow way, without booting
                              it, and its kernel's answer lets it boot (not the running one's) */
} shim_zygote;

#define SHIM_ZY_BOOT_MS 10000
#define SHIM_ZY_FIRST_BOOT_MS 50000
#define SHIM_ZY_FORK_MS 2000

/* ctl < 0: no zygote. Otherwise asks S0 for one and lets it boot at once: the first kernel is
 * forked from it (SHIM_ZY_FIRST_BOOT_MS). */
void shim_zygote_init(shim_zygote *z, int ctl);
/* The descriptors S1 polls for the zygote (-1 where none); returns how many were filled. */
int shim_zygote_pollfds(const shim_zygote *z, int fds[2]);
/* Handles whatever arrived from S0 or the zygote, without waiting. */
void shim_zygote_service(shim_zygote *z);
/* Starts the kernel of generation gen from the zygote, letting a held one boot and waiting for
 * READY (the first zygote within SHIM_ZY_FIRST_BOOT_MS of its boot, later ones within
 * SHIM_ZY_BOOT_MS). Returns
 * its pid (> 1), or 0: take the slow way (having told the supervisor on sup_fd, once, of a
 * zygote that ended, and with the next zygote's place in the pids limit taken by a held Zpre
 * when there was none). Any process a failed fork may have left in P1 is killed. */
pid_t shim_zygote_start(shim_zygote *z, int sup_fd, uint32_t gen);
/* After a kernel started the slow way: a new zygote (held), or when given up a held one that is
 * never let boot, if shim_zygote_start could not make it before (the slot the pids limit was
 * raised by is never the kernel's). */
void shim_zygote_after_slow(shim_zygote *z);
/* The running kernel answered the supervisor: a held zygote boots now. */
void shim_zygote_answered(shim_zygote *z);
/* Asks the READY zygote for a standby kernel (ZY_STANDBY {serial}; standby_s1.h) and awaits its
 * answer within SHIM_ZY_FORK_MS, as for a kernel's fork: a late or bad answer (a ZY_STARTED
 * without the standby's channel too) has the zygote killed. Returns the standby's pid (> 1)
 * with its channel in *chan, or 0 (no zygote READY, it could not fork, or it was killed). */
pid_t shim_zygote_fork_standby(shim_zygote *z, uint32_t serial, int *chan);
