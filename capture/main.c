// SPDX-License-Identifier: MIT
/* capture: spawned by `cpa monitor` with the arena on fd 3 (docs/pipeline.md). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "capture.h"
#include "common/log.h"
#include "shm/arena.h"

#define SHM_ARENA_FD 3

static void on_sigterm(int sig)
{
	(void)sig;
	capture__request_exit();
}

static int signals_setup(void)
{
	struct sigaction sa = {.sa_handler = on_sigterm};

	/* No SA_RESTART: the poll must return EINTR so SIGTERM is prompt. */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) < 0)
		return -errno;
	/* The monitor orchestrates shutdown; a terminal's ^C is not for us. */
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

int main(int argc, char **argv)
{
	struct shm_arena *a = NULL;
	int r;

	log_set_subsystem("capture");
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v")) {
			log_set_level(LOG_LVL_DEBUG);
		} else {
			log_error("unknown argument '%s'", argv[i]);
			return 2;
		}
	}
	if (fcntl(SHM_ARENA_FD, F_GETFD) < 0) {
		log_error("no arena on fd 3: run me from `cpa monitor`");
		return 2;
	}
	r = shm_arena__attach(SHM_ARENA_FD, &a);
	if (r < 0) {
		log_error_errno(r, "attach arena on fd 3: %m");
		return 2;
	}
	r = signals_setup();
	if (r < 0) {
		log_error_errno(r, "install signal handlers: %m");
		shm_arena__free(a);
		return 1;
	}
	r = capture__run(a);
	shm_arena__free(a);
	return r < 0 ? 1 : 0;
}
