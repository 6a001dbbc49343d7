// SPDX-License-Identifier: MIT
/*
 * bench_ring: the shm ring between two processes pinned to different CPUs,
 * next to a minimal hand-written SPSC loop run the same way in the same run,
 * so the ratio (API / baseline) means something on a noisy shared machine.
 *
 * Prints one "name value unit" line per figure, then a table.
 *
 *   msg64_per_s       64-byte records (56 payload + 8 header), batched commit
 *   rec8k_gb_per_s    8 KiB records, producer writes and consumer reads them
 *   rec8k_nt_gb_per_s 8 KiB records, payload untouched (moves positions only,
 *                     which is what a bare SPSC loop measures)
 *   wake_p50_us/p99   consumer asleep in shm_ring__wait_sc, one record
 *                     committed: commit -> consumer running again
 *
 * Usage: bench_ring [--seconds S] [--cpus A,B]
 */
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shm/arena.h"
#include "common/timeutil.h"
#include "shm/ring.h"

static int cpu_a = 0, cpu_b = 1;
static double seconds = 1.0;

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/* Shared between the two processes of a run (MAP_SHARED anonymous). */
struct shared {
	volatile uint32_t go;
	volatile uint32_t stop;
	uint64_t consumed; /* records (or bytes) seen by the consumer */
	uint64_t elapsed_ns;
	uint64_t lat_ns[4096];
	uint32_t n_lat;
	uint64_t stamp; /* wake test: producer's commit time */
};

static struct shared *shared_new(void)
{
	void *p = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

static struct shm_arena *arena_new(uint64_t data_size)
{
	struct shm_layout l = {.n_rings = 1};
	struct shm_arena *a;
	int r;

	l.rings[0].data_size = data_size;
	l.rings[0].producer = SHM_STAGE_CAPTURE;
	l.rings[0].consumer = SHM_STAGE_UNWINDD;
	r = shm_arena__create(&l, &a);
	if (r < 0) {
		fprintf(stderr, "arena: %s\n", strerror(-r));
		exit(1);
	}
	return a;
}

/* ---------------- throughput through the API ---------------- */

static void api_producer(struct shm_arena *a, struct shared *sh, uint32_t payload, bool touch)
{
	struct shm_ring_prod p;
	uint64_t seq = 0;
	unsigned int batch = payload <= 64 ? 32 : 1;

	shm_arena__open_prod(a, 0, &p);
	pin(cpu_a);
	while (!sh->go)
		;
	while (!sh->stop) {
		unsigned int k;

		for (k = 0; k < batch; k++) {
			void *d;

			if (shm_ring__reserve_sp(&p, payload, 1, &d) < 0)
				break;
			if (touch)
				memset(d, (int)seq, payload);
			else
				*(uint64_t *)d = seq;
			seq++;
		}
		shm_ring__commit_sp(&p);
	}
	_exit(0);
}

static void api_consumer(struct shm_arena *a, struct shared *sh, bool touch)
{
	struct shm_ring_cons c;
	struct shm_msg msgs[64];
	uint64_t n = 0, sink = 0, t0, dl;

	shm_arena__open_cons(a, 0, &c);
	pin(cpu_b);
	sh->go = 1;
	t0 = clock_ns(CLOCK_MONOTONIC);
	dl = t0 + (uint64_t)(seconds * 1e9);
	for (;;) {
		int i, k = shm_ring__peek_batch_sc(&c, msgs, 64);

		for (i = 0; i < k; i++) {
			if (touch) {
				const uint64_t *w = msgs[i].data;
				uint32_t j;

				for (j = 0; j < msgs[i].len / 8; j += 8)
					sink += w[j];
			} else {
				sink += *(const uint64_t *)msgs[i].data;
			}
		}
		if (k > 0) {
			shm_ring__release_sc(&c);
			n += (uint64_t)k;
		}
		if ((n & 0xfff) < 64 && clock_ns(CLOCK_MONOTONIC) >= dl)
			break;
	}
	sh->elapsed_ns = clock_ns(CLOCK_MONOTONIC) - t0;
	sh->consumed = n + (sink & 0); /* keep sink alive */
	sh->stop = 1;
}

/* ---------------- hand-written baseline: fixed slots, two counters ---------------- */

struct raw_ring {
	uint64_t head __attribute__((aligned(128)));
	uint64_t tail __attribute__((aligned(128)));
	uint8_t data[] __attribute__((aligned(128)));
};

static void raw_producer(struct raw_ring *r, uint64_t size, struct shared *sh, uint32_t rec,
			 bool touch)
{
	uint64_t head = 0, tail_cache = 0, mask = size - 1, seq = 0;
	unsigned int batch = rec <= 64 ? 32 : 1;

	pin(cpu_a);
	while (!sh->go)
		;
	while (!sh->stop) {
		unsigned int k;

		for (k = 0; k < batch; k++) {
			if (head + rec - tail_cache > size) {
				tail_cache = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
				if (head + rec - tail_cache > size)
					break;
			}
			if (touch)
				memset(r->data + (head & mask), (int)seq, rec);
			else
				*(uint64_t *)(r->data + (head & mask)) = seq;
			head += rec;
			seq++;
		}
		__atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
	}
	_exit(0);
}

static void raw_consumer(struct raw_ring *r, uint64_t size, struct shared *sh, uint32_t rec,
			 bool touch)
{
	uint64_t tail = 0, head_cache = 0, mask = size - 1, n = 0, sink = 0, t0, dl;

	pin(cpu_b);
	sh->go = 1;
	t0 = clock_ns(CLOCK_MONOTONIC);
	dl = t0 + (uint64_t)(seconds * 1e9);
	for (;;) {
		if (tail == head_cache)
			head_cache = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
		while (tail != head_cache) {
			const uint64_t *w = (const uint64_t *)(r->data + (tail & mask));

			if (touch) {
				uint32_t j;

				for (j = 0; j < rec / 8; j += 8)
					sink += w[j];
			} else {
				sink += w[0];
			}
			tail += rec;
			n++;
		}
		__atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
		if ((n & 0xfff) < 64 && clock_ns(CLOCK_MONOTONIC) >= dl)
			break;
	}
	sh->elapsed_ns = clock_ns(CLOCK_MONOTONIC) - t0;
	sh->consumed = n + (sink & 0);
	sh->stop = 1;
}

/* Returns records per second. */
static double run_pair(bool api, uint64_t ring_size, uint32_t rec_total, bool touch)
{
	struct shared *sh = shared_new();
	struct shm_arena *a = NULL;
	struct raw_ring *raw = NULL;
	double rate;
	pid_t pid;

	if (api) {
		a = arena_new(ring_size);
	} else {
		raw = mmap(NULL, sizeof(*raw) + ring_size, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (raw == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
	}
	pid = fork();
	if (pid == 0) {
		if (api)
			api_producer(a, sh, rec_total - SHM_REC_HDR_SIZE, touch);
		else
			raw_producer(raw, ring_size, sh, rec_total, touch);
	}
	if (api)
		api_consumer(a, sh, touch);
	else
		raw_consumer(raw, ring_size, sh, rec_total, touch);
	waitpid(pid, NULL, 0);
	rate = (double)sh->consumed * 1e9 / (double)sh->elapsed_ns;
	shm_arena__free(a);
	if (raw)
		munmap(raw, sizeof(*raw) + ring_size);
	munmap(sh, sizeof(*sh));
	return rate;
}

/* ---------------- wakeup latency ---------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void wake_latency(bool api, double *p50, double *p99)
{
	const uint32_t rounds = 2000;
	struct shared *sh = shared_new();
	struct shm_arena *a = arena_new(1 << 16);
	uint32_t *fword = (uint32_t *)&sh->n_lat + 0; /* baseline futex word */
	pid_t pid;
	uint32_t i;

	(void)fword;
	pid = fork();
	if (pid == 0) {
		struct shm_ring_prod p;
		struct shm_ring_ctrl *ctrl = shm_arena__ring_mem(a, 0, NULL);

		shm_arena__open_prod(a, 0, &p);
		pin(cpu_a);
		for (i = 0; i < rounds; i++) {
			void *d;

			/* Let the consumer fall asleep for real. */
			if (api) {
				while (!__atomic_load_n(&ctrl->waiting, __ATOMIC_ACQUIRE))
					;
			} else {
				while (__atomic_load_n(&sh->go, __ATOMIC_ACQUIRE) != 1)
					;
			}
			usleep(300);
			__atomic_store_n(&sh->stamp, clock_ns(CLOCK_MONOTONIC), __ATOMIC_RELEASE);
			if (api) {
				shm_ring__reserve_sp(&p, 8, 1, &d);
				shm_ring__commit_sp(&p);
			} else {
				__atomic_store_n(&sh->go, 2, __ATOMIC_RELEASE);
				syscall(SYS_futex, &sh->go, FUTEX_WAKE, 1, NULL, NULL, 0);
			}
		}
		_exit(0);
	}

	pin(cpu_b);
	{
		struct shm_ring_cons c;
		struct shm_msg m;

		shm_arena__open_cons(a, 0, &c);
		for (i = 0; i < rounds; i++) {
			if (api) {
				while (shm_ring__peek_sc(&c, &m) == -EAGAIN)
					shm_ring__wait_sc(&c, 1, 1000);
				shm_ring__release_sc(&c);
			} else {
				__atomic_store_n(&sh->go, 1, __ATOMIC_RELEASE);
				while (__atomic_load_n(&sh->go, __ATOMIC_ACQUIRE) == 1)
					syscall(SYS_futex, &sh->go, FUTEX_WAIT, 1, NULL, NULL, 0);
			}
			sh->lat_ns[i % 4096] = clock_ns(CLOCK_MONOTONIC) -
					       __atomic_load_n(&sh->stamp, __ATOMIC_ACQUIRE);
		}
	}
	waitpid(pid, NULL, 0);
	qsort(sh->lat_ns, rounds, sizeof(uint64_t), cmp_u64);
	*p50 = (double)sh->lat_ns[rounds / 2] / 1000.0;
	*p99 = (double)sh->lat_ns[rounds * 99 / 100] / 1000.0;
	shm_arena__free(a);
	munmap(sh, sizeof(*sh));
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of reps interleaved runs of (api, baseline). */
static void measure(uint64_t ring, uint32_t rec, bool touch, int reps, double *api, double *raw)
{
	double va[16], vr[16];
	int i;

	for (i = 0; i < reps; i++) {
		va[i] = run_pair(true, ring, rec, touch);
		vr[i] = run_pair(false, ring, rec, touch);
	}
	qsort(va, (size_t)reps, sizeof(double), cmp_double);
	qsort(vr, (size_t)reps, sizeof(double), cmp_double);
	*api = va[reps / 2];
	*raw = vr[reps / 2];
}

int main(int argc, char **argv)
{
	double m_api, m_raw, k_api, k_raw, n_api, n_raw, w50, w99, b50, b99;
	const int reps = 5;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--cpus") && i + 1 < argc)
			sscanf(argv[++i], "%d,%d", &cpu_a, &cpu_b);
		else {
			fprintf(stderr, "usage: %s [--seconds S] [--cpus A,B]\n", argv[0]);
			return 2;
		}
	}
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		cpu_b = cpu_a;

	measure(1 << 20, 64, false, reps, &m_api, &m_raw);
	measure(8 << 20, 8192, true, reps, &k_api, &k_raw);
	measure(8 << 20, 8192, false, reps, &n_api, &n_raw);
	wake_latency(true, &w50, &w99);
	wake_latency(false, &b50, &b99);

	printf("msg64_per_s %.0f msg/s\n", m_api);
	printf("rec8k_gb_per_s %.2f GB/s\n", k_api * 8192 / 1e9);
	printf("rec8k_nt_gb_per_s %.2f GB/s\n", n_api * 8192 / 1e9);
	printf("wake_p50_us %.1f us\n", w50);
	printf("wake_p99_us %.1f us\n", w99);
	printf("\n%-22s %14s %14s %8s\n", "figure (median of 5)", "shm ring API", "hand loop",
	       "ratio");
	printf("%-22s %14.0f %14.0f %7.0f%%\n", "64 B msgs/s", m_api, m_raw, 100 * m_api / m_raw);
	printf("%-22s %14.2f %14.2f %7.0f%%\n", "8 KiB GB/s", k_api * 8192 / 1e9,
	       k_raw * 8192 / 1e9, 100 * k_api / k_raw);
	printf("%-22s %14.2f %14.2f %7.0f%%\n", "8 KiB untouched GB/s", n_api * 8192 / 1e9,
	       n_raw * 8192 / 1e9, 100 * n_api / n_raw);
	printf("%-22s %14.1f %14.1f %7.0f%%\n", "wake p50 us", w50, b50, 100 * b50 / w50);
	printf("%-22s %14.1f %14.1f %7.0f%%\n", "wake p99 us", w99, b99, 100 * b99 / w99);
	printf("(ratio: API as a share of the hand loop's throughput, or of its speed for"
	       " latency)\n");
	return 0;
}
