/* SPDX-License-Identifier: MIT */
/*
 * Seed corpora of the fuzz targets from real files (docs/reliability.md):
 *   fuzz_seeds OUTDIR SOURCE_DIR
 * writes OUTDIR/<target>/... :
 *   store_seg, store_index  segments and index of a store the real writer
 *                           makes (30 s of samples, a loss row, two blocks
 *                           per segment rotation);
 *   journal                 the dictionary journal that writer kept;
 *   ring_storer             the records symd sends the storer (ring 2);
 *   ring_symd               the records unwindd sends symd (ring 1), naming libc;
 *   procmaps                /proc/self/maps and the unwindd fixture;
 *   ksyms                   the first 400 lines of /proc/kallsyms and the fixtures;
 *   jitmap                  the perf-PID.map fixture and a generated map;
 *   elfid, elfsym, cfi      small ELF files from /usr/bin and /usr/lib;
 *   gopclntab               the .gopclntab of Debian's gofmt (when go is there);
 *   opts, config            command lines and --config files.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "shm/records.h"
#include "storer/store.h"
#include "tests/test_store_util.h"

#define ELF_SEED_MAX (96u << 10) /* small ELFs keep the execs/s up */
#define ELF_SEEDS    12

static const char *outdir;

static void put(const char *target, const char *name, const void *p, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", outdir, target);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", outdir, target, name);
	f = fopen(path, "we");
	if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) {
		fprintf(stderr, "fuzz_seeds: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

static int slurp(const char *path, size_t max, char **ret, size_t *ret_len)
{
	return read_full_file(path, 0, max, ret, ret_len);
}

static void copy(const char *target, const char *name, const char *from, size_t max)
{
	char *buf = NULL;
	size_t len;

	if (slurp(from, max, &buf, &len) == 0)
		put(target, name, buf, len);
	free(buf);
}

/* ---- ring 2 records: type, length, payload (fuzz_ring_storer.c) ---- */

static char ring[1 << 20];
static size_t ring_len;

static void rec(uint16_t type, const void *a, uint32_t alen, const void *b, uint32_t blen)
{
	uint16_t len = (uint16_t)(alen + blen);

	if (ring_len + 4 + len > sizeof(ring))
		return;
	memcpy(ring + ring_len, &type, 2);
	memcpy(ring + ring_len + 2, &len, 2);
	memcpy(ring + ring_len + 4, a, alen);
	if (blen)
		memcpy(ring + ring_len + 4 + alen, b, blen);
	ring_len += 4 + len;
}

static void rec_sink(void *ctx, uint16_t type, const void *a, uint32_t alen, const void *b,
		     uint32_t blen)
{
	(void)ctx;
	rec(type, a, alen, b, blen);
}

static void ring_seed(uint32_t nframes, uint32_t nstacks, uint32_t nsec, const char *name)
{
	uint64_t base = t_base_ns(), seq = 1;
	uint32_t i;

	ring_len = 0;
	t_defs_emit(rec_sink, NULL, nframes, nstacks);
	for (i = 0; i < nsec * 4; i++) {
		struct cpa_sample_out o;

		t_sample(&o, seq++, base + i * (T_NS / 4), 1 + i % nstacks, 0);
		rec(CPA_REC_SAMPLE_OUT, &o, sizeof(o), NULL, 0);
		if (i % 17 == 5) {
			struct cpa_loss lo = {.seq = seq++,
					      .time_ns = base + i * (T_NS / 4),
					      .count = 3,
					      .stage = 1,
					      .reason = 2};

			rec(CPA_REC_LOSS, &lo, sizeof(lo), NULL, 0);
		}
	}
	put("ring_storer", name, ring, ring_len);
}

/* ---- ring 1 records: what unwindd sends symd (fuzz_ring_symd.c) ---- */

static void symd_seed(const char *elf, const char *name)
{
	struct cpa_module_def m = {.id = 3, .kind = CPA_MOD_FILE, .pid = 4242};
	struct cpa_module_def k = {.id = 4, .kind = CPA_MOD_KERNEL};
	struct cpa_module_def v = {.id = 5, .kind = CPA_MOD_ANON, .pid = 4242};
	struct cpa_task_event te = {.seq = 1,
				    .time_ns = t_base_ns(),
				    .pid = 4242,
				    .tid = 4243,
				    .kind = CPA_TASK_EXEC,
				    .comm = "worker"};
	struct cpa_loss lo = {
		.seq = 2, .time_ns = t_base_ns(), .count = 7, .stage = 1, .reason = 2};
	uint64_t seq = 3;

	ring_len = 0;
	m.path_len = (uint32_t)strlen(elf);
	m.map_start = 0x7f0000000000ull;
	m.map_end = 0x7f0000100000ull;
	rec(CPA_REC_MODULE, &m, sizeof(m), elf, m.path_len);
	rec(CPA_REC_MODULE, &k, sizeof(k), NULL, 0);
	rec(CPA_REC_MODULE, &v, sizeof(v), "[anon:jit]", 10);
	rec(CPA_REC_TASK, &te, sizeof(te), NULL, 0);
	rec(CPA_REC_LOSS, &lo, sizeof(lo), NULL, 0);
	for (uint32_t i = 0; i < 24; i++) {
		struct {
			struct cpa_frames f;
			uint64_t kpc[2];
			struct cpa_uframe uf[4];
		} r = {0};

		r.f.seq = seq++;
		r.f.time_ns = t_base_ns() + i * (T_NS / 8);
		r.f.weight = 1;
		r.f.pid = 4242;
		r.f.tid = 4243 + i % 2;
		r.f.kind = CPA_KIND_ONCPU;
		memcpy(r.f.comm, "worker", 7);
		memcpy(r.f.pcomm, "app", 4);
		r.f.n_kframes = i % 3 ? 2 : 0;
		r.f.n_uframes = 4;
		r.f.stop_reason = i % 5 ? CPA_STOP_END : CPA_STOP_NO_CFI;
		r.kpc[0] = 0xffffffff81000150ull + i;
		r.kpc[1] = 0xffffffffc0001010ull;
		for (uint32_t j = 0; j < 4; j++) {
			r.uf[j].offset = 0x1000 + (i * 97 + j * 331) % 0x4000;
			r.uf[j].pc = m.map_start + r.uf[j].offset;
			r.uf[j].module_id = j == 3 && i % 4 == 0 ? 5 : 3;
			r.uf[j].flags = j == 0		       ? CPA_UF_LEAF
					: j == 3 && i % 4 == 0 ? CPA_UF_ANON
							       : 0;
		}
		if (r.f.n_kframes) {
			rec(CPA_REC_FRAMES, &r, sizeof(r), NULL, 0);
		} else {
			/* no kernel pcs: the user frames follow the header directly */
			struct {
				struct cpa_frames f;
				struct cpa_uframe uf[4];
			} u = {.f = r.f};

			memcpy(u.uf, r.uf, sizeof(u.uf));
			rec(CPA_REC_FRAMES, &u, sizeof(u), NULL, 0);
		}
	}
	te.kind = CPA_TASK_EXIT;
	te.seq = seq++;
	rec(CPA_REC_TASK, &te, sizeof(te), NULL, 0);
	put("ring_symd", name, ring, ring_len);
}

/* ---- a store written by the real writer ---- */

static void store_seeds(void)
{
	struct store_writer_opts o = {.block_seconds = 5,
				      .cpu_num = 2,
				      .freq = 49,
				      .record_interval = 1,
				      .stack_size = 8192,
				      .record_env_name = "ENV",
				      .segment_seconds = 10};
	char *root = t_mkdtemp(), dir[1024], path[1400];
	struct store_writer *w = NULL;
	uint64_t base = t_base_ns(), seq = 1;
	char *idx = NULL, *seg = NULL;
	size_t idx_len = 0, seg_len = 0;
	struct dirent *de;
	DIR *d;

	o.root = root;
	if (!root || store_writer__new(&o, &w) < 0) {
		fprintf(stderr, "fuzz_seeds: store writer failed\n");
		exit(1);
	}
	store_writer__set_run_id(w, base);
	store_writer__journal_open(w, root);
	store_writer__dict_reset(w, 1);
	t_defs(w, 12, 0);
	for (uint32_t sec = 0; sec < 30; sec++) {
		for (uint32_t k = 0; k < 6; k++) {
			struct cpa_sample_out s;

			t_sample(&s, seq++, base + sec * T_NS + k * 100000000ull,
				 1 + (sec + k) % 12, 0);
			if (!store_writer__fits(w, s.time_ns))
				store_writer__close_block(w);
			store_writer__add_sample(w, &s);
		}
		if (sec % 7 == 3) {
			struct cpa_loss lo = {.seq = seq++,
					      .time_ns = base + sec * T_NS,
					      .count = 4,
					      .stage = 1,
					      .reason = 2};

			store_writer__add_loss(w, &lo);
		}
		{ /* the second's scheduler metrics: processes come and go, two CPUs */
			struct cpa_metrics m = {.seq = seq++,
						.time_ns = base + sec * T_NS,
						.interval_ms = 1000,
						.flags = CPA_MF_COUNTERS | CPA_MF_SYSTEM,
						.nr_cpus = 2,
						.cpu_busy_ticks = 100 + sec};
			struct cpa_metrics_ent e[8] = {0};

			for (uint32_t k = 0; k < 8; k++) {
				e[k].kind = k < 2 ? CPA_MK_CPU : CPA_MK_PROC;
				e[k].id = k < 2 ? k : 1000 + (sec / 3 + k) % 11;
				if (k >= 2)
					snprintf(e[k].comm, sizeof(e[k].comm), "proc%u",
						 e[k].id % 4);
				e[k].oncpu_ns = 1234567ull * (k + 1) + sec * 9973;
				e[k].runq_ns = 45678ull * k + sec;
				e[k].switches[CPA_MR_PREEMPT] = (sec + k) % 20;
				e[k].switches[CPA_MR_SLEEP] = k * 3;
				e[k].runq_n = e[k].switches[0] + e[k].switches[1] + k % 2;
				e[k].slices = e[k].switches[0] + e[k].switches[1];
			}
			m.n_ents = 8;
			store_writer__add_metrics(w, &m, e);
		}
		store_writer__tick(w, base + sec * T_NS);
	}
	store_writer__close_block(w);
	store_writer__flush(w, true);
	store_writer__free(w);

	if (t_store_dir(root, dir, sizeof(dir)) < 0) {
		fprintf(stderr, "fuzz_seeds: no store dir in %s\n", root);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/index", dir);
	slurp(path, 1 << 20, &idx, &idx_len);
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, "seg_", 4))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		free(seg);
		seg = NULL;
		if (slurp(path, 16 << 20, &seg, &seg_len) < 0)
			continue;
		put("store_seg", de->d_name, seg, seg_len);
		if (!strcmp(de->d_name, "seg_000001.cps")) {
			/* fuzz_store_index: u32 length, index, segment 1 */
			char *all = malloc(4 + idx_len + seg_len);
			uint32_t n = (uint32_t)idx_len;

			memcpy(all, &n, 4);
			memcpy(all + 4, idx, idx_len);
			memcpy(all + 4 + idx_len, seg, seg_len);
			put("store_index", "index+seg_000001", all, 4 + idx_len + seg_len);
			free(all);
		}
	}
	if (d)
		closedir(d);
	d = opendir(root);
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, ".storer-dict-", 13))
			continue;
		snprintf(path, sizeof(path), "%s/%s", root, de->d_name);
		copy("journal", de->d_name + 1, path, 16 << 20);
	}
	if (d)
		closedir(d);
	free(idx);
	free(seg);
	t_rm_rf(root);
	free(root);
}

/* ---- ELF files: the first few small ones in a few system dirs ---- */

static void elf_seeds(void)
{
	static const char *const dirs[] = {"/usr/bin", "/usr/lib/x86_64-linux-gnu", "/usr/sbin"};
	unsigned int n = 0;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && n < ELF_SEEDS; i++) {
		struct dirent **de;
		int m = scandir(dirs[i], &de, NULL, alphasort);

		for (int k = 0; k < m; k++) {
			char path[4096], *buf = NULL;
			size_t len;
			struct stat st;

			snprintf(path, sizeof(path), "%s/%s", dirs[i], de[k]->d_name);
			if (n < ELF_SEEDS && lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
			    st.st_size > 1024 && st.st_size <= ELF_SEED_MAX && k % 3 == 0 &&
			    slurp(path, ELF_SEED_MAX, &buf, &len) == 0 && len > 64 &&
			    !memcmp(buf, "\177ELF\2", 5)) {
				put("elfid", de[k]->d_name, buf, len);
				put("elfsym", de[k]->d_name, buf, len);
				put("cfi", de[k]->d_name, buf, len);
				n++;
			}
			free(buf);
			free(de[k]);
		}
		if (m > 0)
			free(de);
	}
}

/* ---- .gopclntab: gofmt's, when Debian's go is installed ---- */

static void gopclntab_seeds(void)
{
	static const char *const paths[] = {"/usr/lib/go/bin/gofmt", "/usr/lib/go-1.19/bin/gofmt"};
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	char *buf = NULL;
	size_t len = 0, i;

	for (i = 0; i < sizeof(paths) / sizeof(paths[0]) && !buf; i++)
		if (slurp(paths[i], 64u << 20, &buf, &len) < 0)
			buf = NULL;
	if (!buf || len < sizeof(*eh))
		goto out;
	eh = (const void *)buf;
	if (eh->e_shoff > len || eh->e_shnum > (len - eh->e_shoff) / sizeof(*sh) ||
	    eh->e_shstrndx >= eh->e_shnum)
		goto out;
	sh = (const void *)(buf + eh->e_shoff);
	for (i = 0; i < eh->e_shnum; i++) {
		size_t name = sh[eh->e_shstrndx].sh_offset + sh[i].sh_name;

		if (name + 11 <= len && !memcmp(buf + name, ".gopclntab", 11) &&
		    sh[i].sh_offset <= len && sh[i].sh_size <= len - sh[i].sh_offset) {
			put("gopclntab", "gofmt", buf + sh[i].sh_offset, sh[i].sh_size);
			/* cut short: the functab and names past the end */
			put("gopclntab", "gofmt_head", buf + sh[i].sh_offset,
			    sh[i].sh_size < 4096 ? sh[i].sh_size : 4096);
		}
	}
out:
	free(buf);
}

/* ---- text inputs ---- */

static void text_seeds(const char *src)
{
	char path[4096], *buf = NULL;
	size_t len, cut = 0;
	int lines = 0;

	copy("procmaps", "self_maps", "/proc/self/maps", 1 << 20);
	snprintf(path, sizeof(path), "%s/tests/fixtures/unwindd/maps_basic.txt", src);
	copy("procmaps", "maps_basic", path, 1 << 20);

	if (slurp("/proc/kallsyms", 64 << 20, &buf, &len) == 0) {
		while (cut < len && lines < 400)
			if (buf[cut++] == '\n')
				lines++;
		put("ksyms", "proc_kallsyms_head", buf, cut);
		/* and a stretch with module symbols, from the tail */
		if (len > cut) {
			size_t from = len > 16384 ? len - 16384 : cut;

			while (from < len && buf[from - 1] != '\n')
				from++;
			put("ksyms", "proc_kallsyms_tail", buf + from, len - from);
		}
	}
	free(buf);
	snprintf(path, sizeof(path), "%s/tests/fixtures/symd/kallsyms", src);
	copy("ksyms", "fixture", path, 1 << 20);
	snprintf(path, sizeof(path), "%s/tests/fixtures/symd/kallsyms_zeroed", src);
	copy("ksyms", "fixture_zeroed", path, 1 << 20);

	snprintf(path, sizeof(path), "%s/tests/fixtures/symd/perf.map", src);
	copy("jitmap", "fixture", path, 1 << 20);
	{
		char map[8192];
		size_t n = 0;

		for (int i = 0; i < 60 && n < sizeof(map) - 128; i++)
			n += (size_t)snprintf(map + n, sizeof(map) - n, "%llx %x %s_%d [jit]\n",
					      0x7f1234560000ull + (unsigned long long)i * 0x140,
					      0x100 + i, i % 2 ? "LazyCompile:*fn" : "Builtin:Stub",
					      i);
		put("jitmap", "generated", map, n);
	}

	/* opts: byte 0 = sub-command (0 monitor, 1 show, 2 ctl), then argv at NULs */
	{
		static const char mon[] = "\0-F\0"
					  "99\0--pid\0"
					  "1\0--duration\0"
					  "5\0-K\0"
					  "--store_dir\0/tmp/s\0--probe\0uprobe:/bin/true:main\0"
					  "--offcpu\0--offcpu_state\0RSD\0--debug_option\0"
					  "12,99,/tmp/d";
		static const char show[] = "\1--read\0/tmp/s\0--show_range\0--starttime\0"
					   "10:00:00\0--endtime\0"
					   "10:00:05.500\0--target_cpu\0"
					   "0-3,5\0--format\0svg";
		static const char ctl[] = "\2--store_dir\0/tmp/s\0status";

		put("opts", "monitor", mon, sizeof(mon) - 1);
		put("opts", "show", show, sizeof(show) - 1);
		put("opts", "ctl", ctl, sizeof(ctl) - 1);
	}
	{
		static const char mon[] = "\0# monitor config\nfreq: 99\nkernel_stack: true\n"
					  "store_dir: /var/lib/cpa # comment\nrecord_interval: 1\n"
					  "max_store_size_mb: 64\nprobe: kprobe:vfs_read\n";
		static const char show[] = "\1read: /tmp/s\nstarttime: 10:00:00\nformat: pprof\n"
					   "target_cpu: 1,3-4\n";

		put("config", "monitor", mon, sizeof(mon) - 1);
		put("config", "show", show, sizeof(show) - 1);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: fuzz_seeds OUTDIR SOURCE_DIR\n");
		return 2;
	}
	outdir = argv[1];
	mkdir(outdir, 0755);
	store_seeds();
	ring_seed(40, 12, 8, "defs_samples_loss");
	ring_seed(8, 3, 2, "small");
	symd_seed("/usr/lib/x86_64-linux-gnu/libc.so.6", "libc_frames");
	symd_seed("/nonexistent/lib.so", "missing_module");
	elf_seeds();
	gopclntab_seeds();
	text_seeds(argv[2]);
	printf("fuzz_seeds: corpora in %s\n", outdir);
	return 0;
}
