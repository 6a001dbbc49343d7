// SPDX-License-Identifier: MIT
/*
 * bench_store_tail: what format 1.2's seq trailer costs (docs/store-format.md,
 * "Seq trailer"). The same steady workload is written twice through the real
 * writer, A with seq 0 on every sample (blocks as 1.1 wrote them: no trailer)
 * and B with seqs (1.2), side by side: bytes on disk per sample. Then the
 * restart's tail read on B (store_root__stored_seq(), what a restarted storer
 * does once): its median time after a clean release, after a kill that left
 * the mark 3 blocks below the store, and with the index deleted (the segment
 * walked from its header).
 *
 *   bench_store_tail [--seconds N] [--rate SAMPLES_PER_S] [--reps K]
 */
#include <dirent.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "vgen.h"

#define NSTACKS 60

static uint64_t dir_bytes(const char *path)
{
	char p[PATH_MAX + 300];
	struct dirent *de;
	struct stat sb;
	uint64_t n = 0;
	DIR *d = opendir(path);

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
		if (stat(p, &sb) < 0)
			continue;
		n += S_ISDIR(sb.st_mode) ? dir_bytes(p) : (uint64_t)sb.st_size;
	}
	closedir(d);
	return n;
}

static void rm_rf(const char *path)
{
	char p[PATH_MAX + 300];
	struct dirent *de;
	struct stat sb;
	DIR *d = opendir(path);

	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
		if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
			rm_rf(p);
		else
			unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(path);
}

/* A store of secs seconds at rate samples/s (2 CPUs, 3 processes, 60 stacks
 * of 6-28 frames with long C++ names, skewed); seqs when with_seq. Returns
 * the samples written; the store dir into dir. */
static uint64_t write_store(const char *root, uint64_t run_id, uint32_t secs, uint32_t rate,
			    bool with_seq, char *dir, size_t len)
{
	struct vgen g;
	uint32_t stacks[NSTACKS], comm;
	uint64_t n = 0, seq = 1ull << 40; /* capture's generation 1 (docs/pipeline.md) */
	char **names;
	uint32_t nn;

	if (vgen_open(&g, root, 2) < 0) {
		fprintf(stderr, "store writer for %s failed\n", root);
		exit(1);
	}
	store_writer__set_run_id(g.w, run_id);
	comm = vgen_str(&g, "app");
	for (uint32_t s = 0; s < NSTACKS; s++) {
		char folded[4096];
		size_t o = 0;
		uint32_t depth = 6 + s % 23;

		o += (size_t)snprintf(folded + o, sizeof(folded) - o, "main;run");
		for (uint32_t j = 2; j < depth && o < sizeof(folded) - 128; j++)
			o += (size_t)snprintf(
				folded + o, sizeof(folded) - o,
				";app::service::Handler%u::process_request_%u(Request "
				"const&)",
				(s * 7 + j) % 37, (s * 13 + j * 11) % 400);
		stacks[s] = vgen_stack(&g, folded);
	}
	for (uint32_t sec = 0; sec < secs; sec++)
		for (uint32_t k = 0; k < rate; k++) {
			/* skewed: a few hot stacks, a long tail */
			uint32_t r = (sec * 2654435761u + k * 40503u) % 100;
			uint32_t s = r < 60 ? r % 5 : r % NSTACKS, pid = 1000 + s % 3;
			struct cpa_sample_out o = {.seq = with_seq ? ++seq : 0,
						   .time_ns = run_id + sec * NSEC_PER_SEC +
							      k * (NSEC_PER_SEC / rate),
						   .cgroup_id = 0x100,
						   .weight = 1,
						   .pid = pid,
						   .tid = pid + k % 2,
						   .cpu = k % 2,
						   .kind = CPA_KIND_ONCPU,
						   .stack_id = stacks[s],
						   .comm_id = comm,
						   .pcomm_id = comm};

			if (store_writer__add_sample(g.w, &o) == 0)
				n++;
		}
	store_writer__free(g.w);
	intern__free(&g.names);
	if (store_root__list(root, &names, &nn) < 0 || nn != 1) {
		fprintf(stderr, "no store dir under %s\n", root);
		exit(1);
	}
	snprintf(dir, len, "%s/%s", root, names[0]);
	store_root__list_free(names, nn);
	return n;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Median µs of reps calls; the seq found into *ret. */
static double time_tail(const char *root, uint64_t run_id, uint64_t mark, int reps, uint64_t *ret)
{
	uint64_t *ns = calloc((size_t)reps, sizeof(*ns));
	double med;

	for (int i = 0; i < reps; i++) {
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC);

		if (store_root__stored_seq(root, run_id, mark, ret) < 0) {
			fprintf(stderr, "store_root__stored_seq failed\n");
			exit(1);
		}
		ns[i] = clock_ns(CLOCK_MONOTONIC) - t0;
	}
	qsort(ns, (size_t)reps, sizeof(*ns), u64_cmp);
	med = (double)ns[reps / 2] / 1000.0;
	free(ns);
	return med;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"seconds", required_argument, NULL, 's'},
					     {"rate", required_argument, NULL, 'r'},
					     {"reps", required_argument, NULL, 'k'},
					     {"help", no_argument, NULL, 'h'},
					     {0}};
	uint32_t secs = 600, rate = 98;
	int reps = 21, c;
	const char *tmp = getenv("TMPDIR");
	char base[PATH_MAX], ra[PATH_MAX + 8], rb[PATH_MAX + 8], da[PATH_MAX * 2], db[PATH_MAX * 2],
		idx[PATH_MAX * 2 + 8];
	struct tm tm = {.tm_year = 126, .tm_mon = 10, .tm_mday = 20, .tm_hour = 10, .tm_isdst = -1};
	uint64_t run_id, na, nb, nb_seq, ba, bb, seq, blocks, block_samples;
	double t_clean, t_kill, t_noidx;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			secs = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'r':
			rate = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'k':
			reps = atoi(optarg);
			break;
		default:
			printf("usage: bench_store_tail [--seconds N (600)] [--rate SAMPLES_PER_S "
			       "(98)] [--reps K (21)]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (secs < 30 || !rate || reps < 1) {
		fprintf(stderr, "--seconds >= 30, --rate >= 1, --reps >= 1\n");
		return 2;
	}
	snprintf(base, sizeof(base), "%s/bench_store_tail-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(ra, sizeof(ra), "%s/a", base);
	snprintf(rb, sizeof(rb), "%s/b", base);
	run_id = (uint64_t)mktime(&tm) * NSEC_PER_SEC;
	na = write_store(ra, run_id, secs, rate, false, da, sizeof(da));
	nb = write_store(rb, run_id, secs, rate, true, db, sizeof(db));
	ba = dir_bytes(da);
	bb = dir_bytes(db);
	blocks = (secs + STORE_BLOCK_SECONDS - 1) / STORE_BLOCK_SECONDS;
	block_samples = (uint64_t)rate * STORE_BLOCK_SECONDS;

	printf("store: %u s at %u samples/s (%llu samples, %llu blocks of 5 s), 2 CPUs, %u "
	       "stacks\n\n",
	       secs, rate, (unsigned long long)nb, (unsigned long long)blocks, NSTACKS);
	printf("| | A: no seq (1.1 blocks) | B: seq trailer (1.2) | B / A |\n");
	printf("|---|---:|---:|---:|\n");
	printf("| bytes on disk (all files) | %llu | %llu | %.4f |\n", (unsigned long long)ba,
	       (unsigned long long)bb, (double)bb / (double)ba);
	printf("| bytes per sample | %.4f | %.4f | |\n", (double)ba / (double)na,
	       (double)bb / (double)nb);
	printf("| bytes per block, added | | %.1f | |\n\n", (double)(bb - ba) / (double)blocks);

	nb_seq = (1ull << 40) + nb;
	t_clean = time_tail(rb, run_id, nb_seq, reps, &seq);
	if (seq != nb_seq)
		fprintf(stderr, "clean: seq %llu, want %llu\n", (unsigned long long)seq,
			(unsigned long long)nb_seq);
	t_kill = time_tail(rb, run_id, nb_seq - 3 * block_samples, reps, &seq);
	if (seq != nb_seq)
		fprintf(stderr, "killed: seq %llu, want %llu\n", (unsigned long long)seq,
			(unsigned long long)nb_seq);
	snprintf(idx, sizeof(idx), "%s/index", db);
	unlink(idx);
	t_noidx = time_tail(rb, run_id, 0, reps, &seq);
	if (seq != nb_seq)
		fprintf(stderr, "no index: seq %llu, want %llu\n", (unsigned long long)seq,
			(unsigned long long)nb_seq);
	printf("| restart's tail read (store_root__stored_seq(), B, median of %d) | µs |\n", reps);
	printf("|---|---:|\n");
	printf("| after a clean release (mark = the store's seq) | %.1f |\n", t_clean);
	printf("| killed before a release (mark 3 blocks below) | %.1f |\n", t_kill);
	printf("| index deleted (segment walked from its header, %llu blocks) | %.1f |\n",
	       (unsigned long long)blocks, t_noidx);
	rm_rf(base);
	return 0;
}
