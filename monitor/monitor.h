/* The system service: `ipyboxd` run as root. */
#pragma once

/* SYSCONFDIR of the build (the Makefile derives it from PREFIX). */
#ifndef IPYBOX_SYSCONFDIR
#define IPYBOX_SYSCONFDIR "/etc"
#endif
#define IPBM_DEFAULT_CONFIG IPYBOX_SYSCONFDIR "/ipybox/ipyboxd.conf"

/* argv as given to ipyboxd (without --user). Returns the exit code. */
int ipbm_main(int argc, char **argv);
