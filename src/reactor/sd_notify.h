/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_SD_NOTIFY_H
#define MC_SD_NOTIFY_H

/*
 * The systemd readiness protocol (sd_notify(3)) without libsystemd: one datagram to the
 * AF_UNIX socket named by $NOTIFY_SOCKET (a path, or an abstract name starting with '@').
 * Daemons send "READY=1" once they listen (and, for the master, once recovery is done),
 * "RELOADING=1" / "STOPPING=1" around SIGHUP and SIGTERM, and "STATUS=..." lines.
 *
 * Returns 1 if sent, 0 when not running under systemd (no NOTIFY_SOCKET), -errno on failure.
 */
int mc_sd_notify(const char *state);

#endif
