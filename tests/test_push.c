// SPDX-License-Identifier: MIT
/*
 * cpa-push against a local HTTP receiver (loopback, in this test) that
 * keeps what it gets: uploads are pprof that `go tool pprof` reads, with the
 * labels and the window of each; across a cpa-push restart and a backend
 * outage (the receiver answers 503) no window is lost or sent twice, and
 * their samples add up to the store's.
 *
 * The store: 95 seconds from 10:00:00 UTC, written by the store writer;
 * stack s (1..5) is sampled s times a second.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "storer/store.h"
#include "test_store_util.h"
#include "test_util.h"

#define NSEC	 95
#define NSTACKS	 5
#define INTERVAL 10
#define MAXUP	 64

static char *root;

struct upload {
	long long from, until;
	char query[1024];
	char org[64];
	char target[256]; /* request path without the query */
	char path[1100];  /* the body, as received */
};

static struct {
	int fd, port;
	pthread_t th;
	atomic_int fail_next; /* answer 503 to this many requests */
	atomic_int fail_vary; /* with a body naming the request (each reads its own way) */
	atomic_int failed;
	struct upload up[MAXUP];
	atomic_int n;
} rx;

/* One request off c: its head (NUL-terminated) into head, its body malloc'd
 * (NULL when out of memory), *ret_len the body's bytes read. */
static char *rx_read_request(int c, char *head, size_t size, size_t *ret_len)
{
	size_t len = 0, clen = 0, got;
	char *body, *p;
	ssize_t n;

	while (len < size - 1 && (n = read(c, head + len, size - 1 - len)) > 0) {
		len += (size_t)n;
		head[len] = 0;
		if (strstr(head, "\r\n\r\n"))
			break;
	}
	head[len] = 0;
	p = strcasestr(head, "Content-Length:");
	if (p)
		clen = strtoul(p + 15, NULL, 10);
	body = malloc(clen + 1);
	p = strstr(head, "\r\n\r\n");
	got = p ? len - (size_t)(p + 4 - head) : 0;
	got = got < clen ? got : clen;
	if (body && got)
		memcpy(body, p + 4, got);
	while (body && got < clen && (n = read(c, body + got, clen - got)) > 0)
		got += (size_t)n;
	*ret_len = got;
	return body;
}

static void *rx_main(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept(rx.fd, NULL, NULL);
		char head[8192], *body, *p;
		size_t got;

		if (c < 0)
			return NULL;
		body = rx_read_request(c, head, sizeof(head), &got);
		if (atomic_load(&rx.fail_next) > 0) {
			char msg[64] = "";

			atomic_fetch_sub(&rx.fail_next, 1);
			if (atomic_load(&rx.fail_vary))
				snprintf(msg, sizeof(msg), "overloaded, request %d",
					 atomic_load(&rx.failed));
			atomic_fetch_add(&rx.failed, 1);
			dprintf(c,
				"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
				strlen(msg), msg);
		} else if (atomic_load(&rx.n) < MAXUP && body) {
			struct upload *u = &rx.up[atomic_load(&rx.n)];
			char *q = strchr(head, '?'), *sp = q ? strchr(q, ' ') : NULL, *o;
			FILE *f;

			memset(u, 0, sizeof(*u));
			{
				const char *t = strchr(head, ' ');

				if (t)
					snprintf(u->target, sizeof(u->target), "%.*s",
						 (int)strcspn(t + 1, " ?"), t + 1);
			}
			if (q && sp)
				snprintf(u->query, sizeof(u->query), "%.*s", (int)(sp - q - 1),
					 q + 1);
			p = strstr(u->query, "from=");
			u->from = p ? atoll(p + 5) : -1;
			p = strstr(u->query, "until=");
			u->until = p ? atoll(p + 6) : -1;
			o = strcasestr(head, "X-Scope-OrgID: ");
			if (o)
				snprintf(u->org, sizeof(u->org), "%.*s",
					 (int)strcspn(o + 15, "\r\n"), o + 15);
			snprintf(u->path, sizeof(u->path), "%s/up%02d.pb.gz", root,
				 atomic_load(&rx.n));
			f = fopen(u->path, "we");
			if (f) {
				fwrite(body, 1, got, f);
				fclose(f);
			}
			atomic_fetch_add(&rx.n, 1);
			dprintf(c,
				"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
		}
		free(body);
		close(c);
	}
}

static void rx_start(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int one = 1;

	if (rx.port)
		return; /* one receiver for the program's cases */
	rx.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(rx.fd, 0);
	setsockopt(rx.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(rx.fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(rx.fd, 16), 0);
	ck_assert_int_eq(getsockname(rx.fd, (struct sockaddr *)&a, &al), 0);
	rx.port = ntohs(a.sin_port);
	ck_assert_int_eq(pthread_create(&rx.th, NULL, rx_main, NULL), 0);
}

static void build_store(const char *dir)
{
	struct store_writer_opts o = {.record_interval = 1, .freq = 100};
	struct store_writer *w;
	uint64_t seq = 1, base = t_base_ns();
	uint32_t sec, s, k;

	o.root = dir;
	ck_assert_int_eq(store_writer__new(&o, &w), 0);
	t_defs(w, NSTACKS, 0);
	for (sec = 0; sec < NSEC; sec++)
		for (s = 1; s <= NSTACKS; s++)
			for (k = 0; k < s; k++) {
				struct cpa_sample_out smp;

				t_sample(&smp, seq++, base + sec * T_NS + k * 1000000ull, s, 0);
				ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
			}
	store_writer__free(w);
}

/* appended to the receiver's URL by push() */
static const char *url_tail = "";
/* push()'s stderr goes there when set */
static const char *push_log;
/* push()'s --retry_ms */
static const char *push_retry_ms = "20";

/* Run cpa-push --once with extra args; its exit code. */
static int push(const char *extra1, const char *extra2)
{
	const char *b = getenv("CPA_BUILD_DIR");
	char exe[1100], url[64];
	pid_t pid;
	int st;

	snprintf(exe, sizeof(exe), "%s/bin/cpa-push", b);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", rx.port, url_tail);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = push_log ? open(push_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)
				  : -1;
		const char *argv[24] = {exe,	      "--store_dir", root,     "--url",
					url,	      "--interval",  "10",     "--once",
					"--retry_ms", push_retry_ms, "--host", "testhost",
					"--org_id",   "tenant-1"};
		int n = 14;

		if (fd >= 0)
			dup2(fd, 2);
		argv[n++] = extra1;
		argv[n++] = extra1 ? extra2 : NULL;
		argv[n] = NULL;
		execv(exe, (char **)argv);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Samples in one upload, from go tool pprof -raw (first value column). */
static long upload_samples(const char *path, char *raw, size_t rawlen)
{
	char cmd[1300];
	FILE *p;
	size_t n;
	long sum = 0;
	const char *l;

	snprintf(cmd, sizeof(cmd), "go tool pprof -raw '%s' 2>&1", path);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	n = fread(raw, 1, rawlen - 1, p);
	raw[n] = 0;
	ck_assert_int_eq(pclose(p), 0);
	l = strstr(raw, "\nSamples:\n");
	ck_assert_ptr_nonnull(l);
	for (l = strchr(l + 1, '\n') + 1; l && *l && strncmp(l, "Locations", 9);
	     l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		long v;
		char colon;

		/* "          3   30303030          0: 1 2 3 " (labels on the next lines) */
		if (sscanf(l, " %ld %*d %*d%c", &v, &colon) == 2 && colon == ':')
			sum += v;
	}
	return sum;
}

START_TEST(test_push_restart_and_outage)
{
	static char raw[1 << 20];
	long long first, expect_from;
	long total = 0, want = 0;
	int i, n, rc;

	if (system("command -v go >/dev/null") != 0)
		ck_abort_msg("go (golang-go) is missing: run scripts/deps.sh");
	build_store(root);
	rx_start();
	/* 1: three posts, then cpa-push exits (stands for a restart) */
	rc = push("--max_posts", "3");
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(atomic_load(&rx.n), 3);
	/* 2: the backend fails the next 2 requests; cpa-push retries, resumes, catches up */
	atomic_store(&rx.fail_next, 2);
	rc = push("--verbose", NULL);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(atomic_load(&rx.failed), 2);
	n = atomic_load(&rx.n);
	/* sealed windows only: data ends at 10:01:35, minus the seal margin */
	ck_assert_int_ge(n, 7);
	first = (long long)(t_base_ns() / T_NS);
	expect_from = first;
	for (i = 0; i < n; i++) {
		const struct upload *u = &rx.up[i];

		ck_assert_msg(u->from == expect_from,
			      "upload %d is [%lld, %lld), expected from %lld", i, u->from, u->until,
			      expect_from);
		ck_assert_int_eq(u->until - u->from, INTERVAL);
		ck_assert_ptr_nonnull(strstr(u->query, "format=pprof"));
		ck_assert_ptr_nonnull(strstr(u->query, "name=cpa.cpu%7Bhost%3Dtesthost%7D"));
		ck_assert_str_eq(u->org, "tenant-1");
		total += upload_samples(u->path, raw, sizeof(raw));
		ck_assert_ptr_nonnull(strstr(raw, "pid:["));
		ck_assert_ptr_nonnull(strstr(raw, "comm:[worker]"));
		expect_from = u->until;
	}
	/* every sample of the pushed seconds, once: 1 + 2 + ... + 5 a second */
	want = (long)(expect_from - first) * (NSTACKS * (NSTACKS + 1) / 2);
	ck_assert_int_eq(total, want);
	/* 3: nothing new: a third run posts nothing */
	rc = push(NULL, NULL);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(atomic_load(&rx.n), n);
	/* 4: bounded backlog: from scratch with room for 3 windows, the oldest are
	 * given up and only the newest 3 are posted */
	{
		char pos[1100];

		snprintf(pos, sizeof(pos), "%s/.cpa-push.pos", root);
		ck_assert_int_eq(unlink(pos), 0);
	}
	/* ... through an outage of 3 failed posts: one warning for it (not one a
	 * retry), one line when it ends */
	{
		char lp[1100], *log;
		const char *l;
		int warns = 0;

		snprintf(lp, sizeof(lp), "%s/push.log", root);
		push_log = lp;
		atomic_store(&rx.failed, 0);
		atomic_store(&rx.fail_next, 3);
		rc = push("--backlog", "3");
		push_log = NULL;
		ck_assert_int_eq(atomic_load(&rx.failed), 3);
		log = test_slurp(lp, NULL);
		ck_assert_ptr_nonnull(log);
		for (l = log; (l = strstr(l, "WARNING: post [")); l++)
			warns++;
		ck_assert_msg(warns == 1, "%d warnings for one outage: %s", warns, log);
		ck_assert_msg(strstr(log, "HTTP 503") && strstr(log, "accepted after 3 failed "
								     "attempt(s)"),
			      "%s", log);
		free(log);
		ck_assert_int_eq(unlink(lp), 0);
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(atomic_load(&rx.n), n + 3);
	ck_assert_int_eq(rx.up[n].from, expect_from - 3 * INTERVAL);
	ck_assert_int_eq(rx.up[n + 2].until, expect_from);
	/* 5: Parca: WriteRaw JSON with the pprof base64'd, the same samples */
	{
		char pos[1100], cmd[4096], lp[1100], *log;
		long ptotal = 0;

		snprintf(pos, sizeof(pos), "%s/.cpa-push.pos", root);
		ck_assert_int_eq(unlink(pos), 0);
		n = atomic_load(&rx.n);
		url_tail = "/"; /* a base URL written with its slash: still /profiles/writeraw */
		/* a first retry delay longer than the interval waits the interval (the
		 * delay doubles up to it), not --retry_ms */
		snprintf(lp, sizeof(lp), "%s/push.log", root);
		push_log = lp;
		push_retry_ms = "600000";
		atomic_store(&rx.failed, 0);
		atomic_store(&rx.fail_next, 1);
		rc = push("--protocol", "parca");
		url_tail = "";
		push_log = NULL;
		push_retry_ms = "20";
		ck_assert_int_eq(atomic_load(&rx.failed), 1);
		log = test_slurp(lp, NULL);
		ck_assert_msg(strstr(log, "retried in 10000 ms"), "%s", log);
		free(log);
		ck_assert_int_eq(unlink(lp), 0);
		ck_assert_int_eq(rc, 0);
		ck_assert_int_eq(atomic_load(&rx.n) - n, (int)((expect_from - first) / INTERVAL));
		for (i = n; i < atomic_load(&rx.n); i++) {
			const struct upload *u = &rx.up[i];
			char dec[1200];
			FILE *f;

			ck_assert_str_eq(u->target, "/profiles/writeraw");
			snprintf(dec, sizeof(dec), "%s.pb.gz", u->path);
			snprintf(cmd, sizeof(cmd),
				 "grep -q '\"name\":\"host\",\"value\":\"testhost\"' '%s' && "
				 "sed 's/.*\"rawProfile\":\"\\([^\"]*\\)\".*/\\1/' '%s' | "
				 "base64 -d > '%s'",
				 u->path, u->path, dec);
			ck_assert_int_eq(system(cmd), 0);
			f = fopen(dec, "re");
			ck_assert_ptr_nonnull(f);
			fclose(f);
			ptotal += upload_samples(dec, raw, sizeof(raw));
		}
		ck_assert_int_eq(ptotal, want);
	}
	/* 6: a position file that holds no position is an error, not a start from
	 * the first record (which would post every window again) */
	{
		char pos[1100];
		FILE *f;

		snprintf(pos, sizeof(pos), "%s/.cpa-push.pos", root);
		f = fopen(pos, "we");
		ck_assert_ptr_nonnull(f);
		fputs("garbage\n", f);
		fclose(f);
		n = atomic_load(&rx.n);
		rc = push(NULL, NULL);
		ck_assert_int_eq(rc, 1);
		ck_assert_int_eq(atomic_load(&rx.n), n);
	}
}
END_TEST

/* A URL no post could reach is a usage error, one line naming it, not a
 * cpa-push that fails every post for ever. */
START_TEST(test_push_bad_url)
{
	static const char *const bad[] = {"pyroscope:4040", "http://h:0", "http://h/x?y=1",
					  "ftp://h", ""};
	const char *b = getenv("CPA_BUILD_DIR");
	char cmd[4096], out[2048];

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		FILE *p;
		size_t n;
		int st;

		snprintf(cmd, sizeof(cmd),
			 "timeout 20 '%s/bin/cpa-push' --store_dir '%s' --url '%s' --once 2>&1", b,
			 root, bad[i]);
		p = popen(cmd, "r");
		ck_assert_ptr_nonnull(p);
		n = fread(out, 1, sizeof(out) - 1, p);
		out[n] = 0;
		st = pclose(p);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "'%s': status %d: %s", bad[i],
			      st, out);
		snprintf(cmd, sizeof(cmd), "--url: invalid value '%s' (", bad[i]);
		ck_assert_msg(strstr(out, cmd), "'%s': %s", bad[i], out);
	}
	/* what goes into the series name, the Parca JSON or a header as it is */
	{
		static const char *const lab[][2] = {{"--name", "app{x"},
						     {"--host", "h,env=x"},
						     {"--host", "h\"x"},
						     {"--name", ""},
						     {"--org_id", "t\r\nX-Evil: 1"}};
		char *o;
		int rc;

		for (unsigned int i = 0; i < sizeof(lab) / sizeof(lab[0]); i++) {
			setenv("CPA_T_VAL", lab[i][1], 1);
			o = test_cmd_out(&rc,
					 "timeout 20 '%s/bin/cpa-push' --store_dir '%s' --url "
					 "http://127.0.0.1:9 --once %s \"$CPA_T_VAL\" 2>&1",
					 b, root, lab[i][0]);
			snprintf(cmd, sizeof(cmd), "%s: invalid value '", lab[i][0]);
			ck_assert_msg(rc == 2 && strstr(o, cmd), "%s '%s': exit %d: %s", lab[i][0],
				      lab[i][1], rc, o);
			free(o);
		}
		unsetenv("CPA_T_VAL");
	}
	/* --store_dir: one store dir (not its root) would be waited on for ever, a
	 * file was named as a bad position file */
	{
		char sd[1100], f[1100], want[2400], *o;
		int rc;

		ck_assert_int_eq(t_store_dir(root, sd, sizeof(sd)), 0);
		o = test_cmd_out(&rc,
				 "timeout 20 '%s/bin/cpa-push' --store_dir '%s' --url "
				 "http://127.0.0.1:9 --once 2>&1",
				 b, sd);
		snprintf(want, sizeof(want),
			 "--store_dir '%s' is one store dir: give the store root that holds the "
			 "cpa_* dirs, '%s'",
			 sd, root);
		ck_assert_msg(rc == 2 && strstr(o, want), "exit %d: %s", rc, o);
		free(o);
		snprintf(f, sizeof(f), "%s/.cpa-lock", root);
		o = test_cmd_out(&rc,
				 "timeout 20 '%s/bin/cpa-push' --store_dir '%s' --url "
				 "http://127.0.0.1:9 --once 2>&1",
				 b, f);
		snprintf(want, sizeof(want), "--store_dir '%s': not a directory", f);
		ck_assert_msg(rc == 1 && strstr(o, want) && !strstr(o, "position file"),
			      "exit %d: %s", rc, o);
		free(o);
	}
}
END_TEST

/*
 * Hostile receivers: a forked child on a loopback port of its own, which
 * writes a byte to `ready` for each request it has read whole.
 *   RX_STREAM: the 1st request gets a 503 and the 2nd a 200, each with a
 *              body streamed without a length (16 MiB, then close); the
 *              3rd and later a plain 200.
 *   RX_HANG:   takes the request and answers nothing for 20 s.
 *   RX_FORBID: answers every request 403 with a body naming the cause.
 */
enum rx_mode { RX_STREAM, RX_HANG, RX_FORBID };

struct hrx {
	pid_t pid;
	int port, ready;
};

static void rx_hostile_main(int fd, enum rx_mode mode, int ready)
{
	static char chunk[65536], head[8192];
	size_t got;

	signal(SIGPIPE, SIG_IGN);
	memset(chunk, 'z', sizeof(chunk));
	for (int i = 0;; i++) {
		int c = accept(fd, NULL, NULL);
		size_t sent = 0;

		if (c < 0)
			_exit(0);
		free(rx_read_request(c, head, sizeof(head), &got));
		if (write(ready, "r", 1) != 1)
			_exit(1);
		if (mode == RX_HANG) {
			sleep(20);
			_exit(0);
		}
		if (mode == RX_FORBID) {
			static const char why[] = "tenant-1 may not write profiles";

			dprintf(c,
				"HTTP/1.1 403 Forbidden\r\nContent-Length: %zu\r\nConnection: "
				"close\r\n\r\n%s",
				strlen(why), why);
			close(c);
			continue;
		}
		if (i >= 2) {
			dprintf(c,
				"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
			close(c);
			continue;
		}
		dprintf(c, i == 0 ? "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\n"
				    "backend overloaded: "
				  : "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
		while (sent < (16u << 20)) {
			ssize_t n = write(c, chunk, sizeof(chunk));

			if (n <= 0)
				break;
			sent += (size_t)n;
		}
		close(c);
	}
}

static void rx_hostile_start(struct hrx *h, enum rx_mode mode)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), p[2];

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 16), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	h->port = ntohs(a.sin_port);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	h->pid = fork();
	ck_assert_int_ge(h->pid, 0);
	if (h->pid == 0) {
		close(p[0]);
		rx_hostile_main(fd, mode, p[1]);
	}
	close(fd);
	close(p[1]);
	h->ready = p[0];
}

/* Requests the receiver has read within ms (0 when none came). */
static int rx_wait_requests(const struct hrx *h, int ms)
{
	struct pollfd pf = {.fd = h->ready, .events = POLLIN};
	char buf[64];
	ssize_t n;

	if (poll(&pf, 1, ms) <= 0)
		return 0;
	n = read(h->ready, buf, sizeof(buf));
	return n > 0 ? (int)n : 0;
}

static void rx_hostile_stop(struct hrx *h)
{
	kill(h->pid, SIGKILL);
	waitpid(h->pid, NULL, 0);
	close(h->ready);
}

/* cpa-push on dir against port, stdout and stderr into files of dir; extra:
 * more arguments, NULL-terminated. */
static pid_t push_spawnv(const char *dir, int port, const char *const *extra)
{
	const char *b = getenv("CPA_BUILD_DIR");
	char exe[1100], url[64], out[1100], err[1100];
	const char *argv[32] = {exe,	      "--store_dir", dir,	   "--url", url,
				"--interval", "10",	     "--retry_ms", "20"};
	int n = 9;
	pid_t pid;

	while (*extra && n < 31)
		argv[n++] = *extra++;

	snprintf(exe, sizeof(exe), "%s/bin/cpa-push", b);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	snprintf(out, sizeof(out), "%s/push.out", dir);
	snprintf(err, sizeof(err), "%s/push.err", dir);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int o = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		int e = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(126);
		execv(exe, (char **)argv);
		_exit(127);
	}
	return pid;
}

static pid_t push_spawn(const char *dir, int port, const char *extra1, const char *extra2)
{
	const char *extra[] = {extra1, extra2, NULL};

	return push_spawnv(dir, port, extra);
}

/* Its exit status once it exits within ms, else -1 (still running). */
static int wait_exit_ms(pid_t pid, int ms)
{
	int st;

	for (int i = 0; i < ms / 10; i++) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(10000);
	}
	return -1;
}

static long long file_size(const char *dir, const char *name)
{
	char path[1100];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

static long long pos_read(const char *dir)
{
	char path[1100];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/.cpa-push.pos", dir);
	f = fopen(path, "re");
	if (f) {
		if (fscanf(f, "%lld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/*
 * A receiver that streams its answer without end: nothing of it reaches
 * cpa-push's stdout, a body over the cap fails the post (503 or 200 alike,
 * the start of a 503's body in the log), and the window is posted again
 * until a plain 200 acknowledges it.
 */
START_TEST(test_push_streaming_receiver)
{
	char *dir = t_mkdtemp(), err[1100], text[4096] = "";
	long long first = (long long)(t_base_ns() / T_NS), out_size, err_size, pos;
	struct hrx h;
	int rc, reqs = 0;
	pid_t pid;
	FILE *f;

	build_store(dir);
	rx_hostile_start(&h, RX_STREAM);
	pid = push_spawn(dir, h.port, "--once", "--max_posts=1");
	rc = wait_exit_ms(pid, 60000);
	if (rc < 0)
		kill(pid, SIGKILL), waitpid(pid, NULL, 0);
	for (int n; (n = rx_wait_requests(&h, 100)) > 0;)
		reqs += n;
	rx_hostile_stop(&h);
	out_size = file_size(dir, "push.out");
	err_size = file_size(dir, "push.err");
	pos = pos_read(dir);
	snprintf(err, sizeof(err), "%s/push.err", dir);
	f = fopen(err, "re");
	if (f) {
		text[fread(text, 1, sizeof(text) - 1, f)] = 0;
		fclose(f);
	}
	t_rm_rf(dir);
	free(dir);
	ck_assert_msg(rc == 0, "cpa-push exit %d", rc);
	ck_assert_msg(out_size >= 0 && out_size < 4096, "cpa-push wrote %lld bytes to stdout",
		      out_size);
	ck_assert_msg(err_size >= 0 && err_size < 65536, "cpa-push wrote %lld bytes to stderr",
		      err_size);
	ck_assert_msg(strstr(text, "HTTP 503") && strstr(text, "backend overloaded: zzz"),
		      "no 503 with its body's start in: %s", text);
	ck_assert_int_eq(reqs, 3);
	ck_assert_int_eq(pos, first + INTERVAL);
}
END_TEST

/*
 * A receiver that takes the post and never answers: SIGTERM ends cpa-push
 * at once (the receiver hangs 20 s, curl's own timeout is 30 s), and its
 * position stays on the window it could not deliver.
 */
START_TEST(test_push_sigterm_cancels_post)
{
	char *dir = t_mkdtemp(), pos_path[1100];
	long long first = (long long)(t_base_ns() / T_NS), pos;
	struct timespec t0, t1;
	struct hrx h;
	int rc = -1, reqs;
	double took;
	pid_t pid;
	FILE *f;

	build_store(dir);
	snprintf(pos_path, sizeof(pos_path), "%s/.cpa-push.pos", dir);
	f = fopen(pos_path, "we");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "%lld\n", first);
	fclose(f);
	rx_hostile_start(&h, RX_HANG);
	pid = push_spawn(dir, h.port, "--once", NULL);
	reqs = rx_wait_requests(&h, 30000);
	if (reqs == 1) {
		usleep(300000); /* cpa-push now waits for the answer */
		clock_gettime(CLOCK_MONOTONIC, &t0);
		kill(pid, SIGTERM);
		rc = wait_exit_ms(pid, 10000);
		clock_gettime(CLOCK_MONOTONIC, &t1);
	}
	if (rc < 0)
		kill(pid, SIGKILL), waitpid(pid, NULL, 0);
	rx_hostile_stop(&h);
	pos = pos_read(dir);
	t_rm_rf(dir);
	free(dir);
	took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	ck_assert_int_eq(reqs, 1);
	ck_assert_msg(rc >= 0, "cpa-push still running 10 s after SIGTERM, a post in flight");
	fprintf(stderr, "cpa-push exited %.2f s after SIGTERM\n", took);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(pos, first);
}
END_TEST

/*
 * cpa-push --once as a cron job or CI step runs it (built as test_push_once):
 * while the backend is down it gives up after --timeout s, exit 1, with one
 * line naming the windows it did not post; a later run posts those windows,
 * each once; a 403 ends it at the first post; a daemon (no --once) outlives
 * an outage and says so twice, not once a retry.
 */

/* Runs cpa-push (push_spawnv()) to its exit: its status, and its stderr into
 * err (malloc'd). No timer: a cpa-push that never ends is ended by ctest's
 * TIMEOUT, a failure. */
static int push_run(const char *dir, int port, const char *const *extra, char **err)
{
	char path[1100];
	pid_t pid = push_spawnv(dir, port, extra);
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	snprintf(path, sizeof(path), "%s/push.err", dir);
	*err = test_slurp(path, NULL);
	ck_assert_ptr_nonnull(*err);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A loopback port bound and not listening: a connection to it is refused. */
static int dead_port(int *fd)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);

	*fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(*fd, 0);
	ck_assert_int_eq(bind(*fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(*fd, (struct sockaddr *)&a, &al), 0);
	return ntohs(a.sin_port);
}

/* The range of "windows [A, B) (N of 10 s) not posted" in the give-up line. */
static void not_posted(const char *err, long long *a, long long *b)
{
	const char *l = strstr(err, "ERROR: --once: ");
	long long n;

	ck_assert_msg(l, "no give-up line in: %s", err);
	l = strstr(l, "windows [");
	ck_assert_msg(l && sscanf(l, "windows [%lld, %lld) (%lld of 10 s) not posted", a, b, &n) ==
				      3,
		      "%s", err);
	ck_assert_int_eq(*b - *a, n * INTERVAL);
	ck_assert_int_gt(n, 0);
}

START_TEST(test_push_once_backend_down)
{
	static const char *const two[] = {"--once", "--max_posts", "2", NULL};
	static const char *const bounded[] = {"--once", "--timeout", "2", NULL};
	static const char *const once[] = {"--once", NULL};
	char *dir = t_mkdtemp(), *err, want[1400];
	long long first = (long long)(t_base_ns() / T_NS), a, b, a2, b2;
	int fd, port = dead_port(&fd), n0, rc, i;

	build_store(dir);
	rx_start();
	n0 = atomic_load(&rx.n);
	/* two windows posted, the rest wait */
	rc = push_run(dir, rx.port, two, &err);
	ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
	free(err);
	ck_assert_int_eq(atomic_load(&rx.n) - n0, 2);
	/* nothing listens: exit 1 after --timeout, the rest named, nothing saved */
	rc = push_run(dir, port, bounded, &err);
	ck_assert_msg(rc == 1, "exit %d: %s", rc, err);
	ck_assert_msg(strstr(err, "Couldn't connect to server") &&
			      strstr(err, "no post accepted in 2 s (--timeout)"),
		      "%s", err);
	not_posted(err, &a, &b);
	ck_assert_int_eq(a, first + 2 * INTERVAL);
	snprintf(want, sizeof(want), "nothing lost: the position stays at %lld in %s/.cpa-push.pos",
		 a, dir);
	ck_assert_msg(strstr(err, want), "%s", err);
	free(err);
	ck_assert_int_eq(pos_read(dir), a);
	/* the backend answers 503 (retried) until the bound: the same */
	atomic_store(&rx.failed, 0);
	atomic_store(&rx.fail_next, 1 << 30);
	rc = push_run(dir, rx.port, bounded, &err);
	atomic_store(&rx.fail_next, 0);
	ck_assert_msg(rc == 1 && strstr(err, "HTTP 503"), "exit %d: %s", rc, err);
	ck_assert_int_ge(atomic_load(&rx.failed), 2);
	not_posted(err, &a2, &b2);
	ck_assert_int_eq(a2, a);
	ck_assert_int_eq(b2, b);
	free(err);
	ck_assert_int_eq(atomic_load(&rx.n) - n0, 2);
	/* back: the next run posts exactly the windows named, after the first two */
	rc = push_run(dir, rx.port, once, &err);
	ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
	free(err);
	ck_assert_int_eq(atomic_load(&rx.n) - n0, 2 + (int)((b - a) / INTERVAL));
	for (i = n0; i < atomic_load(&rx.n); i++)
		ck_assert_int_eq(rx.up[i].from, first + (i - n0) * INTERVAL);
	ck_assert_int_eq(rx.up[atomic_load(&rx.n) - 1].until, b);
	/* and a run after it, nothing */
	rc = push_run(dir, rx.port, once, &err);
	ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
	free(err);
	ck_assert_int_eq(atomic_load(&rx.n) - n0, 2 + (int)((b - a) / INTERVAL));
	close(fd);
	t_rm_rf(dir);
	free(dir);
}
END_TEST

/* A 403 will be a 403 again: the first post ends --once (default --timeout),
 * the status and the body's start in its line, the position kept. */
START_TEST(test_push_once_refused)
{
	static const char *const once[] = {"--once", NULL};
	long long first = (long long)(t_base_ns() / T_NS), a, b;
	char *dir = t_mkdtemp(), *err;
	struct hrx h;
	int rc, reqs = 0;

	build_store(dir);
	rx_hostile_start(&h, RX_FORBID);
	rc = push_run(dir, h.port, once, &err);
	for (int n; (n = rx_wait_requests(&h, 100)) > 0;)
		reqs += n;
	rx_hostile_stop(&h);
	ck_assert_msg(rc == 1, "exit %d: %s", rc, err);
	ck_assert_int_eq(reqs, 1);
	ck_assert_msg(strstr(err, "HTTP 403: tenant-1 may not write profiles: refused by the "
				  "backend, not retried"),
		      "%s", err);
	ck_assert_msg(!strstr(err, "WARNING"), "a warning before the error: %s", err);
	not_posted(err, &a, &b);
	ck_assert_int_eq(a, first);
	ck_assert_int_eq(pos_read(dir), -1);
	free(err);
	t_rm_rf(dir);
	free(dir);
}
END_TEST

/*
 * The window's pprof cannot be written (RLIMIT_FSIZE: a full disk stands in):
 * --once retries it as a failed post until --timeout, and its line says the
 * export failed, not an empty reason after no attempt at all.
 */
START_TEST(test_push_once_export_fails)
{
	const char *b = getenv("CPA_BUILD_DIR");
	char *dir = t_mkdtemp(), exe[1100], url[64], err[16384];
	const char *l;
	unsigned int attempts = 0;
	int pfd[2], st, n0;
	size_t n = 0;
	ssize_t k;
	pid_t pid;

	build_store(dir);
	rx_start();
	n0 = atomic_load(&rx.n);
	snprintf(exe, sizeof(exe), "%s/bin/cpa-push", b);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", rx.port);
	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rlimit rl = {100, 100}; /* below any pprof; stderr is a pipe */

		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &rl) < 0 || dup2(pfd[1], 2) < 0)
			_exit(126);
		execl(exe, exe, "--store_dir", dir, "--url", url, "--interval", "10", "--retry_ms",
		      "20", "--once", "--timeout", "2", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while (n < sizeof(err) - 1 && (k = read(pfd[0], err + n, sizeof(err) - 1 - n)) > 0)
		n += (size_t)k;
	err[n] = 0;
	close(pfd[0]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d: %s", st, err);
	l = strstr(err, "ERROR: --once: ");
	ck_assert_msg(l && !strncmp(l + 15, "export [", 8), "no export failure named: %s", err);
	l = strstr(l, "no post accepted in 2 s (--timeout), ");
	ck_assert_msg(l && sscanf(l, "no post accepted in 2 s (--timeout), %u attempt", &attempts),
		      "%s", err);
	ck_assert_msg(attempts >= 2, "given up after %u attempt(s), not retried: %s", attempts,
		      err);
	ck_assert_int_eq(atomic_load(&rx.n), n0);
	ck_assert_int_eq(pos_read(dir), -1);
	t_rm_rf(dir);
	free(dir);
}
END_TEST

/*
 * Without --once: an outage of 6 failed posts, each answer reading its own
 * way, is retried to its end (no --timeout: that is --once's only) and is
 * one warning, then one line when the backend is back; a 403 is retried too.
 */
START_TEST(test_push_daemon_outage)
{
	static const char *const daemon[] = {"--max_posts", "3", NULL};
	static const char *const bad[] = {"--timeout", "5", NULL};
	char *dir = t_mkdtemp(), *err;
	const char *l;
	int n0, rc, warns = 0, backs = 0;

	build_store(dir);
	rx_start();
	n0 = atomic_load(&rx.n);
	atomic_store(&rx.failed, 0);
	atomic_store(&rx.fail_vary, 1);
	atomic_store(&rx.fail_next, 6);
	rc = push_run(dir, rx.port, daemon, &err);
	atomic_store(&rx.fail_vary, 0);
	ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
	ck_assert_int_eq(atomic_load(&rx.failed), 6);
	ck_assert_int_eq(atomic_load(&rx.n) - n0, 3);
	for (l = err; (l = strstr(l, "WARNING: ")); l++)
		warns++;
	for (l = err; (l = strstr(l, "accepted after 6 failed attempt(s)")); l++)
		backs++;
	ck_assert_msg(warns == 1 && backs == 1 && strstr(err, "overloaded, request 0") &&
			      strstr(err, "until the backend is back"),
		      "%d warnings, %d lines when it is back: %s", warns, backs, err);
	free(err);
	/* --timeout is --once's: a daemon outlives an outage */
	rc = push_run(dir, rx.port, bad, &err);
	ck_assert_msg(rc == 2 && strstr(err, "--timeout applies to --once only"), "exit %d: %s", rc,
		      err);
	free(err);
	/* a 403, which ends --once at once, a daemon retries: the backend may be
	 * fixed meanwhile; SIGTERM stops it */
	{
		static const char *const forever[] = {NULL};
		struct hrx h;
		int reqs = 0;
		pid_t pid;

		rx_hostile_start(&h, RX_FORBID);
		pid = push_spawnv(dir, h.port, forever);
		for (int n; reqs < 4 && (n = rx_wait_requests(&h, 30000)) > 0;)
			reqs += n;
		kill(pid, SIGTERM);
		ck_assert_int_eq(waitpid(pid, &rc, 0), pid);
		rx_hostile_stop(&h);
		ck_assert_int_ge(reqs, 4);
		ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "status %d", rc);
		ck_assert_int_eq(pos_read(dir), (long long)(t_base_ns() / T_NS) + 3 * INTERVAL);
	}
	t_rm_rf(dir);
	free(dir);
}
END_TEST

/*
 * cpa monitor --push URL (built as test_push_monitor; root + BTF): the
 * monitor runs cpa-push next to the stages; while the workload runs, sealed
 * windows reach the receiver, contiguous, holding the workload's samples.
 */
/* The child of parent whose /proc/PID/exe ends with name, or -1. */
static pid_t child_named(pid_t parent, const char *name)
{
	char path[128], buf[4096], exe[1100];
	FILE *f;
	long pid;
	pid_t found = -1;
	char *p, *end;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", parent, parent);
	f = fopen(path, "re");
	if (!f)
		return -1;
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = 0;
	fclose(f);
	for (p = buf; (pid = strtol(p, &end, 10)) > 0; p = end) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%ld/exe", pid);
		n = readlink(path, exe, sizeof(exe) - 1);
		if (n <= 0)
			continue;
		exe[n] = 0;
		if (strlen(exe) >= strlen(name) && !strcmp(exe + strlen(exe) - strlen(name), name))
			found = (pid_t)pid;
	}
	return found;
}

START_TEST(test_monitor_push)
{
	static char raw[1 << 20];
	const char *b = getenv("CPA_BUILD_DIR");
	char cpa[1100], wl[1100], url[64];
	pid_t mon, w;
	int st, i, n;

	snprintf(cpa, sizeof(cpa), "%s/bin/cpa", b);
	snprintf(wl, sizeof(wl), "%s/bin/cpa-workload", b);
	rx_start();
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", rx.port);
	mon = fork();
	ck_assert_int_ge(mon, 0);
	if (mon == 0) {
		execl(cpa, cpa, "monitor", "--store_dir", root, "-F", "99", "--duration", "34",
		      "--push", url, (char *)NULL);
		_exit(127);
	}
	sleep(2);
	w = fork();
	ck_assert_int_ge(w, 0);
	if (w == 0) {
		execl(wl, wl, "--seconds", "28", "--threads", "1", (char *)NULL);
		_exit(127);
	}
	/* cpa-push dies mid-run (its keeper is the monitor's child running cpa):
	 * the keeper restarts it, which resumes from its position */
	sleep(8);
	{
		pid_t keeper = child_named(mon, "/cpa"), pusher;

		ck_assert_int_gt(keeper, 0);
		pusher = child_named(keeper, "/cpa-push");
		ck_assert_int_gt(pusher, 0);
		ck_assert_int_eq(kill(pusher, SIGKILL), 0);
		sleep(3);
		ck_assert_int_gt(child_named(keeper, "/cpa-push"), 0);
		ck_assert_int_ne(child_named(keeper, "/cpa-push"), pusher);
	}
	ck_assert_int_eq(waitpid(w, &st, 0), w);
	ck_assert_int_eq(waitpid(mon, &st, 0), mon);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	n = atomic_load(&rx.n);
	fprintf(stderr, "monitor --push: %d uploads\n", n);
	ck_assert_int_ge(n, 1);
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(rx.up[i].until - rx.up[i].from, INTERVAL);
		if (i)
			ck_assert_int_eq(rx.up[i].from, rx.up[i - 1].until);
		ck_assert_int_gt(upload_samples(rx.up[i].path, raw, sizeof(raw)), 0);
	}
	ck_assert_ptr_nonnull(strstr(raw, "process:[cpa-workload]"));
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;
	int r;

#ifdef PUSH_MONITOR
	if (geteuid() != 0 || access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		fprintf(stderr, "skip: needs root and BTF\n");
		return TEST_SKIP;
	}
#endif
	t_utc();
	root = t_mkdtemp();
	/* Only the TCase this program runs: one never added would leak. */
	s = suite_create("push");
#if defined(PUSH_MONITOR)
	tc = tcase_create("monitor");
	tcase_add_test(tc, test_monitor_push);
#elif defined(PUSH_ONCE)
	tc = tcase_create("once");
	tcase_add_test(tc, test_push_once_backend_down);
	tcase_add_test(tc, test_push_once_refused);
	tcase_add_test(tc, test_push_once_export_fails);
	tcase_add_test(tc, test_push_daemon_outage);
#else
	tc = tcase_create("push");
	tcase_add_test(tc, test_push_restart_and_outage);
	tcase_add_test(tc, test_push_streaming_receiver);
	tcase_add_test(tc, test_push_sigterm_cancels_post);
	tcase_add_test(tc, test_push_bad_url);
#endif
	(void)test_monitor_push; /* the other program's case */
	(void)test_push_restart_and_outage;
	(void)test_push_streaming_receiver;
	(void)test_push_sigterm_cancels_post;
	(void)test_push_bad_url;
	(void)test_push_once_backend_down;
	(void)test_push_once_refused;
	(void)test_push_once_export_fails;
	(void)test_push_daemon_outage;
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	/* no fork: the receiver thread and its state live in this process */
	setenv("CK_FORK", "no", 1);
	r = test_run_suite(s);
	t_rm_rf(root);
	free(root);
	return r;
}
