// SPDX-License-Identifier: MIT
/*
 * cpa-push (push.h, docs/push.md). The loop:
 *
 *   pos = saved position (<root>/.cpa-push.pos), else the store's first
 *         record rounded down to the interval
 *   limit = newest record in the store - SEAL_MARGIN_S: a window that ends
 *         before it is in sealed blocks only (the storer closes a block at
 *         most block_seconds + 1 s of grace after its last second)
 *   while [pos, pos + interval) ends before limit:
 *         export it as pprof (every store dir that overlaps), POST it, and
 *         on a 2xx move pos on and save it (write + rename); on a failure
 *         keep pos and retry later with a growing delay (--once: for at
 *         most o->timeout s, and not a post the backend refused for good)
 *   when more than `backlog` windows wait (backend down for long), the
 *         oldest are given up, counted and logged: memory and disk use stay
 *         bounded whatever the backend does
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/safepath.h"
#include "common/timeutil.h"
#include "export/export.h"
#include "push.h"
#include "storer/store.h"

#define NS	      1000000000ull
#define SEAL_MARGIN_S (2 * STORE_BLOCK_SECONDS + 2)
#define MAX_DIRS      64

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

struct sdir {
	char path[PATH_MAX];
	struct store_reader *r;
	int64_t first, last; /* seconds */
	uint32_t freq;
};

static int dir_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sdir *)a)->path, ((const struct sdir *)b)->path);
}

/* Open every store dir under root, oldest first. */
static int dirs_open(const char *root, struct sdir *d, int max)
{
	DIR *dp = opendir(root);
	struct dirent *de;
	int n = 0;

	if (!dp)
		return -errno;
	while ((de = readdir(dp)) && n < max) {
		uint64_t a, b, recs;

		if (strncmp(de->d_name, "cpa_", 4))
			continue;
		snprintf(d[n].path, sizeof(d[n].path), "%s/%s", root, de->d_name);
		if (!store_dir__is_store(d[n].path) ||
		    store_reader__open(d[n].path, NULL, NULL, &d[n].r) < 0)
			continue;
		if (store_reader__range(d[n].r, &a, &b, &recs) < 0 || !recs) {
			store_reader__free(d[n].r);
			continue;
		}
		d[n].first = (int64_t)(a / NS);
		d[n].last = (int64_t)(b / NS);
		d[n].freq = 0;
		(void)export__store_freq(d[n].path, &d[n].freq);
		n++;
	}
	closedir(dp);
	qsort(d, (size_t)n, sizeof(*d), dir_cmp);
	return n;
}

static void dirs_close(struct sdir *d, int n)
{
	int i;

	for (i = 0; i < n; i++)
		store_reader__free(d[i].r);
}

/*
 * The saved position into *ret, -1 when there is none yet. A file that
 * cannot be read or holds no position is an error (logged): starting over
 * from the store's first record would post every kept window again.
 */
static int pos_load(const char *path, int64_t *ret)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	long long v;
	char *end;
	int r;

	*ret = -1;
	r = read_full_file(path, 0, 64, &buf, &len);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return log_error_errno(r,
				       "position file '%s': %m (nothing posted; remove it to "
				       "post from the store's first record)",
				       path);
	errno = 0;
	v = strtoll(buf, &end, 10);
	if (errno || end == buf || v < 0 || (*end && strcmp(end, "\n")))
		return log_error_errno(-EBADMSG,
				       "position file '%s' holds no position ('%.*s'): nothing "
				       "posted; remove it to post from the store's first record",
				       path, (int)strcspn(buf, "\n"), buf);
	*ret = v;
	return 0;
}

/* Written beside it, then renamed, in a directory walked without following
 * another user's link (common/safepath.h). */
static int pos_save(const char *path, int64_t pos)
{
	char tmp[NAME_MAX + 16], leaf[NAME_MAX + 1], err[PATH_MAX + 128], buf[32];
	_cleanup_close_ int dfd = -1, fd = -1;
	int r, n;

	r = safe_path__parent(path, &dfd, leaf, sizeof(leaf), err, sizeof(err));
	if (r < 0) {
		log_error("position file %s", err);
		return r;
	}
	fd = safe_path__tmpfile(dfd, leaf, 0640, tmp, sizeof(tmp), err, sizeof(err));
	if (fd < 0) {
		log_error("position file %s", err);
		return fd;
	}
	n = snprintf(buf, sizeof(buf), "%lld\n", (long long)pos);
	if (write(fd, buf, (size_t)n) != n || fsync(fd) != 0) {
		r = errno ? -errno : -EIO;
		unlinkat(dfd, tmp, 0);
		return r;
	}
	if (renameat(dfd, tmp, dfd, leaf) < 0) {
		r = -errno;
		unlinkat(dfd, tmp, 0);
		return r;
	}
	return 0;
}

/* The window's pprof into tmp; 1 when written, 0 when the window holds no row. */
static int export_window(struct sdir *d, int nd, int64_t a, int64_t b, const char *tmp)
{
	struct export_opts eo = {.t0_ns = (uint64_t)a * NS, .t1_ns = (uint64_t)b * NS};
	struct export_stats st;
	struct store_filter f;
	struct exporter *e;
	int i, r;

	store_filter__init(&f);
	for (i = 0; i < nd; i++)
		if (d[i].freq)
			eo.freq = d[i].freq;
	r = export__new(EXPORT_PPROF, &eo, &e);
	if (r < 0)
		return r;
	for (i = 0; i < nd; i++) {
		if (d[i].last < a || d[i].first >= b)
			continue;
		export__new_source(e);
		r = store_reader__query(d[i].r, eo.t0_ns, eo.t1_ns, &f, export__add, e);
		if (r < 0)
			goto out;
	}
	export__stats(e, &st);
	r = 0;
	if (st.rows[0]) {
		r = export__write(e, tmp);
		if (r < 0)
			log_error("pprof of [%lld, %lld): %s", (long long)a, (long long)b,
				  export__error(e));
		else
			r = 1;
	}
out:
	export__free(e);
	return r;
}

#define POST_TIMEOUT_MS 30000 /* one post, connecting included */

struct poster {
	CURL *c;
	const struct push_opts *o;
	char host[256];
	long timeout_ms; /* this post's bound: POST_TIMEOUT_MS, less near --once's end */
};

/*
 * Parca's WriteRaw (profilestore.v1alpha1) in its REST/JSON mapping: one
 * series labelled __name__ and host, the pprof base64'd as rawProfile.
 */
static char *parca_body(const struct poster *p, const char *pb, size_t len, size_t *ret_len)
{
	static const char b64[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t cap = len / 3 * 4 + 1024 + strlen(p->o->name) + strlen(p->host), n, i;
	char *out = malloc(cap);

	if (!out)
		return NULL;
	n = (size_t)snprintf(out, cap,
			     "{\"series\":[{\"labels\":{\"labels\":[{\"name\":\"__name__\","
			     "\"value\":\"%s\"},{\"name\":\"host\",\"value\":\"%s\"}]},"
			     "\"samples\":[{\"rawProfile\":\"",
			     p->o->name, p->host);
	for (i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)(uint8_t)pb[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)(uint8_t)pb[i + 1] << 8;
		if (i + 2 < len)
			v |= (uint8_t)pb[i + 2];
		out[n++] = b64[v >> 18 & 63];
		out[n++] = b64[v >> 12 & 63];
		out[n++] = i + 1 < len ? b64[v >> 6 & 63] : '=';
		out[n++] = i + 2 < len ? b64[v & 63] : '=';
	}
	n += (size_t)snprintf(out + n, cap - n, "\"}]}],\"normalized\":false}");
	*ret_len = n;
	return out;
}

/*
 * The response body is read and discarded: its first RESP_KEEP bytes are
 * kept for the log of a failed post, and a body over RESP_MAX bytes aborts
 * the transfer as a failure (a receiver that streams without end must not
 * fill our stdout, the journal or memory).
 */
#define RESP_KEEP 2048
#define RESP_MAX  (1024 * 1024)

struct resp {
	char head[RESP_KEEP + 1];
	size_t n;     /* bytes kept in head */
	size_t total; /* bytes received */
};

static size_t resp_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct resp *rs = arg;
	size_t len = size * nmemb, keep = MIN(len, RESP_KEEP - rs->n);

	memcpy(rs->head + rs->n, data, keep);
	rs->n += keep;
	rs->total += len;
	return rs->total > RESP_MAX ? 0 : len; /* 0: CURLE_WRITE_ERROR */
}

/* Called at least once a second while a post runs: a stop (SIGTERM, SIGINT)
 * aborts the post in flight, which keeps its window for the next start. */
static int xfer_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)arg, (void)dt, (void)dn, (void)ut, (void)un;
	return stop ? 1 : 0;
}

/* The kept head of a response as one printable log line. */
static const char *resp_text(struct resp *rs)
{
	size_t i;

	for (i = 0; i < rs->n; i++)
		if ((unsigned char)rs->head[i] < 0x20 || (unsigned char)rs->head[i] > 0x7e)
			rs->head[i] = ' ';
	rs->head[rs->n] = 0;
	return rs->head;
}

/*
 * An answer that the same post will get again, however long it is retried: a
 * redirect (not followed) or a 4xx but 408 Request Timeout, 425 Too Early and
 * 429 Too Many Requests.
 */
static bool refused_for_good(long code)
{
	return code >= 300 && code <= 499 && code != 408 && code != 425 && code != 429;
}

/* POST the window's pprof as the backend wants it; 0 on a 2xx, -ECANCELED on a
 * stop, -EREMOTEIO on an answer that refused_for_good(), else -EIO; the failure
 * in why (the caller logs it). */
static int post(struct poster *p, int64_t a, int64_t b, uint32_t freq, const char *body, size_t len,
		char *why, size_t whylen)
{
	char name[512], url[4096], hdr[300];
	struct curl_slist *h = NULL;
	_cleanup_free_ char *json = NULL;
	_cleanup_free_ struct resp *rs = calloc(1, sizeof(*rs));
	char *ename;
	long code = 0;
	CURLcode cr;

	if (!rs)
		return -ENOMEM;
	if (p->o->parca) {
		json = parca_body(p, body, len, &len);
		if (!json)
			return -ENOMEM;
		body = json;
		snprintf(url, sizeof(url), "%s/profiles/writeraw", p->o->url);
		h = curl_slist_append(h, "Content-Type: application/json");
	} else {
		snprintf(name, sizeof(name), "%s{host=%s}", p->o->name, p->host);
		ename = curl_easy_escape(p->c, name, 0);
		if (!ename)
			return -ENOMEM;
		snprintf(url, sizeof(url),
			 "%s/ingest?name=%s&from=%lld&until=%lld&format=pprof&spyName=cpa&"
			 "sampleRate=%u",
			 p->o->url, ename, (long long)a, (long long)b, freq);
		curl_free(ename);
		h = curl_slist_append(h, "Content-Type: application/octet-stream");
	}
	if (p->o->org_id) {
		snprintf(hdr, sizeof(hdr), "X-Scope-OrgID: %s", p->o->org_id);
		h = curl_slist_append(h, hdr);
	}
	curl_easy_reset(p->c);
	curl_easy_setopt(p->c, CURLOPT_URL, url);
	curl_easy_setopt(p->c, CURLOPT_POST, 1L);
	curl_easy_setopt(p->c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(p->c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(p->c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(p->c, CURLOPT_TIMEOUT_MS, p->timeout_ms);
	curl_easy_setopt(p->c, CURLOPT_CONNECTTIMEOUT, 5L);
	curl_easy_setopt(p->c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(p->c, CURLOPT_WRITEFUNCTION, resp_write);
	curl_easy_setopt(p->c, CURLOPT_WRITEDATA, rs);
	curl_easy_setopt(p->c, CURLOPT_XFERINFOFUNCTION, xfer_progress);
	curl_easy_setopt(p->c, CURLOPT_NOPROGRESS, 0L);
	cr = curl_easy_perform(p->c);
	curl_slist_free_all(h);
	curl_easy_getinfo(p->c, CURLINFO_RESPONSE_CODE, &code);
	if (cr == CURLE_ABORTED_BY_CALLBACK) {
		log_info("post [%lld, %lld) to %s: cancelled by stop, kept for the next start",
			 (long long)a, (long long)b, p->o->url);
		return -ECANCELED;
	}
	if (cr == CURLE_WRITE_ERROR && rs->total > RESP_MAX) {
		snprintf(why, whylen,
			 "post [%lld, %lld) to %s: HTTP %ld with a response over %d KiB: aborted, "
			 "counted as failed; it began: %s",
			 (long long)a, (long long)b, p->o->url, code, RESP_MAX / 1024,
			 resp_text(rs));
		return -EIO;
	}
	if (cr != CURLE_OK) {
		snprintf(why, whylen, "post [%lld, %lld) to %s: %s", (long long)a, (long long)b,
			 p->o->url, curl_easy_strerror(cr));
		return -EIO;
	}
	if (code < 200 || code > 299) {
		snprintf(why, whylen, "post [%lld, %lld) to %s: HTTP %ld: %s", (long long)a,
			 (long long)b, p->o->url, code, rs->n ? resp_text(rs) : "(empty body)");
		return refused_for_good(code) ? -EREMOTEIO : -EIO;
	}
	return 0;
}

/*
 * A backend that is down fails post after post, each reading its own way
 * (a refused connection, a 503 whose body names the request): the first
 * failure of an outage is one warning, the rest are logged at debug level
 * (--verbose), and the post accepted after it one info line: an outage is
 * two lines in the journal however long it lasts.
 */
static void failing_log(const struct push_opts *o, const char *why, uint32_t failing,
			uint32_t delay)
{
	if (failing > 1)
		log_debug("%s (attempt %u)", why, failing);
	else if (o->once)
		log_warn(
			"%s; kept, retried in %u ms, the delay doubling up to %u s, for up to %u s "
			"(--timeout); further failures are logged with --verbose only",
			why, delay, o->interval, o->timeout);
	else
		log_warn("%s; kept, retried in %u ms, the delay doubling up to %u s, until the "
			 "backend is back (said once: further failures are logged with --verbose "
			 "only)",
			 why, delay, o->interval);
}

/*
 * --once gives up (a refused post, or none accepted for --timeout s): one
 * line naming the windows it leaves, which stay unposted on disk for the
 * next run.
 */
static void once_give_up(const struct push_opts *o, int r, const char *why, uint32_t failing,
			 int64_t pos, int64_t limit, const char *posf)
{
	int64_t n = (limit - pos) / (int64_t)o->interval, end = pos + n * (int64_t)o->interval;
	char what[128];

	if (r == -EREMOTEIO)
		snprintf(what, sizeof(what), "refused by the backend, not retried");
	else
		snprintf(what, sizeof(what), "no post accepted in %u s (--timeout), %u attempt(s)",
			 o->timeout, failing);
	log_error("--once: %s: %s; windows [%lld, %lld) (%lld of %u s) not posted; nothing lost: "
		  "the position stays at %lld in %s, the next run starts there",
		  why, what, (long long)pos, (long long)end, (long long)n, o->interval,
		  (long long)pos, posf);
}

/* ns from now to end, 0 when past it */
static uint64_t ns_left(uint64_t end, uint64_t now)
{
	return end > now ? end - now : 0;
}

static void sleep_ms(uint32_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (!stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int push__run(const struct push_opts *o, struct push_stats *ret)
{
	struct push_stats st = {0};
	struct poster p = {.o = o};
	char posf[PATH_MAX], tmp[PATH_MAX];
	struct sigaction sa = {.sa_handler = on_signal};
	/* the first retry's delay, doubled up to the interval: never past it */
	uint32_t delay0 = MIN(o->retry_ms, o->interval * 1000u), delay = delay0;
	uint32_t failing = 0;		 /* failed posts in a row */
	uint64_t fail_since = 0, t0 = 0; /* CLOCK_MONOTONIC ns: the first of them began */
	const uint64_t bound = (uint64_t)o->timeout * NSEC_PER_SEC; /* --once */
	bool waiting_said = false;
	char why[RESP_KEEP + 1024] = "";
	int r = 0;

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (o->host)
		snprintf(p.host, sizeof(p.host), "%s", o->host);
	else if (gethostname(p.host, sizeof(p.host) - 1) < 0)
		snprintf(p.host, sizeof(p.host), "unknown");
	snprintf(posf, sizeof(posf), "%s/.cpa-push.pos", o->root);
	snprintf(tmp, sizeof(tmp), "%s/.cpa-push.pb.gz", o->root);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0 || !(p.c = curl_easy_init()))
		return log_error_errno(-ENOMEM, "libcurl init failed");
	if (pos_load(posf, &st.pos) < 0) {
		curl_easy_cleanup(p.c);
		curl_global_cleanup();
		if (ret)
			*ret = st;
		return -EBADMSG;
	}
	if (st.pos >= 0)
		log_info("resuming at %lld (%s)", (long long)st.pos, posf);

	while (!stop) {
		struct sdir d[MAX_DIRS];
		int nd = dirs_open(o->root, d, MAX_DIRS), i;
		int64_t first = INT64_MAX, last = INT64_MIN, limit, waiting;
		bool posted = false;

		if (nd < 0) {
			r = log_error_errno(nd, "read '%s': %m", o->root);
			break;
		}
		for (i = 0; i < nd; i++) {
			first = MIN(first, d[i].first);
			last = MAX(last, d[i].last);
		}
		if (!nd) {
			dirs_close(d, nd);
			if (o->once)
				break;
			if (!waiting_said)
				log_info("no store under '%s' yet (no cpa_* dir with records): "
					 "waiting for one",
					 o->root);
			waiting_said = true;
			sleep_ms(1000);
			continue;
		}
		if (st.pos < 0)
			st.pos = first - first % o->interval;
		limit = last - SEAL_MARGIN_S;
		waiting = (limit - st.pos) / (int64_t)o->interval;
		if (waiting > (int64_t)o->backlog) {
			int64_t skip = waiting - o->backlog;

			log_warn(
				"backlog of %lld windows: giving up the oldest %lld ([%lld, %lld))",
				(long long)waiting, (long long)skip, (long long)st.pos,
				(long long)(st.pos + skip * o->interval));
			st.windows_dropped += (uint64_t)skip;
			st.pos += skip * o->interval;
		}
		while (!stop && st.pos + (int64_t)o->interval <= limit) {
			int64_t a = st.pos, b = st.pos + o->interval;
			uint32_t freq = 0;
			size_t len = 0;
			_cleanup_free_ char *body = NULL;
			char err[PATH_MAX + 128];

			/* not another user's link (export__write() opens it by name) */
			r = safe_path__check(tmp, err, sizeof(err));
			if (r < 0) {
				log_error("%s", err);
				break;
			}
			/* this attempt began: an outage's first one starts --timeout */
			t0 = clock_ns(CLOCK_MONOTONIC);
			r = export_window(d, nd, a, b, tmp);
			if (r < 0) {
				snprintf(why, sizeof(why), "export [%lld, %lld) to '%.2048s': %s",
					 (long long)a, (long long)b, tmp, strerror(-r));
				/* a full disk frees up: retried as a failed post */
				if (r == -ENOSPC || r == -EFBIG || r == -EDQUOT)
					r = -EIO;
				break;
			}
			if (r == 0) {
				st.windows_empty++;
			} else {
				for (i = 0; i < nd; i++)
					if (d[i].freq)
						freq = d[i].freq;
				r = read_full_file(tmp, 0, SIZE_MAX, &body, &len);
				if (r < 0) {
					snprintf(why, sizeof(why), "read '%.2048s': %s", tmp,
						 strerror(-r));
					r = -EIO; /* retried, as a failed post */
					break;
				}
				/* --once ends about bound after its first failed post
				 * began, a post in flight too */
				p.timeout_ms = POST_TIMEOUT_MS;
				if (o->once)
					p.timeout_ms = (long)MIN(
						POST_TIMEOUT_MS,
						MAX(failing ? ns_left(fail_since + bound, t0)
							    : bound,
						    NSEC_PER_SEC) /
							NSEC_PER_MSEC);
				r = post(&p, a, b, freq, body, len, why, sizeof(why));
				if (r == -ECANCELED) {
					r = 0; /* stopping: the window stays for the next start */
					break;
				}
				if (r < 0)
					break; /* retried after a delay, below */
				if (failing)
					log_info("post [%lld, %lld) to %s accepted after %u failed "
						 "attempt(s) in %.1f s: the backend is back",
						 (long long)a, (long long)b, o->url, failing,
						 (double)(clock_ns(CLOCK_MONOTONIC) - fail_since) /
							 NSEC_PER_SEC);
				failing = 0;
				fail_since = 0;
				st.posts++;
				posted = true;
			}
			st.pos = b;
			r = pos_save(posf, st.pos);
			if (r < 0) {
				snprintf(why, sizeof(why),
					 "save the position %lld to '%.2048s': %s (on disk it is "
					 "behind: [%lld, %lld) may be posted again)",
					 (long long)st.pos, posf, strerror(-r), (long long)a,
					 (long long)b);
				log_error("%s", why);
				break;
			}
			delay = delay0;
			if (o->max_posts && (long)st.posts >= o->max_posts) {
				stop = 1;
				break;
			}
		}
		dirs_close(d, nd);
		if (r == -EREMOTEIO && !o->once)
			r = -EIO; /* a daemon retries it: the backend may be fixed meanwhile */
		if (r == -EIO || r == -EREMOTEIO) {
			uint64_t now = clock_ns(CLOCK_MONOTONIC), left;

			st.post_errors++;
			if (!failing++)
				fail_since = t0;
			left = ns_left(fail_since + bound, now);
			if (o->once && (r == -EREMOTEIO || !left)) {
				r = r == -EREMOTEIO ? r : -ETIMEDOUT;
				once_give_up(o, r, why, failing, st.pos, limit, posf);
				break;
			}
			failing_log(o, why, failing, delay);
			sleep_ms(o->once ? (uint32_t)MIN((uint64_t)delay, left / NSEC_PER_MSEC)
					 : delay);
			delay = MIN(delay * 2, o->interval * 1000u);
			r = 0;
			continue;
		}
		if (r < 0)
			break;
		if (o->once && !posted && st.pos + (int64_t)o->interval > limit)
			break;
		if (!posted)
			sleep_ms(1000);
	}
	unlink(tmp);
	curl_easy_cleanup(p.c);
	curl_global_cleanup();
	if (ret)
		*ret = st;
	return r < 0 ? r : 0;
}
