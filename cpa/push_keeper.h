/* SPDX-License-Identifier: MIT */
/*
 * `cpa monitor --push URL`: cpa-push (push/, docs/push.md) next to the
 * stages, under a small keeper process that restarts it when it exits and
 * stops it with the monitor. cpa-push only reads the store, so it is not in
 * the arena and the supervisor does not need to know it.
 */
#ifndef CPA_PUSH_KEEPER_H
#define CPA_PUSH_KEEPER_H

#include <sys/types.h>

/* Fork the keeper for dir/cpa-push --store_dir store_dir --url url; its pid or -errno. */
pid_t push_keeper__start(const char *dir, const char *store_dir, const char *url);
/* SIGTERM to the keeper (it stops cpa-push) and wait for it. Accepts pid <= 0. */
void push_keeper__stop(pid_t keeper);

#endif /* CPA_PUSH_KEEPER_H */
