/* SPDX-License-Identifier: MIT */
/*
 * The env label rule (--record_env_name K1,K2): the value of the first key
 * of the list that is set in a process's environment. symd labels samples
 * with it and unwindd filters on it (--parse_env_values), so both must apply
 * exactly the same rule: it lives here, once.
 */
#ifndef CPA_ENVLABEL_H
#define CPA_ENVLABEL_H

#include <stddef.h>

/* Label of a process whose environment has none of the keys. */
#define ENV_LABEL_NONE "SYSTEM"

/*
 * environ: a /proc/PID/environ image (NUL-separated KEY=VALUE, len bytes).
 * keys: comma list. Returns the value of the first key found, in key order
 * (not environ order), with its length in *ret_len; NULL when none is set.
 */
const char *env_label_pick(const char *environ, size_t len, const char *keys, size_t *ret_len);

#endif /* CPA_ENVLABEL_H */
