/* SIGKILL to every process of the caller's pid namespace but itself, and a bounded reap: only
 * a PID 1 (S1, or the sandbox's PID 1 without a zygote) calls it. */
#pragma once
#include <stdbool.h>

/* kill(-1, SIGKILL), then reaps its children for at most bound_ms. Every process got SIGKILL
 * (kill(-1) reaches each one, and a fork racing it fails), so none runs again; one that takes
 * longer to end (its exit is slow, or a host tracer holds its exit status) is left to the
 * caller's SIGCHLD loop, never waited for without a bound. Returns true when none is left.
 * SIGCHLD must be blocked (it is, in every PID 1 of the shim: its signalfd). */
bool shim_kill_all_bounded(int bound_ms);
