/* SPDX-License-Identifier: MIT */
/*
 * A fuzz target without libFuzzer: runs LLVMFuzzerTestOneInput() once per
 * file named on the command line (a directory: every regular file in it,
 * sorted). The regression corpus tests/fuzz_regress/<target>/ replays
 * through this under ctest; a crash, or an input that raises the peak RSS
 * by more than REPLAY_RSS_MAX, fails the test.
 *
 *   fuzz_replay_<target> FILE|DIR...
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "common/fileio.h"
#include "fuzz_util.h"

#define REPLAY_MAX (64u << 20)
/* One input may raise the peak RSS by this much (a decompression bomb that
 * got through shows here; libFuzzer's -rss_limit_mb does it in fuzz runs).
 * Not under ASan, whose shadow and quarantine grow on their own. */
#define REPLAY_RSS_MAX (192ull << 20)

static uint64_t peak_rss(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_maxrss << 10;
}

static int run_file(const char *path)
{
	char *buf = NULL;
	size_t len = 0;
	int r = read_full_file(path, 0, REPLAY_MAX, &buf, &len);
	uint64_t before;

	if (r < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(-r));
		return -1;
	}
	before = peak_rss();
	LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
	free(buf);
#ifdef __SANITIZE_ADDRESS__
	(void)before;
#else
	if (peak_rss() - before > REPLAY_RSS_MAX) {
		fprintf(stderr, "%s: peak RSS grew %llu MiB\n", path,
			(unsigned long long)((peak_rss() - before) >> 20));
		return -1;
	}
#endif
	return 0;
}

static int filter(const struct dirent *de)
{
	return de->d_name[0] != '.';
}

int main(int argc, char **argv)
{
	unsigned int n = 0;
	int i, bad = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
	}
	for (i = 1; i < argc; i++) {
		struct dirent **de;
		struct stat st;
		int k, m;

		if (stat(argv[i], &st) < 0 && errno == ENOENT)
			continue; /* a target without regression inputs yet */
		if (stat(argv[i], &st) < 0) {
			perror(argv[i]);
			bad++;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			bad += run_file(argv[i]) < 0;
			n++;
			continue;
		}
		m = scandir(argv[i], &de, filter, alphasort);
		if (m < 0) {
			perror(argv[i]);
			bad++;
			continue;
		}
		for (k = 0; k < m; k++) {
			char path[4096];

			snprintf(path, sizeof(path), "%s/%s", argv[i], de[k]->d_name);
			if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				bad += run_file(path) < 0;
				n++;
			}
			free(de[k]);
		}
		free(de);
	}
	printf("%s: %u inputs replayed, %d unreadable or over the RSS cap\n", argv[0], n, bad);
	return bad ? 1 : 0;
}
