/* Network namespace plumbing. For now the sandbox gets loopback only; egress (nftables
 * redirect to the supervisor's proxy) arrives with its own issue. */
#pragma once
#include "error.h"

/* Brings `lo` up in the caller's network namespace. */
int ipb_netns_loopback_up(ipb_error **err);
