/* SPDX-License-Identifier: MIT */
/*
 * Files a flag names (--config, --policy, --probe's binary, --btf_path):
 * opened without ever blocking (O_NONBLOCK: a FIFO or a device does not hang
 * the open) and refused unless a regular file, and for the files that decide
 * how cpa runs (config, policy) refused unless trusted: owned by root or by
 * us and writable by nobody else. One rule for every such file.
 */
#ifndef CPA_INPUTFILE_H
#define CPA_INPUTFILE_H

#include <stddef.h>
#include <sys/stat.h>

/* input_file__open(): the file decides how cpa (root) runs: check its owner and mode. */
#define INPUT_FILE_TRUSTED 1u

/*
 * Open path for reading (O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY) and
 * fstat it: 0 and the fd in *ret_fd, or -errno with one line in err
 * ("<what>: not a regular file (a FIFO)"), what naming the file for the
 * user, e.g. "--config '/etc/cpa.conf'". flags: INPUT_FILE_*.
 */
int input_file__open(const char *what, const char *path, unsigned int flags, int *ret_fd, char *err,
		     size_t errlen);

/*
 * The trust rule alone, on a stat the caller made (a file or a directory):
 * owned by root or by our euid, not writable by others, and writable by its
 * group only when that is root's or ours. 0, or -EPERM with the line in err.
 */
int input_file__check_trust(const char *what, const struct stat *sb, char *err, size_t errlen);

#endif /* CPA_INPUTFILE_H */
