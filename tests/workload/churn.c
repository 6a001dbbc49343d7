// SPDX-License-Identifier: MIT
/*
 * cpa-wl-churn: short-lived processes, for the mapping history tests
 * (docs/unwindd.md) and benches.
 *
 *   cpa-wl-churn --children N   N children, two at a time, each 20-100 ms of
 *                               CPU in the shared library (FP-less), then _exit.
 *                               Odd ones exec themselves (--child MS): a new
 *                               image; even ones work in the forked copy.
 *       main -> wl_child -> wl_lib_work -> wl_lib_spin
 *   cpa-wl-churn --dlopen LIB [--ms MS]  dlopen LIB, MS ms of CPU in it
 *                               (wl_dl_work -> wl_dl_spin), dlclose, exit.
 *
 * Prints "pid <pid>" at start and, at the end, "children <n> <cpu_ns>": what
 * the children measured of their own work.
 * Built without frame pointers: the children's stacks unwind through DWARF.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wl_lib.h"

#define WL_FN __attribute__((noinline))

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ms of CPU through fn, then _exit: the work is the last thing it does. */
WL_FN static void wl_child(uint64_t (*fn)(uint64_t, uint64_t), unsigned int ms)
{
	uint64_t t0 = cpu_ns(), acc = 0;

	while (cpu_ns() - t0 < ms * 1000000ull)
		acc += fn(20000, acc);
	__asm__ volatile("" : "+r"(acc));
}

static int dl_run(const char *lib, unsigned int ms)
{
	uint64_t (*fn)(uint64_t, uint64_t);
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
		return 1;
	}
	*(void **)&fn = dlsym(h, "wl_dl_work");
	if (!fn) {
		fprintf(stderr, "dlsym wl_dl_work: %s\n", dlerror());
		return 1;
	}
	wl_child(fn, ms);
	dlclose(h);
	return 0;
}

static pid_t start_child(const char *self, unsigned int i, unsigned int ms)
{
	char arg[16];
	pid_t pid = fork();

	if (pid)
		return pid;
	if (i & 1) {
		snprintf(arg, sizeof(arg), "%u", ms);
		execl(self, self, "--child", arg, (char *)NULL);
		_exit(127);
	}
	wl_child(wl_lib_work, ms);
	_exit(0);
}

int main(int argc, char **argv)
{
	unsigned int children = 0, ms = 100, running = 0, i;
	const char *lib = NULL;
	char self[4096];
	ssize_t n;
	uint64_t total = 0;
	int st, rc = 0;

	for (i = 1; i < (unsigned int)argc; i++) {
		if (!strcmp(argv[i], "--children") && i + 1 < (unsigned int)argc) {
			children = (unsigned int)atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--child") && i + 1 < (unsigned int)argc) {
			wl_child(wl_lib_work, (unsigned int)atoi(argv[++i]));
			_exit(0);
		} else if (!strcmp(argv[i], "--dlopen") && i + 1 < (unsigned int)argc) {
			lib = argv[++i];
		} else if (!strcmp(argv[i], "--ms") && i + 1 < (unsigned int)argc) {
			ms = (unsigned int)atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: %s --children N | --dlopen LIB [--ms MS]\n",
				argv[0]);
			return 2;
		}
	}
	printf("pid %d\n", getpid());
	fflush(stdout);
	if (lib)
		return dl_run(lib, ms);
	/* Every symbol bound before the children run (here for the forked
	 * ones, at load for the exec'd ones): lazy binding's
	 * _dl_runtime_resolve_xsave* frames in every child would be a stack
	 * copy matter (their xsave area), not the mapping one this tests. */
	setenv("LD_BIND_NOW", "1", 1);
	total = wl_lib_work(1, 1) & 0;
	/* Our real path: exec'd children keep our name as their comm. */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = '\0';

	for (i = 0; i < children || running;) {
		struct rusage ru;

		if (i < children && running < 2) {
			/* 20..100 ms, spread evenly */
			if (start_child(self, i, 20 + (i * 37) % 81) < 0) {
				perror("fork");
				return 1;
			}
			i++;
			running++;
			continue;
		}
		if (wait4(-1, &st, 0, &ru) < 0)
			break;
		running--;
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			rc = 1;
		total += (uint64_t)ru.ru_utime.tv_sec * 1000000000ull +
			 (uint64_t)ru.ru_utime.tv_usec * 1000ull +
			 (uint64_t)ru.ru_stime.tv_sec * 1000000000ull +
			 (uint64_t)ru.ru_stime.tv_usec * 1000ull;
	}
	printf("children %u %llu\n", children, (unsigned long long)total);
	return rc;
}
