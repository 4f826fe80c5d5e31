/* SIGKILL to every process of the caller's pid namespace but itself, and a bounded reap: only
 * a PID 1 (S1, or the sandbox's PID 1 without a zygote) calls it. */
#pragma once
#include <stdbool.h>
#include <sys/types.h>

/* kill(-1, SIGKILL), then reaps its children for at most bound_ms. Every process got SIGKILL
 * (kill(-1) reaches each one, and a fork racing it fails), so none runs again; one that takes
 * longer to end (its exit is slow, or a host tracer holds its exit status) is left to the
 * caller's SIGCHLD loop, never waited for without a bound. Returns true when none is left.
 * SIGCHLD must be blocked (it is, in every PID 1 of the shim: its signalfd). */
bool shim_kill_all_bounded(int bound_ms);
/* KILL_ALL with a standby kernel: SIGKILL to every process of the caller's pid namespace but
 * itself and spare, and their reap, within bound_ms. kill(-1) cannot spare one, so it makes
 * passes over /proc (which must be the namespace's own: S1's is P1's): each pass reaps what
 * ended (reaping spare too, if it ended: *spare_gone is then set, and a later process with its
 * pid dies like any other), lists the numeric entries and sends SIGKILL to each but 1 and
 * spare; done when a pass finds none. Pids are stable (the caller is the namespace's reaper: a
 * pid is reused only after its reap); a process with SIGKILL pending forks no more, and a child
 * forked just before shows in the next pass. Refuses (returns -EPERM, kills nothing) unless the
 * caller is PID 1 and /proc/self is "1": outside a pid namespace of its own, or with another
 * namespace's /proc, a walk would kill what it must never reach. Returns 1 when none is left
 * but spare, 0 when the bound passed first (stragglers go to the caller's SIGCHLD loop), or
 * -errno. spare 0: spares none. SIGCHLD must be blocked. */
int shim_kill_all_sparing(pid_t spare, int bound_ms, bool *spare_gone);
