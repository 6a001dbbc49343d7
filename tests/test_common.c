// SPDX-License-Identifier: MIT
/*
 * common/: the helpers every executable shares, one case each: time
 * conversion, whole-file read, hash + intern table, cpu list, .gopclntab.
 */
#include <elf.h>
#include <errno.h>
#include <glob.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/array.h"
#include "common/cpulist.h"
#include "common/fileio.h"
#include "common/gopclntab.h"
#include "common/hash.h"
#include "common/heaptrim.h"
#include "common/probespec.h"
#include "common/procroot.h"
#include "common/intern.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "test_util.h"

START_TEST(test_timeutil)
{
	struct timespec ts = {.tv_sec = 3, .tv_nsec = 5}, back;
	uint64_t a, b;

	ck_assert_uint_eq(NSEC_PER_SEC, 1000 * NSEC_PER_MSEC);
	ck_assert_uint_eq(NSEC_PER_MSEC, 1000 * NSEC_PER_USEC);
	ck_assert_uint_eq(USEC_PER_SEC * NSEC_PER_USEC, NSEC_PER_SEC);
	ck_assert_uint_eq(MSEC_PER_SEC * NSEC_PER_MSEC, NSEC_PER_SEC);
	ck_assert_uint_eq(timespec_to_ns(&ts), 3000000005ull);
	/* a 2^31-second timespec does not overflow the 32-bit way */
	ts.tv_sec = (time_t)1 << 31;
	ts.tv_nsec = 999999999;
	ck_assert_uint_eq(timespec_to_ns(&ts), (1ull << 31) * 1000000000ull + 999999999ull);
	back = ns_to_timespec(timespec_to_ns(&ts));
	ck_assert_int_eq(back.tv_sec, ts.tv_sec);
	ck_assert_int_eq(back.tv_nsec, ts.tv_nsec);

	/* clock_ns() reads the clock it is given */
	a = clock_ns(CLOCK_MONOTONIC);
	ck_assert_int_eq(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
	b = clock_ns(CLOCK_MONOTONIC);
	ck_assert_uint_gt(a, 0);
	ck_assert_uint_le(a, timespec_to_ns(&ts));
	ck_assert_uint_le(timespec_to_ns(&ts), b);
	ck_assert_int_eq(clock_gettime(CLOCK_REALTIME, &ts), 0);
	ck_assert_uint_ge(clock_ns(CLOCK_REALTIME), timespec_to_ns(&ts));
	ck_assert_uint_eq(clock_ns((clockid_t)-1000), 0); /* an invalid clock id */
}
END_TEST

START_TEST(test_array)
{
	uint64_t *v = NULL;
	uint32_t *w = NULL, cap32 = 0, i;
	size_t cap = 0, n;
	char *b = NULL;

	/* room for need elements: doubled from ARRAY_GROW_MIN, kept when there is room */
	ck_assert_int_eq(array_grow((void **)&v, &cap, 1, sizeof(*v)), 0);
	ck_assert_uint_eq(cap, ARRAY_GROW_MIN);
	ck_assert_int_eq(array_grow((void **)&v, &cap, ARRAY_GROW_MIN, sizeof(*v)), 0);
	ck_assert_uint_eq(cap, ARRAY_GROW_MIN);
	for (n = 0; n < 100000; n++) {
		ck_assert_int_eq(array_grow((void **)&v, &cap, n + 1, sizeof(*v)), 0);
		v[n] = n * 3;
	}
	ck_assert_uint_ge(cap, 100000);
	ck_assert(IS_POWER_OF_2(cap / ARRAY_GROW_MIN));
	for (n = 0; n < 100000; n += 999)
		ck_assert_uint_eq(v[n], n * 3); /* the contents move along */
	ck_assert_int_eq(array_grow((void **)&v, &cap, 3 * cap + 1, sizeof(*v)), 0);
	ck_assert_uint_eq(cap, 4 * (size_t)131072); /* one jump past a far need */

	/* overflow refused, the array kept as it was */
	n = cap;
	ck_assert_int_eq(array_grow((void **)&v, &cap, SIZE_MAX / 4, sizeof(*v)), -ENOMEM);
	ck_assert_int_eq(array_grow((void **)&v, &cap, SIZE_MAX, 1), -ENOMEM);
	ck_assert_int_eq(array_resize((void **)&v, &cap, SIZE_MAX / 2, 3), -ENOMEM);
	ck_assert_int_eq(array_resize((void **)&v, &cap, 0, sizeof(*v)), -ENOMEM);
	ck_assert_uint_eq(cap, n);
	ck_assert_uint_eq(v[99999], 99999 * 3);
	free(v);

	/* resize sets exactly the size asked */
	cap = 0;
	ck_assert_int_eq(array_resize((void **)&b, &cap, 5, 1), 0);
	ck_assert_uint_eq(cap, 5);
	memcpy(b, "abcd", 5);
	ck_assert_int_eq(array_resize((void **)&b, &cap, 3000, 1), 0);
	ck_assert_uint_eq(cap, 3000);
	ck_assert_str_eq(b, "abcd");
	free(b);

	/* the uint32_t form: same growth, capacity bounded by ARRAY32_MAX */
	for (i = 0; i < 1000; i++) {
		ck_assert_int_eq(array_grow32((void **)&w, &cap32, (size_t)i + 1, sizeof(*w)), 0);
		w[i] = i;
	}
	ck_assert_uint_eq(cap32, 1024);
	ck_assert_uint_eq(w[999], 999);
	ck_assert_int_eq(array_grow32((void **)&w, &cap32, (size_t)ARRAY32_MAX + 1, 1), -ENOMEM);
	ck_assert_int_eq(array_grow32((void **)&w, &cap32, UINT32_MAX, sizeof(*w)), -ENOMEM);
	ck_assert_int_eq(array_grow32((void **)&w, &cap32, ARRAY32_MAX, SIZE_MAX / 4), -ENOMEM);
	ck_assert_uint_eq(cap32, 1024);
	ck_assert_uint_eq(w[999], 999);
	free(w);
	/* a capacity not a power of two doubles up to the limit, not past it */
	ck_assert_uint_eq(array_next_cap(3 << 28, (3u << 28) + 1, 16, ARRAY32_MAX), ARRAY32_MAX);
	/* a table that keeps its own first capacity */
	w = NULL;
	cap32 = 0;
	ck_assert_int_eq(array_grow32_first((void **)&w, &cap32, 1, sizeof(*w), 256), 0);
	ck_assert_uint_eq(cap32, 256);
	ck_assert_int_eq(array_grow32_first((void **)&w, &cap32, 257, sizeof(*w), 256), 0);
	ck_assert_uint_eq(cap32, 512);
	free(w);
}
END_TEST

static char tmp_path[PATH_MAX];

static void write_tmp(const char *data, size_t len)
{
	int fd;

	fd = test_mkstemp(tmp_path, sizeof(tmp_path), "common");
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

START_TEST(test_read_full_file)
{
	static char big[100000];
	char *buf = NULL, *p;
	size_t cap = 0, len, i;
	char *name;
	int dfd;

	for (i = 0; i < sizeof(big); i++)
		big[i] = (char)('a' + i % 26);
	write_tmp(big, sizeof(big));

	/* a regular file: every byte, NUL-terminated */
	ck_assert_int_eq(read_full_file(tmp_path, 0, sizeof(big), &p, &len), 0);
	ck_assert_uint_eq(len, sizeof(big));
	ck_assert(memcmp(p, big, len) == 0);
	ck_assert_int_eq(p[len], '\0');
	free(p);
	/* one byte over the cap is refused */
	ck_assert_int_eq(read_full_file(tmp_path, 0, sizeof(big) - 1, &p, &len), -EFBIG);

	/* relative to a directory fd, into a reused buffer */
	name = strrchr(tmp_path, '/');
	*name = '\0';
	dfd = open(tmp_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	*name++ = '/';
	ck_assert_int_ge(dfd, 0);
	ck_assert_int_eq(read_full_file_at(dfd, name, 0, SIZE_MAX, &buf, &cap, &len), 0);
	ck_assert_uint_eq(len, sizeof(big));
	ck_assert(memcmp(buf, big, len) == 0);
	ck_assert_int_eq(read_full_file_at(dfd, "no-such-file-here", 0, 1024, &buf, &cap, &len),
			 -ENOENT);
	/* READ_FULL_TRUNCATE keeps the head of a longer file */
	ck_assert_int_eq(read_full_file_at(dfd, name, READ_FULL_TRUNCATE, 1000, &buf, &cap, &len),
			 0);
	ck_assert_uint_eq(len, 1000);
	ck_assert(memcmp(buf, big, len) == 0);
	ck_assert_int_eq(buf[len], '\0');
	close(dfd);
	unlink(tmp_path);

	/* an fd that is not a file: a pipe, written in pieces, read to EOF */
	{
		int pfd[2];

		ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
		ck_assert_int_eq(write(pfd[1], "ab", 2), 2);
		ck_assert_int_eq(write(pfd[1], "cd\n", 3), 3);
		close(pfd[1]);
		ck_assert_int_eq(read_full_fd(pfd[0], 0, 5, &buf, &cap, &len), 0);
		ck_assert_uint_eq(len, 5);
		ck_assert_str_eq(buf, "abcd\n");
		close(pfd[0]);
	}

	/* an empty file */
	write_tmp("", 0);
	ck_assert_int_eq(read_full_file_at(AT_FDCWD, tmp_path, 0, 16, &buf, &cap, &len), 0);
	ck_assert_uint_eq(len, 0);
	ck_assert_int_eq(buf[0], '\0');
	unlink(tmp_path);

	/* a /proc file has st_size 0 and still reads whole: our own maps name
	 * this program and end with a newline */
	ck_assert_int_eq(
		read_full_file_at(AT_FDCWD, "/proc/self/maps", 0, 64u << 20, &buf, &cap, &len), 0);
	ck_assert_uint_gt(len, 0);
	ck_assert_uint_eq(strlen(buf), len);
	ck_assert_int_eq(buf[len - 1], '\n');
	ck_assert_ptr_nonnull(strstr(buf, "test_common"));
	ck_assert_ptr_nonnull(strstr(buf, "[stack]"));
	/* and a /proc file over the cap is refused, not cut */
	ck_assert_int_eq(read_full_file_at(AT_FDCWD, "/proc/self/maps", 0, 100, &buf, &cap, &len),
			 -EFBIG);
	free(buf);
}
END_TEST

START_TEST(test_hash)
{
	uint64_t w[4] = {1, 2, 3, 4}, seen[64];
	uint32_t i, j;

	/* hash64: same bytes same value, any changed byte or length another */
	ck_assert_uint_eq(hash64("abc", 3), hash64("abc", 3));
	ck_assert_uint_ne(hash64("abc", 3), hash64("abd", 3));
	ck_assert_uint_ne(hash64("abc", 3), hash64("abc\0", 4));
	ck_assert_uint_ne(hash64("", 0), hash64("\0", 1));
	ck_assert_uint_ne(hash64(w, sizeof(w)), hash64(w, sizeof(w) - 1));
	w[3] ^= 1ull << 63;
	ck_assert_uint_ne(hash64(w, sizeof(w)), hash64(w, 3 * sizeof(w[0])));
	/* ... and spreads neighbouring keys over the low bits a table masks */
	for (i = 0; i < 64; i++) {
		char k[8];

		snprintf(k, sizeof(k), "f%u", i);
		seen[i] = hash64(k, strlen(k)) & 1023;
	}
	for (i = 0, j = 0; i < 64; i++)
		j += seen[i] == seen[(i + 1) % 64];
	ck_assert_uint_le(j, 2);

	/* hash64_mix: a bijection that moves every bit */
	ck_assert_uint_eq(hash64_mix(0), 0);
	ck_assert_uint_ne(hash64_mix(1), hash64_mix(2));
	ck_assert_uint_ne(hash64_mix(1) >> 32, 0);

	/* the multiplicative ones: their constants */
	ck_assert_uint_eq(hash32_fib(1), 0x9e3779b1u);
	ck_assert_uint_eq(hash32_fib(2), 0x3c6ef362u);
	ck_assert_uint_eq(hash64_fib(1), 0x9e3779b97f4a7c15ull);

	/* FNV-1a 64 is the arena header's checksum, shared between processes:
	 * the published test vectors, which must never change */
	ck_assert_uint_eq(hash_fnv1a64("", 0), 0xcbf29ce484222325ull);
	ck_assert_uint_eq(hash_fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
	ck_assert_uint_eq(hash_fnv1a64("foobar", 6), 0x85944171f73967e8ull);
}
END_TEST

START_TEST(test_intern)
{
	struct intern t = {0};
	char key[32];
	uint32_t id, i, len, ids[3];
	const void *k;
	size_t bytes;

	intern__init(&t);
	ck_assert_uint_eq(intern__find(&t, "x", 1), 0);
	ck_assert_uint_eq(intern__bytes(&t), 0);
	/* dense ids from 1 in insertion order; a known key keeps its id */
	ck_assert_int_eq(intern__get(&t, "main", 4, &id), 1);
	ck_assert_uint_eq(id, 1);
	ck_assert_int_eq(intern__get(&t, "", 0, &id), 1);
	ck_assert_uint_eq(id, 2);
	ck_assert_int_eq(intern__get(&t, "main", 4, &id), 0);
	ck_assert_uint_eq(id, 1);
	ck_assert_int_eq(intern__get(&t, "", 0, &id), 0);
	ck_assert_uint_eq(id, 2);
	ck_assert_uint_eq(intern__find(&t, "main", 4), 1);
	ck_assert_uint_eq(intern__find(&t, "mai", 3), 0);

	/* growth: 100k keys (slots and pool regrow many times), all found again */
	for (i = 0; i < 100000; i++) {
		len = (uint32_t)snprintf(key, sizeof(key), "k%u", i);
		ck_assert_int_eq(intern__get(&t, key, len, &id), 1);
		ck_assert_uint_eq(id, i + 3);
	}
	ck_assert_uint_eq(intern__count(&t), 100002);
	for (i = 0; i < 100000; i += 7) {
		len = (uint32_t)snprintf(key, sizeof(key), "k%u", i);
		ck_assert_uint_eq(intern__find(&t, key, len), i + 3);
		k = intern__key(&t, i + 3, &len);
		ck_assert_ptr_nonnull(k);
		ck_assert_uint_eq(len, strlen(key));
		ck_assert(memcmp(k, key, len) == 0);
	}
	ck_assert_ptr_null(intern__key(&t, 0, &len));
	ck_assert_ptr_null(intern__key(&t, 100003, &len));
	/* the accounting covers at least the keys and the ids */
	bytes = intern__bytes(&t);
	ck_assert_uint_ge(bytes, 100000 * (4 + 2 * sizeof(uint32_t)));

	/* key order like strcmp, a prefix first */
	intern__get(&t, "ab", 2, &ids[0]);
	intern__get(&t, "abc", 3, &ids[1]);
	intern__get(&t, "b", 1, &ids[2]);
	ck_assert_int_lt(intern__cmp(&t, ids[0], ids[1]), 0);
	ck_assert_int_lt(intern__cmp(&t, ids[1], ids[2]), 0);
	ck_assert_int_gt(intern__cmp(&t, ids[2], ids[0]), 0);
	ck_assert_int_eq(intern__cmp(&t, ids[1], ids[1]), 0);

	/* id arrays are keys too */
	{
		uint32_t stack[3] = {7, 8, 9}, other[3] = {7, 8, 10};

		ck_assert_int_eq(intern__get(&t, stack, sizeof(stack), &ids[0]), 1);
		ck_assert_int_eq(intern__get(&t, other, sizeof(other), &ids[1]), 1);
		ck_assert_uint_ne(ids[0], ids[1]);
		ck_assert_uint_eq(intern__find(&t, stack, sizeof(stack)), ids[0]);
	}

	/* reset forgets the keys and keeps the memory; ids restart at 1 */
	intern__reset(&t);
	ck_assert_uint_eq(intern__count(&t), 0);
	ck_assert_uint_eq(intern__bytes(&t), bytes);
	ck_assert_uint_eq(intern__find(&t, "main", 4), 0);
	ck_assert_int_eq(intern__get(&t, "k5", 2, &id), 1);
	ck_assert_uint_eq(id, 1);
	/* free gives it back and leaves an empty, usable table */
	intern__free(&t);
	ck_assert_uint_eq(intern__bytes(&t), 0);
	ck_assert_int_eq(intern__get(&t, "k5", 2, &id), 1);
	ck_assert_uint_eq(id, 1);
	ck_assert_str_eq(intern__str(&t, id), ""); /* not a NUL table */
	intern__free(&t);
}
END_TEST

/* The flags the export tables (aligned struct keys) and the viewer's names
 * (C strings) ask for. */
START_TEST(test_intern_flags)
{
	struct intern t;
	struct key {
		uint32_t a;
		uint64_t b;
	} k;
	uint32_t id, i, len, first;
	char s[32];

	/* INTERN_ALIGN8: keys of odd lengths in between, every key 8-aligned */
	intern__init_flags(&t, INTERN_ALIGN8);
	for (i = 0; i < 5000; i++) {
		const struct key *back;

		len = (uint32_t)snprintf(s, sizeof(s), "%u", i * 7);
		ck_assert_int_eq(intern__get(&t, s, len, &id), 1);
		memset(&k, 0, sizeof(k));
		k.a = i;
		k.b = (uint64_t)i << 40;
		ck_assert_int_eq(intern__get(&t, &k, sizeof(k), &id), 1);
		back = intern__key(&t, id, NULL);
		ck_assert_uint_eq((uintptr_t)back % 8, 0);
		ck_assert_uint_eq(back->b, (uint64_t)i << 40);
	}
	for (i = 0; i < 5000; i += 13) {
		memset(&k, 0, sizeof(k));
		k.a = i;
		k.b = (uint64_t)i << 40;
		id = intern__find(&t, &k, sizeof(k));
		ck_assert_uint_eq(id, 2 * i + 2); /* ids stay where they were handed out */
		ck_assert_uint_eq(((const struct key *)intern__key(&t, id, &len))->a, i);
		ck_assert_uint_eq(len, sizeof(k));
	}
	/* the flags outlive reset and free */
	intern__reset(&t);
	intern__free(&t);
	ck_assert_int_eq(intern__get(&t, "x", 1, &id), 1);
	ck_assert_int_eq(intern__get(&t, &k, sizeof(k), &id), 1);
	ck_assert_uint_eq((uintptr_t)intern__key(&t, id, NULL) % 8, 0);
	intern__free(&t);

	/* INTERN_NUL: the key is the bytes given, read back as a C string */
	intern__init_flags(&t, INTERN_NUL);
	ck_assert_int_eq(intern__get(&t, "main;a", 4, &first), 1); /* "main" */
	ck_assert_str_eq(intern__str(&t, first), "main");
	ck_assert_int_eq(intern__get(&t, "main", 4, &id), 0);
	ck_assert_uint_eq(id, first);
	ck_assert_int_eq(intern__get(&t, "", 0, &id), 1);
	ck_assert_str_eq(intern__str(&t, id), "");
	ck_assert_uint_eq(intern__find(&t, "main\0", 5), 0); /* the NUL is not part of the key */
	for (i = 0; i < 50000; i++) {
		len = (uint32_t)snprintf(s, sizeof(s), "fn_%u", i);
		ck_assert_int_eq(intern__get(&t, s, len, &id), 1);
		ck_assert_uint_eq(id, i + 3);
	}
	for (i = 0; i < 50000; i += 11) {
		len = (uint32_t)snprintf(s, sizeof(s), "fn_%u", i);
		ck_assert_str_eq(intern__str(&t, i + 3), s);
		ck_assert_uint_eq(intern__find(&t, s, len), i + 3);
	}
	ck_assert_str_eq(intern__str(&t, first), "main");
	ck_assert_str_eq(intern__str(&t, 0), "");
	ck_assert_str_eq(intern__str(&t, 50003), "");
	intern__free(&t);
}
END_TEST

START_TEST(test_cpulist)
{
	uint64_t m[CPULIST_WORDS(CPULIST_MAX_CPUS)], small[1];
	unsigned int max;
	static const char *const bad[] = {"",	 "\n",	  "3-1",   "1,,2", "a",	     "1-",
					  "-1",	 "1,",	  ",1",	   "8192", "1-8192", "1 ,2",
					  "0x3", "1\n\n", "1\n,2", " 1",   "+1",     "1-2-3"};

	ck_assert_int_eq(cpulist__parse("1-3,5,7-9", m, CPULIST_MAX_CPUS, &max), 0);
	ck_assert_uint_eq(m[0], 0x3aeull);
	ck_assert_uint_eq(max, 9);
	ck_assert_uint_eq(cpulist__count(m, CPULIST_MAX_CPUS), 7);
	ck_assert(cpulist__test(m, CPULIST_MAX_CPUS, 5));
	ck_assert(!cpulist__test(m, CPULIST_MAX_CPUS, 4));
	ck_assert(!cpulist__test(m, CPULIST_MAX_CPUS, 9000)); /* past the bitmap: not set */
	/* the sysfs form, with its newline */
	ck_assert_int_eq(cpulist__parse("0-3,5,7-8\n", m, CPULIST_MAX_CPUS, NULL), 0);
	ck_assert_uint_eq(cpulist__count(m, CPULIST_MAX_CPUS), 7);
	/* word boundaries and the last cpu */
	ck_assert_int_eq(cpulist__parse("63-64,8191", m, CPULIST_MAX_CPUS, &max), 0);
	ck_assert_uint_eq(m[0], 1ull << 63);
	ck_assert_uint_eq(m[1], 1);
	ck_assert_uint_eq(m[127], 1ull << 63);
	ck_assert_uint_eq(max, 8191);
	ck_assert_uint_eq(cpulist__count(m, CPULIST_MAX_CPUS), 3);
	/* nbits bounds the cpus; a bitmap of 10 has one word */
	ck_assert_int_eq(cpulist__parse("9", small, 10, &max), 0);
	ck_assert_uint_eq(small[0], 1u << 9);
	ck_assert_int_eq(cpulist__parse("10", small, 10, NULL), -EINVAL);
	ck_assert_int_eq(cpulist__parse("0-99999999999999999999", small, 10, NULL), -EINVAL);
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(cpulist__parse(bad[i], m, CPULIST_MAX_CPUS, NULL) == -EINVAL,
			      "'%s' accepted", bad[i]);
}
END_TEST

__attribute__((noinline)) int probespec_target(int x);
__attribute__((noinline)) int probespec_target(int x)
{
	return x * 3 + 1;
}

#ifdef __x86_64__
/* Instructions of known lengths, starting at 0, 10, 14, 18 and 24. */
__asm__(".text\n"
	".globl probespec_insns\n"
	".type probespec_insns, @function\n"
	"probespec_insns:\n"
	"	movabs $0x1122334455667788, %rax\n" /* 48 b8 imm64 */
	"	lea 0x1(%rdi,%rdi,2), %eax\n"	    /* 8d 44 7f 01 */
	"	vpcmpeqb %xmm0, %xmm0, %xmm0\n"	    /* c5 f9 74 c0 */
	"	mov 0x10(%rip), %eax\n"		    /* 8b 05 disp32 */
	"	ret\n"
	".size probespec_insns, .-probespec_insns\n");
#endif

/* A uprobe inside an instruction (its breakpoint byte corrupted it: the probed
 * program crashed) is refused; one at an instruction's start is taken. */
START_TEST(test_probespec_insn_boundary)
{
#ifdef __x86_64__
	char self[4096], spec[4200];
	struct probe_spec p;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	ck_assert_int_gt(n, 0);
	self[n] = 0;
	for (unsigned int off = 1; off <= 24; off++) {
		bool start = off == 10 || off == 14 || off == 18 || off == 24;

		snprintf(spec, sizeof(spec), "uprobe:%s:probespec_insns+%u", self, off);
		ck_assert_msg(probe_spec__resolve(spec, &p) == (start ? 0 : -ERANGE), "+%u", off);
	}
#endif
}
END_TEST

#ifdef __x86_64__
/*
 * Instructions the kernel's x86-64 uprobes refuse (ENOTSUPP at attach, each
 * seen so on Linux 6.18) beside ones they take. Bytes, not mnemonics: the
 * assembler need not know int1 or notrack.
 */
__asm__(".text\n"
	".globl probespec_refused\n"
	".type probespec_refused, @function\n"
	"probespec_refused:\n"
	"	.byte 0xf4\n"			      /* 0 hlt */
	"	.byte 0x90\n"			      /* 1 nop */
	"	.byte 0xfa, 0xfb\n"		      /* 2 cli, 3 sti */
	"	.byte 0xcc\n"			      /* 4 int3 */
	"	.byte 0xcd, 0x80\n"		      /* 5 int $0x80 */
	"	.byte 0xf1, 0x90\n"		      /* 7 int1, 8 nop */
	"	.byte 0xcf, 0x48, 0xcf\n"	      /* 9 iret, 10 iretq */
	"	.byte 0x6c, 0xef, 0xe4, 0x10\n"	      /* 12 insb, 13 out, 14 in $0x10 */
	"	.byte 0x0f, 0x0b\n"		      /* 16 ud2 */
	"	.byte 0x55, 0x41, 0x54\n"	      /* 18 push %rbp, 19 push %r12 */
	"	.byte 0xf0, 0x83, 0x07, 0x01\n"	      /* 21 lock addl $1,(%rdi) */
	"	.byte 0x3e, 0xff, 0xe0\n"	      /* 25 notrack jmp *%rax */
	"	.byte 0x2e, 0x8b, 0x07\n"	      /* 28 cs mov (%rdi),%eax */
	"	.byte 0x64, 0x8b, 0x07\n"	      /* 31 fs mov (%rdi),%eax */
	"	.byte 0x8e, 0xd0, 0x8e, 0xd8\n"	      /* 34 mov %eax,%ss, 36 ...,%ds */
	"	.byte 0xc5, 0xf9, 0xef, 0xc0\n"	      /* 38 vpxor (VEX 0f ef) */
	"	.byte 0xc5, 0xfd, 0x74, 0x0f\n"	      /* 42 vpcmpeqb (VEX 0f 74) */
	"	.byte 0xc4, 0xe2, 0x7d, 0x17, 0xc0\n" /* 46 vptest (VEX 0f38 17) */
	"	.byte 0x66, 0xeb, 0x00, 0xeb, 0x00\n" /* 51 jmpw, 54 jmp */
	"	.byte 0x66, 0x2e, 0x0f, 0x1f, 0x84\n" /* 56 cs nopw 0(%rax,%rax) */
	"	.byte 0, 0, 0, 0, 0\n"
	"	.byte 0x62, 0xf1, 0x7d, 0x48, 0xef, 0xc0\n" /* 66 vpxord (EVEX) */
	"	ret\n"
	".size probespec_refused, .-probespec_refused\n");
#endif

static char refused_line[512];

static void refused_sink(enum log_level lvl, const char *line)
{
	(void)lvl;
	snprintf(refused_line, sizeof(refused_line), "%s", line);
}

/* A uprobe on an instruction the kernel's uprobes refuse is refused as a
 * spec, naming the instruction; its neighbours the kernel takes are taken,
 * and so is what the decoder does not know (EVEX). */
START_TEST(test_probespec_insn_refused)
{
#ifdef __x86_64__
	static const struct {
		unsigned int off;
		const char *says; /* NULL: taken */
	} at[] = {
		{0, "`hlt` at "},
		{1, NULL},
		{2, "`cli`"},
		{3, "`sti`"},
		{4, "`int3`"},
		{5, "`int $0x80`"},
		{7, "`int1`"},
		{8, NULL},
		{9, "`iret`"},
		{10, "`iret`"},
		{12, "`insb`"},
		{13, "`out`"},
		{14, "`in`"},
		{16, NULL},
		{18, NULL},
		{19, NULL},
		{21, "`lock`-prefixed instruction"},
		{25, "`ds`-prefixed instruction (`notrack`)"},
		{28, "`cs`-prefixed instruction"},
		{31, NULL},
		{34, "`mov` to %ss"},
		{36, NULL},
		{38, "AVX (VEX-encoded) instruction with opcode byte 0xef"},
		{42, NULL},
		{46, "AVX (VEX-encoded) instruction with opcode byte 0x17"},
		{51, "`jmp` with a 16-bit operand prefix"},
		{54, NULL},
		{56, NULL},
		{66, NULL},
	};
	char self[4096], spec[4200], want[4400];
	struct probe_spec p;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	ck_assert_int_gt(n, 0);
	self[n] = 0;
	log_set_sink(refused_sink);
	for (unsigned int i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		int r;

		refused_line[0] = 0;
		snprintf(spec, sizeof(spec), "uprobe:%s:probespec_refused+%u", self, at[i].off);
		r = probe_spec__resolve(spec, &p);
		if (!at[i].says) {
			ck_assert_msg(r == 0, "+%u refused: %s", at[i].off, refused_line);
			continue;
		}
		ck_assert_msg(r == -EOPNOTSUPP, "+%u: %d, not refused", at[i].off, r);
		snprintf(want, sizeof(want),
			 " at %s+%#llx (probespec_refused+%#x): the kernel's uprobes cannot probe "
			 "this instruction; pick another offset",
			 self, (unsigned long long)p.file_off, at[i].off);
		ck_assert_msg(strstr(refused_line, at[i].says) && strstr(refused_line, want),
			      "+%u: want '%s' and '%s' in: %s", at[i].off, at[i].says, want,
			      refused_line);
	}
	/* A return probe sets its breakpoint at the entry: refused alike. */
	snprintf(spec, sizeof(spec), "uretprobe:%s:probespec_refused", self);
	refused_line[0] = 0;
	ck_assert_int_eq(probe_spec__resolve(spec, &p), -EOPNOTSUPP);
	/* ... and no offset to pick: the line says what is left */
	ck_assert_msg(strstr(refused_line, "a uretprobe's breakpoint is at the function's entry") &&
			      !strstr(refused_line, "pick another offset"),
		      "%s", refused_line);
	log_set_sink(NULL);
#endif
}
END_TEST

START_TEST(test_probespec)
{
	static const char *const bad[] = {
		"",	      "kprobe:",      "kprobe:a:b",	  "kretprobe:fn+4",
		"fentry:a:b", "tracepoint:a", "tracepoint:a:b:c", "tracepoint:a/b:c",
		"uprobe:x:y", "uprobe:/x",    "uprobe:/x:sym+",	  "uprobe:/x:sym+zz",
		"usdt:/x:n",  "usdt:/x::n",   "uretprobe:/x:",
	};
	/* an offset is digits: not a negative one (before the symbol), nor blanks */
	static const char *const bad_off[] = {"uprobe:/x:sym+-5", "uprobe:/x:sym+ 5",
					      "kprobe:vfs_read+-8",
					      /* a return probe inside the function crashed it */
					      "uretprobe:/x:fn+4", "uretprobe:/x:fn+0"};
	char self[4096], spec[4200];
	struct probe_spec p;
	uint8_t code[16];
	ssize_t n;
	int fd;

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(probe_spec__parse(bad[i], &p) == -EINVAL, "'%s' accepted", bad[i]);
	for (unsigned int i = 0; i < sizeof(bad_off) / sizeof(bad_off[0]); i++)
		ck_assert_msg(probe_spec__parse(bad_off[i], &p) == -EINVAL, "'%s' accepted",
			      bad_off[i]);
	ck_assert_int_eq(probe_spec__parse("tracepoint:sched:sched_switch", &p), 0);
	ck_assert_int_eq(p.type, PROBE_TRACEPOINT);
	ck_assert_str_eq(p.a, "sched");
	ck_assert_str_eq(p.b, "sched_switch");
	ck_assert_int_eq(probe_spec__parse("uprobe:/usr/lib/a:b.so:fn+0x20", &p), 0);
	ck_assert_int_eq(p.type, PROBE_UPROBE);
	ck_assert_str_eq(p.path, "/usr/lib/a:b.so");
	ck_assert_str_eq(p.a, "fn");
	ck_assert_uint_eq(p.off, 0x20);
	ck_assert_int_eq(probe_spec__parse("uretprobe:/usr/lib/a:b.so:fn", &p), 0);
	ck_assert_int_eq(p.type, PROBE_URETPROBE);
	ck_assert_str_eq(p.path, "/usr/lib/a:b.so");
	ck_assert_str_eq(p.a, "fn");
	ck_assert_uint_eq(p.off, 0);
	ck_assert_int_eq(probe_spec__parse("usdt:/bin/x:prov:name", &p), 0);
	ck_assert_int_eq(p.type, PROBE_USDT);
	ck_assert_str_eq(p.path, "/bin/x");
	ck_assert_str_eq(p.a, "prov");
	ck_assert_str_eq(p.b, "name");
	ck_assert_int_eq(probe_spec__parse("kprobe:vfs_read+8", &p), 0);
	ck_assert_int_eq(p.type, PROBE_KPROBE);
	ck_assert_uint_eq(p.off, 8);
	ck_assert_int_eq(probe_spec__parse("fexit:vfs_read", &p), 0);
	ck_assert_int_eq(p.type, PROBE_FEXIT);
	ck_assert_str_eq(p.a, "vfs_read");

	/* Our own (PIE) executable: the file offset libbpf wants is where the
	 * function's bytes are in the file. */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	ck_assert_int_gt(n, 0);
	self[n] = 0;
	snprintf(spec, sizeof(spec), "uprobe:%s:probespec_target+4", self);
	ck_assert_int_eq(probe_spec__resolve(spec, &p), 0);
	fd = open(self, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, code, sizeof(code), (off_t)p.file_off), sizeof(code));
	close(fd);
	ck_assert_int_eq(memcmp(code, (const uint8_t *)probespec_target + 4, sizeof(code)), 0);
	/* In a shared library too (.dynsym only there once stripped). */
	if (access("/lib/x86_64-linux-gnu/libc.so.6", R_OK) == 0) {
		ck_assert_int_eq(
			probe_spec__resolve("uprobe:/lib/x86_64-linux-gnu/libc.so.6:getppid", &p),
			0);
		ck_assert_uint_gt(p.file_off, 0);
		/* an offset past the function's end would trap in the next one */
		ck_assert_int_eq(
			probe_spec__resolve(
				"uprobe:/lib/x86_64-linux-gnu/libc.so.6:getppid+0x10000", &p),
			-ERANGE);
	}
	snprintf(spec, sizeof(spec), "uprobe:%s:no_such_function_here", self);
	ck_assert_int_eq(probe_spec__resolve(spec, &p), -ENOENT);
	ck_assert_int_eq(probe_spec__resolve("uprobe:/nonexistent/x:main", &p), -ENOENT);
	snprintf(spec, sizeof(spec), "usdt:%s:cpa:none", self);
	ck_assert_int_eq(probe_spec__resolve(spec, &p), -ENOENT);
	if (access("/sys/bus/event_source/devices/kprobe/type", F_OK) != 0)
		ck_assert_int_eq(probe_spec__resolve("kprobe:vfs_read", &p), -EOPNOTSUPP);
}
END_TEST

/* ---- .gopclntab ---- */

static void put32(uint8_t *b, size_t off, uint32_t v)
{
	memcpy(b + off, &v, 4);
}

static void put64(uint8_t *b, size_t off, uint64_t v)
{
	memcpy(b + off, &v, 8);
}

/*
 * A Go 1.18 table by hand: main.a at text+0 (16 bytes: sp 0 for 4 bytes,
 * then 8), main.b at text+0x10 (16 bytes, no pcsp table), both in a.go,
 * main.a at line 10.
 */
#define PCLN_TEXT 0x401000ull
static size_t pcln_synth(uint8_t *b)
{
	const size_t names = 72, cu = 86, files = 90, pc = 96, ft = 120;
	const uint8_t pcsp[] = {2, 4, 16, 12, 0}, pcfile[] = {2, 16, 0}, pcln[] = {22, 16, 0};
	const size_t fa = ft + 20, fb = fa + 40;

	memset(b, 0, 256);
	put32(b, 0, 0xfffffff0u);
	b[6] = 1;
	b[7] = 8;
	put64(b, 8, 2);		 /* nfunc */
	put64(b, 16, 1);	 /* nfiles */
	put64(b, 24, PCLN_TEXT); /* textStart */
	put64(b, 32, names);	 /* funcnametab */
	put64(b, 40, cu);	 /* cutab */
	put64(b, 48, files);	 /* filetab */
	put64(b, 56, pc);	 /* pctab */
	put64(b, 64, ft);	 /* functab */
	memcpy(b + names, "main.a\0main.b", 14);
	put32(b, cu, 0);
	memcpy(b + files, "a.go", 5);
	memcpy(b + pc + 1, pcsp, sizeof(pcsp));	    /* pctab + 1 */
	memcpy(b + pc + 6, pcfile, sizeof(pcfile)); /* pctab + 6 */
	memcpy(b + pc + 9, pcln, sizeof(pcln));	    /* pctab + 9 */
	put32(b, ft, 0);
	put32(b, ft + 4, (uint32_t)(fa - ft));
	put32(b, ft + 8, 0x10);
	put32(b, ft + 12, (uint32_t)(fb - ft));
	put32(b, ft + 16, 0x20);
	/* _func: entryoff nameoff args deferreturn pcsp pcfile pcln npcdata cuOffset */
	put32(b, fa, 0);
	put32(b, fa + 4, 0);
	put32(b, fa + 16, 1);
	put32(b, fa + 20, 6);
	put32(b, fa + 24, 9);
	put32(b, fb, 0x10);
	put32(b, fb + 4, 7);
	return fb + 40;
}

/* Every call on t, for every function and around it: answers or errors. */
static unsigned int pcln_walk_all(const struct gopclntab *t)
{
	unsigned int ok = 0;

	for (uint32_t i = 0; i < t->nfunc; i++) {
		struct gofunc f, g;
		const char *file;
		int32_t v, line;
		uint8_t flag;

		if (gopclntab__func(t, i, &f) < 0)
			continue;
		ck_assert_uint_le(f.entry, f.end);
		ck_assert_ptr_nonnull(f.name);
		(void)strlen(f.name);
		if (gopclntab__find(t, f.entry, &g) == 0) {
			ck_assert_uint_le(g.entry, f.entry);
			ck_assert_uint_gt(g.end, f.entry);
			ok++;
		}
		(void)gopclntab__find(t, f.end, &g);
		(void)gopclntab__find(t, f.entry - 1, &g);
		if (gopclntab__sp(t, &f, f.entry, &v) == 0)
			ck_assert_int_ge(v, 0);
		(void)gopclntab__sp(t, &f, f.entry + (f.end - f.entry) / 2, &v);
		if (gopclntab__line(t, &f, f.entry, &file, &line) == 0)
			(void)strlen(file);
		(void)gopclntab__flag(t, &f, &flag);
	}
	return ok;
}

/* The .gopclntab and .text address of a Go ELF in memory. */
static const uint8_t *pcln_of(const uint8_t *img, size_t size, size_t *ret_len, uint64_t *ret_text)
{
	const Elf64_Ehdr *eh = (const void *)img;
	const Elf64_Shdr *sh = (const void *)(img + eh->e_shoff);
	const char *names = (const char *)img + sh[eh->e_shstrndx].sh_offset;
	const uint8_t *ret = NULL;

	ck_assert_uint_le(eh->e_shoff + eh->e_shnum * sizeof(*sh), size);
	for (unsigned int i = 0; i < eh->e_shnum; i++) {
		if (!strcmp(names + sh[i].sh_name, ".gopclntab")) {
			ret = img + sh[i].sh_offset;
			*ret_len = sh[i].sh_size;
		} else if (!strcmp(names + sh[i].sh_name, ".text")) {
			*ret_text = sh[i].sh_addr;
		}
	}
	return ret;
}

START_TEST(test_gopclntab)
{
	uint8_t b[256], *copy;
	size_t n = pcln_synth(b), len = 0, size;
	struct gopclntab t;
	struct gofunc f;
	const char *file;
	int32_t v, line;
	uint8_t flag;
	uint64_t text = 0, x = 88172645463325252ull;
	const uint8_t *sect;
	char *img;
	glob_t gl;

	/* the synthetic table, exactly */
	ck_assert_int_eq(gopclntab__init(&t, b, n, 0), 0);
	ck_assert_uint_eq(t.version, 118);
	ck_assert_uint_eq(t.nfunc, 2);
	ck_assert_int_eq(gopclntab__find(&t, PCLN_TEXT + 3, &f), 0);
	ck_assert_str_eq(f.name, "main.a");
	ck_assert_uint_eq(f.entry, PCLN_TEXT);
	ck_assert_uint_eq(f.end, PCLN_TEXT + 0x10);
	ck_assert_int_eq(gopclntab__sp(&t, &f, PCLN_TEXT, &v), 0);
	ck_assert_int_eq(v, 0);
	ck_assert_int_eq(gopclntab__sp(&t, &f, PCLN_TEXT + 3, &v), 0);
	ck_assert_int_eq(v, 0);
	ck_assert_int_eq(gopclntab__sp(&t, &f, PCLN_TEXT + 4, &v), 0);
	ck_assert_int_eq(v, 8);
	ck_assert_int_eq(gopclntab__sp(&t, &f, PCLN_TEXT + 15, &v), 0);
	ck_assert_int_eq(v, 8);
	ck_assert_int_eq(gopclntab__sp(&t, &f, PCLN_TEXT + 16, &v), -ENOENT);
	ck_assert_int_eq(gopclntab__line(&t, &f, PCLN_TEXT + 5, &file, &line), 0);
	ck_assert_str_eq(file, "a.go");
	ck_assert_int_eq(line, 10);
	ck_assert_int_eq(gopclntab__find(&t, PCLN_TEXT + 0x1f, &f), 0);
	ck_assert_str_eq(f.name, "main.b");
	ck_assert_int_eq(gopclntab__sp(&t, &f, PCLN_TEXT + 0x10, &v), -ENOENT); /* no table */
	ck_assert_int_eq(gopclntab__find(&t, PCLN_TEXT + 0x20, &f), -ENOENT);
	ck_assert_int_eq(gopclntab__find(&t, PCLN_TEXT - 1, &f), -ENOENT);
	/* the .text address given wins over the header's */
	ck_assert_int_eq(gopclntab__init(&t, b, n, 0x500000), 0);
	ck_assert_int_eq(gopclntab__find(&t, 0x500011, &f), 0);
	ck_assert_str_eq(f.name, "main.b");
	/* not a table, another version, 32-bit */
	ck_assert_int_eq(gopclntab__init(&t, b, 7, 0), -EINVAL);
	ck_assert_int_eq(gopclntab__init(&t, NULL, 0, 0), -EINVAL);
	b[7] = 4;
	ck_assert_int_eq(gopclntab__init(&t, b, n, 0), -EOPNOTSUPP);
	b[7] = 8;
	put32(b, 0, 0xfffffffbu); /* Go 1.2-1.15 */
	ck_assert_int_eq(gopclntab__init(&t, b, n, 0), -EINVAL);
	put32(b, 0, 0xfffffff0u);
	/* every truncation: init refuses or every call stays in bounds (ASan) */
	for (size_t k = 0; k < n; k++) {
		copy = malloc(k ? k : 1);
		memcpy(copy, b, k);
		if (gopclntab__init(&t, copy, k, 0) == 0)
			pcln_walk_all(&t);
		free(copy);
	}

	/* a real Go binary of Debian's go, when there is one */
	if (glob("/usr/lib/go-1.*/bin/gofmt", 0, NULL, &gl) != 0 || !gl.gl_pathc) {
		fprintf(stderr, "no Go binary here: synthetic table only\n");
		return;
	}
	img = test_slurp(gl.gl_pathv[gl.gl_pathc - 1], &size);
	globfree(&gl);
	sect = pcln_of((const uint8_t *)img, size, &len, &text);
	ck_assert_ptr_nonnull(sect);
	ck_assert_uint_le((size_t)(sect - (const uint8_t *)img) + len, size);
	ck_assert_int_eq(gopclntab__init(&t, sect, len, text), 0);
	ck_assert_uint_gt(t.nfunc, 1000);
	ck_assert_uint_eq(pcln_walk_all(&t), t.nfunc);
	{
		bool main_main = false, goexit = false;

		for (uint32_t i = 0; i < t.nfunc; i++) {
			ck_assert_int_eq(gopclntab__func(&t, i, &f), 0);
			main_main = main_main || !strcmp(f.name, "main.main");
			goexit = goexit || !strcmp(f.name, "runtime.goexit");
			/* Go's funcFlag: TOPFRAME on the stack bottoms, SPWRITE on mcall */
			if (!strcmp(f.name, "runtime.goexit") ||
			    !strcmp(f.name, "runtime.mstart")) {
				ck_assert_int_eq(gopclntab__flag(&t, &f, &flag), 0);
				ck_assert_uint_eq(flag & (GOFUNC_TOPFRAME | GOFUNC_SPWRITE),
						  GOFUNC_TOPFRAME);
			} else if (!strcmp(f.name, "runtime.mcall") ||
				   !strcmp(f.name, "runtime.systemstack")) {
				ck_assert_int_eq(gopclntab__flag(&t, &f, &flag), 0);
				ck_assert_uint_eq(flag & (GOFUNC_TOPFRAME | GOFUNC_SPWRITE),
						  GOFUNC_SPWRITE);
			} else if (!strcmp(f.name, "main.main")) {
				ck_assert_int_eq(gopclntab__flag(&t, &f, &flag), 0);
				ck_assert_uint_eq(flag & (GOFUNC_TOPFRAME | GOFUNC_SPWRITE), 0);
			}
			/* frames start at the return address */
			ck_assert_int_eq(gopclntab__sp(&t, &f, f.entry, &v), 0);
			ck_assert_int_eq(v, 0);
		}
		ck_assert(main_main && goexit);
		ck_assert_int_eq(gopclntab__find(&t, text, &f), 0);
		ck_assert_int_eq(gopclntab__line(&t, &f, f.entry, &file, &line), 0);
		ck_assert_int_gt(line, 0);
		ck_assert(strstr(file, ".go") || strstr(file, ".s"));
	}
	/* truncated copies */
	for (size_t k = 0; k < len; k += len / 97 + 1) {
		copy = malloc(k ? k : 1);
		memcpy(copy, sect, k);
		if (gopclntab__init(&t, copy, k, text) == 0)
			pcln_walk_all(&t);
		free(copy);
	}
	/* corrupt copies: 200 of 64 random bytes each, walked whole */
	copy = malloc(len);
	for (int k = 0; k < 200; k++) {
		memcpy(copy, sect, len);
		for (int j = 0; j < 64; j++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			copy[(x >> 8) % len] = (uint8_t)x;
		}
		if (k % 10 == 0) /* the header too */
			copy[8 + (x >> 20) % 64] = (uint8_t)(x >> 12);
		if (gopclntab__init(&t, copy, len, text) == 0 && k % 20 == 0)
			pcln_walk_all(&t);
	}
	free(copy);
	free(img);
}
END_TEST

/*
 * heap_trim__maybe_moved(): the first call looks at the heap; later ones only
 * once the caller's key moved (an idle stage's wakeup pays no mallinfo2()),
 * and then trim when the heap's free bytes grew by `more`.
 */
START_TEST(test_heaptrim)
{
	enum { N = 4096, SZ = 4096 }; /* 16 MiB in heap chunks (under the mmap threshold) */
	struct heap_trim t = {0};
	void **p = calloc(N, sizeof(*p));

	ck_assert_ptr_nonnull(p);
	ck_assert(!heap_trim__maybe_moved(&t, 8u << 20, 1));
	ck_assert(t.looked);
	for (unsigned int i = 0; i < N; i++) {
		p[i] = malloc(SZ);
		ck_assert_ptr_nonnull(p[i]);
		memset(p[i], 1, SZ);
	}
	/* The last one stays: the freed chunks are inside the heap, not at its top. */
	for (unsigned int i = 0; i + 1 < N; i++)
		free(p[i]);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* The sanitizer's allocator stands in for glibc's: mallinfo2() sees no
	 * heap, so only the key rule can be checked. */
	ck_assert(!heap_trim__maybe_moved(&t, 8u << 20, 1));
	ck_assert_uint_eq(t.key, 1);
	heap_trim__maybe_moved(&t, 8u << 20, 2);
	ck_assert_uint_eq(t.key, 2);
#else
	ck_assert_uint_ge(mallinfo2().fordblks, 8u << 20);
	/* 16 MiB free, the key did not move: no look, no trim. */
	ck_assert(!heap_trim__maybe_moved(&t, 8u << 20, 1));
	/* It moved: the look finds them and trims. */
	ck_assert(heap_trim__maybe_moved(&t, 8u << 20, 2));
	/* Moved again, nothing more free since the trim: no trim. */
	ck_assert(!heap_trim__maybe_moved(&t, 8u << 20, 3));
#endif
	free(p[N - 1]);
	free(p);
}
END_TEST

/*
 * Mount namespaces of gone processes (common/procroot.h), over a fake proc
 * whose PID/ns/mnt files' inodes stand for namespaces: a live process of
 * one found by a walk, by the exec table between walks (a walk is a second
 * apart at least), none for an exited one; ours never needs one.
 */
/* proc/PID/ns/mnt, a file of its own: its inode is PID's namespace. */
static uint32_t fake_proc(const char *proc, uint32_t pid)
{
	char path[700];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/%u", proc, pid);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%u/ns", proc, pid);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%u/ns/mnt", proc, pid);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	close(fd);
	return (uint32_t)st.st_ino;
}

START_TEST(test_mnt_peer)
{
	static struct proc_mnt_tab tab;
	char dir[512], proc[600], path[700];
	uint32_t ns_b, ns_c;

	test_scratch_in(dir, sizeof(dir), "mntpeer");
	snprintf(proc, sizeof(proc), "%s/proc", dir);
	ck_assert_int_eq(mkdir(proc, 0755), 0);
	ns_b = fake_proc(proc, 11);
	ns_b = fake_proc(proc, 12);
	ck_assert_uint_eq(proc_mnt_ns(proc, 12), ns_b);
	ck_assert_uint_eq(proc_mnt_ns(proc, 13), 0);

	/* The first look walks proc. */
	ck_assert_uint_eq(proc_mnt_peer(proc, NULL, ns_b), 12);
	ck_assert_uint_eq(proc_mnt_peer(proc, NULL, ns_b), 12); /* kept */
	/* A namespace born since: no walk within the second... */
	ns_c = fake_proc(proc, 13);
	snprintf(path, sizeof(path), "%s/13", proc);
	ck_assert_uint_eq(proc_mnt_peer(proc, NULL, ns_c), 0);
	/* ... but its exec was seen: that process. */
	proc_mnt_note(&tab, 21, ns_c); /* gone meanwhile (no proc/21) */
	proc_mnt_note(&tab, 13, ns_c);
	ck_assert_uint_eq(proc_mnt_peer(proc, &tab, ns_c), 13);
	/* It exits: its namespace is still known, no peer left. */
	proc_mnt_exit(&tab, 13);
	test_rm_rf(path);
	ck_assert_uint_eq(proc_mnt_of(&tab, 13), ns_c);
	ck_assert_uint_eq(proc_mnt_of(&tab, 13 + PROC_MNT_SLOTS), 0);
	ck_assert_uint_eq(proc_mnt_of(&tab, 0), 0);
	ck_assert_uint_eq(proc_mnt_peer(proc, &tab, ns_c), 0);
	/* Ours, or unknown: no peer needed. */
	ck_assert_uint_ne(proc_mnt_self(), 0);
	ck_assert_uint_eq(proc_mnt_ns(NULL, (uint32_t)getpid()), proc_mnt_self());
	ck_assert_uint_eq(proc_mnt_peer(NULL, NULL, proc_mnt_self()), 0);
	ck_assert_uint_eq(proc_mnt_peer(proc, &tab, 0), 0);
	/* The seed at start: every process there noted with its namespace
	 * (those that exec'd before we started: no exec event names them). */
	memset(&tab, 0, sizeof(tab));
	ck_assert_uint_eq(proc_mnt_seed(proc, &tab), 2);
	ck_assert_uint_eq(proc_mnt_of(&tab, 11), proc_mnt_ns(proc, 11));
	ck_assert_uint_eq(proc_mnt_of(&tab, 12), ns_b);
	ck_assert_uint_eq(proc_mnt_of(&tab, 13), 0);
	test_rm_rf(dir);
}
END_TEST

/* Files of root/NAME holding NAME (a scratch tree). */
static void put_file(const char *root, const char *name)
{
	char path[700];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, name, strlen(name)), (ssize_t)strlen(name));
	close(fd);
}

/* What proc_root_open(root, path) opened ("" when it failed). */
static const char *read_in_root(const char *root, const char *path, char *buf, size_t len)
{
	int fd = proc_root_open(root, path, O_RDONLY);

	if (fd < 0)
		return "";
	test_slurp_fd(fd, buf, len);
	return buf;
}

/* Whether openat2 works here: false (ENOSYS: before Linux 5.6; EPERM: a
 * seccomp profile that predates it) where proc_root_open() joins paths. */
static bool have_openat2(void)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC};
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));

	if (fd >= 0)
		close(fd);
	return fd >= 0 || (errno != ENOSYS && errno != EPERM);
}

/*
 * A process's paths resolve inside its root (common/procroot.h): an absolute
 * symlink of the tree (a container's /usr/lib/debug/.build-id/... ->
 * /opt/...) leads to root/opt, not to our /opt; ".." stops at root, by path
 * or by link; "" is ours. Without openat2 only what holds joined is checked.
 */
START_TEST(test_root_open)
{
	char dir[512], root[600], path[700], buf[64];
	bool in_root = have_openat2();

	test_scratch_in(dir, sizeof(dir), "rootopen");
	snprintf(root, sizeof(root), "%s/root", dir);
	put_file(dir, "outside");
	ck_assert_int_eq(mkdir(root, 0755), 0);
	snprintf(path, sizeof(path), "%s/opt", root);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	put_file(root, "opt/x.debug");
	put_file(root, "outside");
	snprintf(path, sizeof(path), "%s/lib", root);
	ck_assert_int_eq(symlink("/", path), 0); /* a container's /lib -> / */
	snprintf(path, sizeof(path), "%s/dbg", root);
	ck_assert_int_eq(symlink("/opt/x.debug", path), 0);
	snprintf(path, sizeof(path), "%s/up", root);
	ck_assert_int_eq(symlink("../../outside", path), 0);
	ck_assert_str_eq(read_in_root(root, "/opt/x.debug", buf, sizeof(buf)), "opt/x.debug");
	/* A name, not a path: nothing under root. */
	ck_assert_int_eq(proc_root_open(root, "opt/x.debug", O_RDONLY), -ENOENT);
	/* Ours: a plain open. */
	snprintf(path, sizeof(path), "%s/outside", dir);
	ck_assert_str_eq(read_in_root("", path, buf, sizeof(buf)), "outside");
	if (!in_root) {
		fprintf(stderr, "test_root_open: no openat2 here, its checks skipped\n");
		test_rm_rf(dir);
		return;
	}
	/* Our /opt/x.debug is not there: the link leads into root. */
	ck_assert_int_ne(access("/opt/x.debug", F_OK), 0);
	ck_assert_str_eq(read_in_root(root, "/dbg", buf, sizeof(buf)), "opt/x.debug");
	ck_assert_str_eq(read_in_root(root, "/lib/lib/opt/x.debug", buf, sizeof(buf)),
			 "opt/x.debug");
	/* Up past root: root's own "outside", never dir's. */
	ck_assert_str_eq(read_in_root(root, "/../../outside", buf, sizeof(buf)), "outside");
	ck_assert_str_eq(read_in_root(root, "/up", buf, sizeof(buf)), "outside");
	snprintf(path, sizeof(path), "%s/outside", root);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(proc_root_open(root, "/up", O_RDONLY), -ENOENT);
	ck_assert_int_eq(proc_root_open(root, "/../outside", O_RDONLY), -ENOENT);
	/* The magic links of proc are not followed inside a root (ELOOP:
	 * refused as a magic link, not EXDEV for leaving root). */
	snprintf(path, sizeof(path), "/proc/%d/root", (int)getpid());
	ck_assert_int_eq(proc_root_open(path, "/proc/self/root/etc/hostname", O_RDONLY), -ELOOP);
	test_rm_rf(dir);
}
END_TEST

/* proc_root_open() of name under root (and as ours, root "") is err, and
 * proc_root_stat() finds the file. */
static void assert_refused(const char *root, const char *name, int err)
{
	char path[700];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "/%s", name);
	ck_assert_int_eq(proc_root_open(root, path, O_RDONLY), err);
	ck_assert_int_eq(proc_root_stat(root, path, 0, &st), 0);
	fd = proc_root_open(root, path, O_PATH); /* opens nothing: taken */
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/%s", root, name);
	ck_assert_int_eq(proc_root_open("", path, O_RDONLY), err);
}

/*
 * Only a regular file (or a directory asked for) is opened under a root or
 * ours: a FIFO a container put at its debug file's path would block open()
 * for ever, a device node it made would be opened by us. Refused at once
 * (a 20 s alarm stands for "for ever"). The device part needs mknod (root).
 */
START_TEST(test_root_open_special)
{
	char dir[512], root[600], path[700];
	struct stat st;
	int fd;

	signal(SIGALRM, SIG_DFL);
	alarm(20);
	test_scratch_in(dir, sizeof(dir), "rootspecial");
	snprintf(root, sizeof(root), "%s/root", dir);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	put_file(root, "file");
	snprintf(path, sizeof(path), "%s/fifo", root);
	ck_assert_int_eq(mkfifo(path, 0666), 0);
	assert_refused(root, "fifo", -EPERM);
	snprintf(path, sizeof(path), "%s/null", root);
	if (mknod(path, S_IFCHR | 0666, makedev(1, 3)) == 0)
		assert_refused(root, "null", -EPERM);
	else
		fprintf(stderr, "test_root_open_special: mknod: %s, device part skipped\n",
			strerror(errno));
	snprintf(path, sizeof(path), "%s/link", root);
	ck_assert_int_eq(symlink("/file", path), 0);
	/* A directory: as a file no, with O_DIRECTORY yes. */
	assert_refused(root, "", -EISDIR);
	fd = proc_root_open(root, "/", O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(proc_root_stat(root, "/file", O_DIRECTORY, &st), -ENOTDIR);
	ck_assert_int_eq(proc_root_stat(root, "/", O_DIRECTORY, &st), 0);
	/* O_NOFOLLOW: the link itself, refused as open() would. */
	ck_assert_int_eq(proc_root_open(root, "/link", O_RDONLY | O_NOFOLLOW), -ELOOP);
	ck_assert_int_eq(proc_root_stat(root, "/link", O_NOFOLLOW, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_int_eq(proc_root_stat(root, "/link", 0, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	/* A regular file: opened with the flags asked for. */
	fd = proc_root_open(root, "/file", O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);
	close(fd);
	alarm(0);
	test_rm_rf(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("common");
	struct {
		const char *name;
		const TTest *test;
	} cases[] = {
		{"timeutil", test_timeutil},
		{"fileio", test_read_full_file},
		{"intern", test_intern},
		{"cpulist", test_cpulist},
		{"probespec", test_probespec},
		{"array", test_array},
		{"hash", test_hash},
		{"intern_flags", test_intern_flags},
		{"gopclntab", test_gopclntab},
		{"heaptrim", test_heaptrim},
		{"probespec_insn", test_probespec_insn_boundary},
		{"probespec_refused", test_probespec_insn_refused},
		{"mnt_peer", test_mnt_peer},
		{"root_open", test_root_open},
		{"root_open_special", test_root_open_special},
	};

	for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);

		tcase_add_test(tc, cases[i].test);
		suite_add_tcase(s, tc);
	}
	return test_run_suite(s);
}
