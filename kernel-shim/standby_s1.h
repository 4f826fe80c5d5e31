/* S1's side of the standby kernel (--standby; architecture.md, "Zygote kernels"): a kernel
 * forked from the zygote once the running kernel answered, which prepares and waits in P1; the
 * next reset's KILL_ALL spares it and START activates it instead of forking. Records
 * (zygote_proto.h): ZY_STANDBY to the zygote, ZY_PREPARED, ZY_ACTIVATE, ZY_ACTIVE and
 * ZY_DECLINED on the standby's own channel. Only S1 uses it. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "zygote_s1.h"

typedef struct shim_standby {
    bool enabled;      /* cfg->standby */
    pid_t pid;         /* the standby (> 1), or 0: none */
    int fd;            /* its channel; -1 with pid > 0: it was killed, its reap is due */
    bool prepared;     /* it sent ZY_PREPARED */
    uint32_t serial;   /* the last standby serial asked of the zygote (1, 2, ...) */
    bool made;         /* one was asked for the kernel of generation made_for */
    uint32_t made_for; /* (at most one per kernel generation: no respawn loop) */
    bool answered;     /* the running kernel of generation answered_gen answered */
    uint32_t answered_gen;
    long due; /* a standby is not made before then (ms, ipb_now_ms) */
} shim_standby;

/* How long after the running kernel's answer the standby is made: its fork and preparation
 * (~40 ms of CPU) then come after the first cells a client sends after a reset, not beside them. */
#define SHIM_STANDBY_DELAY_MS 300

void shim_standby_init(shim_standby *sb, bool enabled);
/* The kernel of generation gen answered the supervisor (SHIM_CMD_ANSWERED): a standby is due
 * SHIM_STANDBY_DELAY_MS later. */
void shim_standby_answered(shim_standby *sb, uint32_t gen);
/* How long the caller may wait before shim_standby_maybe_make has something to do (ms), or -1. */
int shim_standby_wait_ms(const shim_standby *sb, bool running, uint32_t gen);
/* Makes one when it is due: enabled, the zygote READY, a kernel of generation gen running and
 * answered, none there and none made for gen. Waits for the zygote's answer within
 * SHIM_ZY_FORK_MS (a late or bad one has the zygote killed). */
void shim_standby_maybe_make(shim_standby *sb, shim_zygote *z, bool running, uint32_t gen);
/* Its channel to poll, or -1. */
int shim_standby_pollfd(const shim_standby *sb);
/* Its channel is readable: ZY_PREPARED with its serial marks it prepared; anything else, or EOF,
 * has it SIGKILLed (its reap comes through the caller's SIGCHLD loop: shim_standby_reaped). */
void shim_standby_service(shim_standby *sb);
/* A child was reaped (its pid w): when it is the standby, the standby is gone. */
void shim_standby_reaped(shim_standby *sb, pid_t w);
/* The standby was killed and reaped by a kill(-1) path (session end, errors, a failed fork):
 * forget it, without signalling anything (its pid may be another process's by now). */
void shim_standby_forget(shim_standby *sb);
/* The pid KILL_ALL spares: a live standby's (its channel open), else 0. */
pid_t shim_standby_spared(const shim_standby *sb);
/* START of generation gen: a prepared standby becomes the kernel (SIGCONT, ZY_ACTIVATE {gen},
 * ZY_ACTIVE {gen} within SHIM_ZY_FORK_MS): returns its pid (> 1), the standby forgotten. Else
 * (none, not prepared, declined, EOF, late, bad) any standby is SIGKILLed and reaped (waitpid
 * on its pid only, within SHIM_ZY_FORK_MS) and 0 is returned: start the way of today. */
pid_t shim_standby_activate(shim_standby *sb, uint32_t gen);
