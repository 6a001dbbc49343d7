// SPDX-License-Identifier: MIT
/*
 * Arena tests: create/attach over a real memfd, layout validation, seals,
 * and refusal of corrupt, truncated or newer-version arenas.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/hash.h"
#include "shm/arena.h"
#include "shm/counters.h"
#include "test_util.h"

static struct shm_arena *arena_default(void)
{
	struct shm_layout l;
	struct shm_arena *a;

	shm_layout__default(&l, 8192, 64);
	ck_assert_int_eq(shm_arena__create(&l, &a), 0);
	return a;
}

/* A writable private copy of an arena image, for scribbling on. */
static void *image_copy(struct shm_arena *a)
{
	void *img = aligned_alloc(4096, a->size);

	ck_assert_ptr_nonnull(img);
	memcpy(img, a->base, a->size);
	return img;
}

START_TEST(test_create_attach)
{
	struct shm_arena *a = arena_default(), *b;
	struct shm_ring_prod p;
	struct shm_ring_cons c;
	struct shm_msg m;
	void *d;
	int seals;

	ck_assert_uint_eq(shm_arena__nr_rings(a), SHM_RING_DEFAULT_NR);
	ck_assert_int_eq(shm_arena__find_ring(a, SHM_STAGE_UNWINDD, SHM_STAGE_SYMD),
			 SHM_RING_UNWIND);
	ck_assert_int_eq(shm_arena__find_ring(a, SHM_STAGE_STORER, SHM_STAGE_CAPTURE), -ENOENT);
	ck_assert_uint_eq(shm_arena__stage(a, SHM_STAGE_SYMD)->id, SHM_STAGE_SYMD);
	ck_assert_ptr_null(shm_arena__stage(a, SHM_STAGE_MAX));

	seals = fcntl(shm_arena__fd(a), F_GET_SEALS);
	ck_assert_int_eq(seals & (F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL),
			 F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
	/* Sealed: nobody can resize it. */
	ck_assert_int_lt(ftruncate(shm_arena__fd(a), 4096), 0);

	/* A second mapping (as a stage would have) sees the same config and rings. */
	strcpy(shm_arena__config(a)->store_dir, "/tmp/x");
	ck_assert_int_eq(shm_arena__attach(dup(shm_arena__fd(a)), &b), 0);
	ck_assert_str_eq(shm_arena__config(b)->store_dir, "/tmp/x");
	ck_assert_int_eq(shm_arena__open_prod(a, SHM_RING_SYMD, &p), 0);
	ck_assert_int_eq(shm_arena__open_cons(b, SHM_RING_SYMD, &c), 0);
	ck_assert_int_eq(shm_ring__reserve_sp(&p, 32, 3, &d), 0);
	memcpy(d, "hello", 6);
	shm_ring__commit_sp(&p);
	ck_assert_int_eq(shm_ring__peek_sc(&c, &m), 0);
	ck_assert_str_eq(m.data, "hello");
	ck_assert_int_eq(shm_arena__open_cons(b, 99, &c), -ENOENT);

	shm_arena__free(b);
	shm_arena__free(a);
	shm_arena__free(NULL);
}
END_TEST

START_TEST(test_attach_across_fork)
{
	struct shm_arena *a = arena_default();
	struct shm_stage *st = shm_arena__stage(a, SHM_STAGE_STORER);
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct shm_arena *b;
		struct shm_stage *cst;

		if (shm_arena__attach(dup(shm_arena__fd(a)), &b) < 0)
			_exit(2);
		cst = shm_arena__stage(b, SHM_STAGE_STORER);
		shm_stage__cnt_add(cst, SHM_CNT_IN, 41);
		shm_stage__cnt_add(cst, SHM_CNT_IN, 1);
		shm_stage__set_state(cst, SHM_STATE_RUNNING);
		shm_stage__heartbeat(cst);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_uint_eq(shm_stage__cnt(st, SHM_CNT_IN), 42);
	ck_assert_int_eq(shm_stage__state(st), SHM_STATE_RUNNING);
	ck_assert_uint_gt(st->heartbeat_ns, 0);
	ck_assert_str_eq(shm_counter_name(SHM_STAGE_STORER, SHM_CNT_IN), "in");
	ck_assert_str_eq(shm_counter_name(SHM_STAGE_UNWINDD, UNW_CNT_STOP_NO_CFI - 0),
			 "stop_no_cfi");
	ck_assert_ptr_null(shm_counter_name(SHM_STAGE_STORER, SHM_CNT_STAGE_BASE + 40));
	shm_arena__free(a);
}
END_TEST

/* The stage table is the topology: every ring has the ends its rows name,
 * and a consumer's upstream produces its input ring. */
START_TEST(test_stage_table)
{
	struct shm_arena *a = arena_default();
	struct shm_layout l;

	shm_layout__default(&l, 8192, 64);
	ck_assert_uint_eq(l.n_rings, SHM_RING_DEFAULT_NR);
	ck_assert_uint_eq(l.rings[SHM_RING_CAPTURE].producer, SHM_STAGE_CAPTURE);
	ck_assert_uint_eq(l.rings[SHM_RING_CAPTURE].consumer, SHM_STAGE_UNWINDD);
	ck_assert_uint_eq(l.rings[SHM_RING_SYMD].producer, SHM_STAGE_SYMD);
	ck_assert_uint_eq(l.rings[SHM_RING_SYMD].consumer, SHM_STAGE_STORER);
	ck_assert_uint_eq(l.rings[SHM_RING_HINT].producer, SHM_STAGE_UNWINDD);
	ck_assert_uint_eq(l.rings[SHM_RING_HINT].consumer, SHM_STAGE_CAPTURE);
	ck_assert_uint_eq(l.rings[SHM_RING_HINT].data_size, 64u << 10);
	ck_assert_uint_eq(l.rings[SHM_RING_UNWIND].data_size, 1u << 20);
	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		const struct shm_stage_desc *d = &shm_stages[i];

		ck_assert_str_eq(shm_stage_name((enum shm_stage_id)i), d->name);
		ck_assert_int_eq(shm_stage_by_name(d->name, strlen(d->name)), i);
		ck_assert_int_eq(d->role == SHM_ROLE_PRODUCER, d->ring_in < 0);
		ck_assert_int_eq(d->role == SHM_ROLE_SINK, d->ring_out < 0);
		if (d->ring_in < 0)
			continue;
		ck_assert_int_lt(d->up, SHM_STAGE_MAX);
		ck_assert_int_eq(shm_stages[d->up].ring_out, d->ring_in);
		ck_assert_int_eq(shm_arena__find_ring(a, d->up, (enum shm_stage_id)i), d->ring_in);
	}
	ck_assert(shm_counter_is_gauge(SHM_STAGE_CAPTURE, CAP_CNT_GEN_PINNED));
	ck_assert(!shm_counter_is_gauge(SHM_STAGE_CAPTURE, CAP_CNT_DOWN_EST));
	ck_assert(shm_counter_is_gauge(SHM_STAGE_SYMD, SYM_CNT_CACHE_BYTES));
	ck_assert(!shm_counter_is_gauge(SHM_STAGE_STORER, STO_CNT_SAMPLES));
	shm_arena__free(a);
}
END_TEST

START_TEST(test_bad_layouts)
{
	struct shm_layout l = {.n_rings = 1};
	struct shm_arena *a;

	l.rings[0].data_size = 3000; /* not a power of two */
	ck_assert_int_eq(shm_arena__create(&l, &a), -EINVAL);
	l.rings[0].data_size = 1024; /* too small */
	ck_assert_int_eq(shm_arena__create(&l, &a), -EINVAL);
	l.rings[0].data_size = 4096;
	l.rings[0].consumer = SHM_STAGE_MAX;
	ck_assert_int_eq(shm_arena__create(&l, &a), -EINVAL);
	l.n_rings = 0;
	ck_assert_int_eq(shm_arena__create(&l, &a), -EINVAL);
	ck_assert_int_eq(shm_arena__create(NULL, &a), -EINVAL);
}
END_TEST

START_TEST(test_reject_corrupt_header)
{
	struct shm_arena *a = arena_default();
	struct shm_arena_hdr *h;
	void *img;

	img = image_copy(a);
	h = img;
	ck_assert_int_eq(shm_arena__validate(img, a->size), 0);

	/* A flipped bit anywhere in the header breaks the checksum. */
	h->rings[1].off += 4096;
	ck_assert_int_eq(shm_arena__validate(img, a->size), -EBADMSG);
	/* Even with a recomputed checksum, overlapping rings are refused. */
	h->csum = hash_fnv1a64(h, offsetof(struct shm_arena_hdr, csum));
	ck_assert_int_eq(shm_arena__validate(img, a->size), -EBADMSG);
	memcpy(img, a->base, 4096);

	/* A ring beyond the end of the arena. */
	h->rings[2].mem_size = a->size;
	h->csum = hash_fnv1a64(h, offsetof(struct shm_arena_hdr, csum));
	ck_assert_int_eq(shm_arena__validate(img, a->size), -EBADMSG);
	memcpy(img, a->base, 4096);

	/* A newer major version: a clear "not supported", not "corrupt". */
	h->version_major = SHM_ARENA_VERSION_MAJOR + 1;
	h->csum = hash_fnv1a64(h, offsetof(struct shm_arena_hdr, csum));
	ck_assert_int_eq(shm_arena__validate(img, a->size), -EPROTONOSUPPORT);
	memcpy(img, a->base, 4096);

	/* Size that disagrees with the mapping (truncated image). */
	ck_assert_int_eq(shm_arena__validate(img, a->size - 4096), -EBADMSG);
	ck_assert_int_eq(shm_arena__validate(img, 100), -EBADMSG);

	/* A ring whose positions were scribbled on. */
	((struct shm_ring_ctrl *)((uint8_t *)img + h->rings[0].off))->prod_pos += 1ull << 40;
	ck_assert_int_eq(shm_arena__validate(img, a->size), -EBADMSG);

	h->magic = 0;
	ck_assert_int_eq(shm_arena__validate(img, a->size), -EBADMSG);
	free(img);
	shm_arena__free(a);
}
END_TEST

START_TEST(test_reject_unsealed_and_foreign_fds)
{
	struct shm_arena *a = arena_default(), *b;
	int fd;

	/* An unsealed memfd with a valid image: refused (could shrink: SIGBUS). */
	fd = memfd_create("t", MFD_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, a->base, a->size), (ssize_t)a->size);
	ck_assert_int_eq(shm_arena__attach(fd, &b), -EPERM);
	close(fd);

	/* A plain file is not an arena either. */
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_lt(shm_arena__attach(fd, &b), 0);
	close(fd);

	ck_assert_int_eq(shm_arena__attach(-1, &b), -EBADF);
	shm_arena__free(a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("arena");
	TEST_TCASE(s, "arena", test_create_attach, test_attach_across_fork, test_stage_table,
		   test_bad_layouts, test_reject_corrupt_header,
		   test_reject_unsealed_and_foreign_fds);
	return test_run_suite(s);
}
