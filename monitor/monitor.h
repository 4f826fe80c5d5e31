/* The system service: `ipyboxd` run as root. */
#pragma once

#define IPBM_DEFAULT_CONFIG "/etc/ipybox/ipyboxd.conf"

/* argv as given to ipyboxd (without --user). Returns the exit code. */
int ipbm_main(int argc, char **argv);
