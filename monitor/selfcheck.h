/* The system service's start-up check: openat2, namespaces of every kind a sandbox has, an id
 * map, a hostname, a recursive read-only bind of /usr and a /proc for a new pid namespace,
 * tried in a throwaway child. A unit or host that forbids one gets an error naming the likely setting. */
#pragma once
#include "error.h"

int ipbm_selfcheck(ipb_error **err);
