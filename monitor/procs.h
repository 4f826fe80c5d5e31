/* Processes found in /proc and signalled without pid reuse races: each is opened as a pidfd
 * first, then checked, then signalled through that pidfd (a pid reused after the check is a
 * different process, and the signal fails instead of reaching it). */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Processes with any of their uids in [base, base + n): a sandbox's, since its user namespace
 * maps only its range. SIGKILLs them when kill. Returns how many were found. */
int ipbm_range_procs(uint32_t base, uint32_t n, bool kill);
/* One pass over /proc for the pool's slots (nslots ranges of range uids from start): busy[i]
 * set when a process has a uid in slot i; processes of a slot with kill[i] set are SIGKILLed
 * (kill may be NULL). Returns how many processes had a uid in the pool. */
int ipbm_pool_scan(uint32_t start, uint32_t nslots, uint32_t range, const uint8_t *kill, uint8_t *busy);
/* SIGKILL to pid if /proc/<pid>/cgroup still names a cgroup ending in leaf (a line ending
 * "/<leaf>"). */
void ipbm_kill_in_cgroup(pid_t pid, const char *leaf);
