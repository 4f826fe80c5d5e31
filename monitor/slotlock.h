/* Pool slots shared by every monitor on the host: the system service's and the private ones
 * that `ipybox mcp`, `ipybox run` and `ipyboxd --user` start when run by root (monitor.h).
 * All of them take slots from the same pool (the service's configuration), so a slot is used
 * only while its monitor holds an flock on /run/ipybox-slots/<first uid of the slot> (beside
 * /run/ipybox, which the service removes when it stops); the lock
 * goes with the monitor's descriptor, so a monitor that dies frees its slots for whoever
 * cleans them up next. */
#pragma once
#include <stdint.h>

#include "pool.h"

#define IPBM_SLOT_DIR "/run/ipybox-slots"

/* The slot's lock, taken without waiting: its descriptor (close-on-exec; closing it frees the
 * slot), -EWOULDBLOCK when another monitor holds it, or another -errno. */
int ipbm_slot_lock(const ipbm_pool *p, int slot);

/* A free slot of the pool (ipbm_pool_take) whose lock this process got (*lock_fd), or -1 when
 * none is both free here and unlocked elsewhere. */
int ipbm_slot_take(ipbm_pool *p, int *lock_fd);
