/* SPDX-License-Identifier: MIT */
/* The sub-commands of `cpa`; each returns the process exit code. */
#ifndef CPA_CLI_CLI_H
#define CPA_CLI_CLI_H

#include <stddef.h>

#include "common/opts.h"

#define CPA_PIDFILE_NAME ".cpa-monitor.pid"

int cmd_monitor(struct cpa_opts *o);
int cmd_show(struct cpa_opts *o);
int cmd_ctl(struct cpa_opts *o);

/* Directory of the running executable (from /proc/self/exe). */
int self_exe_dir(char *buf, size_t len);

#endif /* CPA_CLI_CLI_H */
