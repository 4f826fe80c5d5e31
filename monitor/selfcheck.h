/* The system service's start-up check: user, mount and pid namespaces, an id map, openat2, a
 * recursive read-only bind of /usr and a /proc for a new pid namespace, tried in a throwaway
 * child. A unit or host that forbids one gets an error naming the likely setting. */
#pragma once
#include "error.h"

int ipbm_selfcheck(ipb_error **err);
